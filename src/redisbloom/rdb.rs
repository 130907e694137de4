//! The RDB encodings inside a module value: lengths, module opcodes, and strings (plain or
//! LZF-compressed).
//!
//! A length is 1, 2, 5 or 9 bytes, chosen by the top bits of its first byte: `00` a 6-bit
//! value, `01` a 14-bit big-endian value, `0x80` a 32-bit and `0x81` a 64-bit big-endian value
//! after it. `11` marks a string's special encoding in its low 6 bits: 0, 1, 2 an 8-, 16- or
//! 32-bit integer, 3 LZF (compressed length, uncompressed length, data). Module fields are an
//! opcode (itself a length) followed by the value.

use std::borrow::Cow;

use super::error::LoadError;
use super::lzf;

/// `RDB_TYPE_MODULE_2`: a module value whose fields carry opcodes.
pub(crate) const TYPE_MODULE_2: u8 = 7;
/// Module opcode: end of the value.
pub(crate) const OPCODE_EOF: u64 = 0;
/// Module opcode: an unsigned integer follows.
pub(crate) const OPCODE_UINT: u64 = 2;
/// Module opcode: a string follows.
pub(crate) const OPCODE_STRING: u64 = 5;

/// String encoding (low 6 bits after `11`): LZF-compressed. 0..=2 are integers.
const ENC_LZF: u8 = 3;

/// Appends `n` in the shortest RDB length encoding, as Redis writes it.
pub(crate) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a module unsigned field.
pub(crate) fn put_uint(out: &mut Vec<u8>, value: u64) {
    put_len(out, OPCODE_UINT);
    put_len(out, value);
}

/// Appends a module string field, uncompressed.
pub(crate) fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, OPCODE_STRING);
    put_len(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A string read from a payload, not yet decompressed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RdbString<'a> {
    /// Stored as is.
    Plain(&'a [u8]),
    /// LZF-compressed at payload offset `offset`, `len` bytes once decompressed.
    Lzf {
        offset: usize,
        data: &'a [u8],
        len: u64,
    },
    /// Stored as an integer: Redis does this for any string that is a canonical decimal
    /// number of up to 11 characters, so a sub-filter whose bytes happen to be ASCII digits
    /// (`"33333333"`) comes out this way. The string is the number in decimal.
    Integer(i64),
}

impl<'a> RdbString<'a> {
    /// The string's length once decompressed.
    pub(crate) fn len(&self) -> u64 {
        match *self {
            RdbString::Plain(bytes) => bytes.len() as u64,
            RdbString::Lzf { len, .. } => len,
            RdbString::Integer(n) => n.to_string().len() as u64,
        }
    }

    /// The string's bytes (decompressing them if needed).
    pub(crate) fn into_bytes(self) -> Result<Cow<'a, [u8]>, LoadError> {
        match self {
            RdbString::Plain(bytes) => Ok(Cow::Borrowed(bytes)),
            RdbString::Lzf { offset, data, len } => {
                let declared = usize::try_from(len).unwrap_or(usize::MAX);
                lzf::decompress(data, declared)
                    .map(Cow::Owned)
                    .map_err(|error| LoadError::Lzf { offset, error })
            }
            RdbString::Integer(n) => Ok(Cow::Owned(n.to_string().into_bytes())),
        }
    }
}

/// A first length byte: a plain length, or a string's special encoding.
enum LenField {
    Plain(u64),
    Encoded(u8),
}

/// Reads RDB fields from a payload, never past its end.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    /// Offset of the next byte.
    pub(crate) fn offset(&self) -> usize {
        self.at
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes; `start` is where the field they belong to starts.
    fn take(&mut self, n: u64, start: usize) -> Result<&'a [u8], LoadError> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or(LoadError::Truncated { offset: start })?;
        let bytes = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, LoadError> {
        let start = self.at;
        Ok(self.take(1, start)?[0])
    }

    fn len_field(&mut self) -> Result<LenField, LoadError> {
        let start = self.at;
        let first = self.byte()?;
        let value = match first >> 6 {
            0 => u64::from(first & 0x3f),
            1 => u64::from(first & 0x3f) << 8 | u64::from(self.take(1, start)?[0]),
            3 => return Ok(LenField::Encoded(first & 0x3f)),
            _ => match first {
                0x80 => u64::from(u32::from_be_bytes(
                    self.take(4, start)?.try_into().expect("4 bytes"),
                )),
                0x81 => u64::from_be_bytes(self.take(8, start)?.try_into().expect("8 bytes")),
                _ => {
                    return Err(LoadError::LengthEncoding {
                        offset: start,
                        byte: first,
                    })
                }
            },
        };
        Ok(LenField::Plain(value))
    }

    /// A length, where a string's special encoding has no meaning. (Redis would read the
    /// encoding's low 6 bits as the value; no writer produces that.)
    pub(crate) fn len(&mut self) -> Result<u64, LoadError> {
        let start = self.at;
        match self.len_field()? {
            LenField::Plain(n) => Ok(n),
            LenField::Encoded(_) => Err(LoadError::LengthEncoding {
                offset: start,
                byte: self.bytes[start],
            }),
        }
    }

    /// A module opcode, which must be `expected`.
    pub(crate) fn opcode(&mut self, expected: u64) -> Result<(), LoadError> {
        let offset = self.at;
        let found = self.len()?;
        if found != expected {
            return Err(LoadError::Opcode {
                offset,
                expected,
                found,
            });
        }
        Ok(())
    }

    /// A module unsigned field.
    pub(crate) fn uint(&mut self) -> Result<u64, LoadError> {
        self.opcode(OPCODE_UINT)?;
        self.len()
    }

    /// A module string field; its length is checked against the payload (for an LZF string,
    /// the compressed length), nothing is decompressed yet.
    pub(crate) fn string(&mut self) -> Result<RdbString<'a>, LoadError> {
        self.opcode(OPCODE_STRING)?;
        let start = self.at;
        match self.len_field()? {
            LenField::Plain(len) => Ok(RdbString::Plain(self.take(len, start)?)),
            LenField::Encoded(ENC_LZF) => {
                let compressed = self.len()?;
                let len = self.len()?;
                let offset = self.at;
                let data = self.take(compressed, start)?;
                Ok(RdbString::Lzf { offset, data, len })
            }
            LenField::Encoded(width @ 0..=2) => {
                // 0xC0, 0xC1, 0xC2: a little-endian signed integer of 1, 2 or 4 bytes.
                let bytes = self.take(1 << width, start)?;
                let mut le = [0u8; 8];
                le[..bytes.len()].copy_from_slice(bytes);
                let shift = 64 - 8 * bytes.len() as u32;
                Ok(RdbString::Integer(
                    (i64::from_le_bytes(le) << shift) >> shift,
                ))
            }
            LenField::Encoded(_) => Err(LoadError::StringEncoding {
                offset: start,
                byte: self.bytes[start],
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_len(&mut out, n);
        out
    }

    #[test]
    fn length_encoding_at_each_boundary() {
        assert_eq!(encoded(0), [0x00]);
        assert_eq!(encoded(63), [0x3f]);
        assert_eq!(encoded(64), [0x40, 0x40]);
        assert_eq!(encoded(16383), [0x7f, 0xff]);
        assert_eq!(encoded(16384), [0x80, 0x00, 0x00, 0x40, 0x00]);
        assert_eq!(encoded(u32::MAX.into()), [0x80, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(encoded(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
        for n in [
            0,
            1,
            63,
            64,
            300,
            16383,
            16384,
            1 << 31,
            u32::MAX.into(),
            1 << 32,
            u64::MAX,
        ] {
            let bytes = encoded(n);
            let mut r = Reader::new(&bytes);
            assert_eq!(r.len(), Ok(n));
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn module_id_is_a_64_bit_length() {
        assert_eq!(
            encoded(0x3016_e5a2_8982_1404),
            [0x81, 0x30, 0x16, 0xe5, 0xa2, 0x89, 0x82, 0x14, 0x04]
        );
    }

    /// Redis reads lengths with any encoding, not only the shortest.
    #[test]
    fn accepts_longer_than_needed_lengths() {
        let mut r = Reader::new(&[0x40, 0x05, 0x80, 0, 0, 0, 7, 0x81, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!(r.len(), Ok(5));
        assert_eq!(r.len(), Ok(7));
        assert_eq!(r.len(), Ok(2));
    }

    #[test]
    fn rejects_invalid_and_truncated_lengths() {
        assert_eq!(
            Reader::new(&[0x82]).len(),
            Err(LoadError::LengthEncoding {
                offset: 0,
                byte: 0x82
            })
        );
        assert_eq!(
            Reader::new(&[0xc3]).len(),
            Err(LoadError::LengthEncoding {
                offset: 0,
                byte: 0xc3
            })
        );
        for bytes in [
            &[][..],
            &[0x40],
            &[0x80, 0, 0, 0],
            &[0x81, 0, 0, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(
                Reader::new(bytes).len(),
                Err(LoadError::Truncated { offset: 0 })
            );
        }
    }

    #[test]
    fn strings_plain_lzf_and_rejected_encodings() {
        let mut bytes = Vec::new();
        put_string(&mut bytes, b"abc");
        let s = Reader::new(&bytes).string().unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(&*s.into_bytes().unwrap(), b"abc");

        // 05, LZF: compressed 6 bytes, uncompressed 10 ("abcabcabca").
        let lzf = [0x05, 0xc3, 0x06, 0x0a, 0x02, b'a', b'b', b'c', 0xa0, 0x02];
        let s = Reader::new(&lzf).string().unwrap();
        assert_eq!(s.len(), 10);
        assert_eq!(&*s.into_bytes().unwrap(), b"abcabcabca");

        let mut broken = lzf;
        broken[9] = 0x09;
        let error = Reader::new(&broken).string().unwrap().into_bytes();
        assert!(
            matches!(error, Err(LoadError::Lzf { offset: 4, .. })),
            "{error:?}"
        );

        // Integer encodings read as the decimal text of the number (sign-extended).
        for (bytes, text) in [
            (&[0x05, 0xc0, 0x7b][..], "123"),
            (&[0x05, 0xc0, 0xff][..], "-1"),
            (&[0x05, 0xc1, 0x39, 0x30][..], "12345"),
            (&[0x05, 0xc2, 0x55, 0xa0, 0xfc, 0x01][..], "33333333"),
        ] {
            let s = Reader::new(bytes).string().unwrap();
            assert_eq!(s.len(), text.len() as u64);
            assert_eq!(&*s.into_bytes().unwrap(), text.as_bytes());
        }
        assert!(matches!(
            Reader::new(&[0x05, 0xc2, 1, 2]).string(),
            Err(LoadError::Truncated { .. })
        ));
        assert_eq!(
            Reader::new(&[0x05, 0xc4]).string().unwrap_err(),
            LoadError::StringEncoding {
                offset: 1,
                byte: 0xc4
            }
        );
        assert_eq!(
            Reader::new(&[0x05, 0x04, b'a']).string().unwrap_err(),
            LoadError::Truncated { offset: 1 }
        );
        assert_eq!(
            Reader::new(&[0x02, 0x01]).string().unwrap_err(),
            LoadError::Opcode {
                offset: 0,
                expected: OPCODE_STRING,
                found: OPCODE_UINT
            }
        );
    }
}
