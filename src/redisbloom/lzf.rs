//! LZF decompression (liblzf's format), for the compressed strings in Redis `DUMP` payloads.
//!
//! The data is a sequence of instructions, each starting with a control byte `c`:
//! - `c < 32`: a literal run; the next `c + 1` bytes are copied to the output.
//! - otherwise a back-reference of length `(c >> 5) + 2`; if `c >> 5` is 7, the next byte is
//!   added to the length. Then one more byte `b` gives the distance
//!   `((c & 0x1f) << 8 | b) + 1` back from the end of the output. The copy may overlap the
//!   bytes it produces (distance 1 repeats the last byte).

use super::error::LzfError;

/// The most output one input byte can give: a 3-byte back-reference copies at most 264 bytes.
const MAX_RATIO: usize = 88;

/// Decompresses `input`, which must produce exactly `declared` bytes (as Redis requires).
/// Never reads or writes out of bounds, and allocates at most `declared` bytes, which is
/// checked against the input's length first.
pub(crate) fn decompress(input: &[u8], declared: usize) -> Result<Vec<u8>, LzfError> {
    if declared > input.len().saturating_mul(MAX_RATIO) {
        return Err(LzfError::ImpossibleLength {
            declared,
            input: input.len(),
        });
    }
    let mut out = Vec::with_capacity(declared);
    let mut at = 0;
    while at < input.len() {
        at = step(input, at, &mut out, declared)?;
    }
    if out.len() != declared {
        return Err(LzfError::OutputTooShort {
            produced: out.len(),
            declared,
        });
    }
    Ok(out)
}

/// Runs the instruction at `at`, returning where the next one starts.
fn step(input: &[u8], at: usize, out: &mut Vec<u8>, declared: usize) -> Result<usize, LzfError> {
    let ctrl = usize::from(input[at]);
    let byte = |i: usize| input.get(i).copied().ok_or(LzfError::Truncated { at });
    let too_long = LzfError::OutputTooLong { at, declared };
    if ctrl < 32 {
        let literal = input
            .get(at + 1..at + 2 + ctrl)
            .ok_or(LzfError::Truncated { at })?;
        if out.len() + literal.len() > declared {
            return Err(too_long);
        }
        out.extend_from_slice(literal);
        return Ok(at + 2 + ctrl);
    }
    let mut len = ctrl >> 5;
    let mut next = at + 1;
    if len == 7 {
        len += usize::from(byte(next)?);
        next += 1;
    }
    let distance = ((ctrl & 0x1f) << 8 | usize::from(byte(next)?)) + 1;
    let len = len + 2;
    if out.len() + len > declared {
        return Err(too_long);
    }
    let from = out
        .len()
        .checked_sub(distance)
        .ok_or(LzfError::BackReferenceBeforeStart {
            at,
            distance,
            produced: out.len(),
        })?;
    // Byte by byte: when the distance is shorter than the length, the copy reads bytes it has
    // just written.
    for i in from..from + len {
        out.push(out[i]);
    }
    Ok(next + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_runs() {
        assert_eq!(decompress(&[0x02, b'a', b'b', b'c'], 3).unwrap(), b"abc");
        let mut long = vec![31u8];
        long.extend(0..32u8);
        assert_eq!(
            decompress(&long, 32).unwrap(),
            (0..32u8).collect::<Vec<_>>()
        );
        assert_eq!(decompress(&[], 0).unwrap(), b"");
    }

    /// "abcabcabca": literal "abc", then 7 bytes from 3 back: ctrl (7-2)<<5 = 0xa0, offset 2.
    #[test]
    fn overlapping_back_reference() {
        let input = [0x02, b'a', b'b', b'c', 0xa0, 0x02];
        assert_eq!(decompress(&input, 10).unwrap(), b"abcabcabca");
    }

    /// 64 zero bytes: one literal zero, then 63 from 1 back: length 63 = 7 + 54 + 2, so ctrl
    /// 0xe0, extra length byte 54, offset byte 0.
    #[test]
    fn extended_length_run_of_one_byte() {
        let input = [0x00, 0x00, 0xe0, 54, 0x00];
        assert_eq!(decompress(&input, 64).unwrap(), vec![0u8; 64]);
    }

    /// The longest back-reference (264 bytes) and a far one: offset 0x1f << 8 | 0xff, + 1 =
    /// 8192 bytes back.
    #[test]
    fn longest_and_farthest_back_references() {
        let input = [0x01, 7, 9, 0xe0, 255, 0x01];
        let mut want = vec![7u8, 9];
        for _ in 0..132 {
            want.extend_from_slice(&[7, 9]);
        }
        assert_eq!(decompress(&input, 266).unwrap(), want);

        let mut input = Vec::new();
        let mut want = Vec::new();
        for block in 0..256u32 {
            input.push(31);
            let bytes: Vec<u8> = (0..32u32)
                .map(|i| (block * 32 + i) as u8 ^ (block >> 3) as u8)
                .collect();
            input.extend_from_slice(&bytes);
            want.extend_from_slice(&bytes);
        }
        input.extend_from_slice(&[0x1f | 0x20, 0xff]); // 3 bytes from 8192 back
        want.extend_from_within(0..3);
        assert_eq!(decompress(&input, 8195).unwrap(), want);
    }

    #[test]
    fn rejects_bad_streams() {
        assert_eq!(
            decompress(&[0x03, b'a', b'b'], 4),
            Err(LzfError::Truncated { at: 0 })
        );
        assert_eq!(
            decompress(&[0x00, b'a', 0x20], 3),
            Err(LzfError::Truncated { at: 2 })
        );
        assert_eq!(
            decompress(&[0x00, b'a', 0xe0], 20),
            Err(LzfError::Truncated { at: 2 })
        );
        assert_eq!(
            decompress(&[0x00, b'a', 0xe0, 0x01], 20),
            Err(LzfError::Truncated { at: 2 })
        );
        assert_eq!(
            decompress(&[0x00, b'a', 0x20, 0x01], 4),
            Err(LzfError::BackReferenceBeforeStart {
                at: 2,
                distance: 2,
                produced: 1
            })
        );
        assert_eq!(
            decompress(&[0x20, 0x00], 3),
            Err(LzfError::BackReferenceBeforeStart {
                at: 0,
                distance: 1,
                produced: 0
            })
        );
        assert_eq!(
            decompress(&[0x02, b'a', b'b', b'c'], 2),
            Err(LzfError::OutputTooLong { at: 0, declared: 2 })
        );
        assert_eq!(
            decompress(&[0x00, b'a', 0x20, 0x00], 2),
            Err(LzfError::OutputTooLong { at: 2, declared: 2 })
        );
        assert_eq!(
            decompress(&[0x01, b'a', b'b'], 3),
            Err(LzfError::OutputTooShort {
                produced: 2,
                declared: 3
            })
        );
        assert_eq!(
            decompress(&[0x00, 0x00], 177),
            Err(LzfError::ImpossibleLength {
                declared: 177,
                input: 2
            })
        );
    }

    #[test]
    fn never_panics_on_arbitrary_input() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let input: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let declared = (next() % 300) as usize;
            if let Ok(out) = decompress(&input, declared) {
                assert_eq!(out.len(), declared);
            }
        }
    }
}
