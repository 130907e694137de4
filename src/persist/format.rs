//! The snapshot format, field by field (see FORMAT.md at the repository root).
//!
//! Everything is little-endian and a whole number of `u64` words, which is also how the
//! checksum reads it.

use crate::bucket_layout::{BucketLayout, LayoutKind};
use crate::bucket_word::{MAX_BITS, MIN_BITS};
use crate::fixed::{TablePlan, WidthRule};
use crate::hashing::{MAX_BUCKETS, MIN_BUCKETS};
use crate::params;

use super::PersistError;

/// First 8 bytes of every snapshot.
pub(crate) const MAGIC: [u8; 8] = *b"ATCUCKOO";
/// Format version written by this build. Version 3: the header's flags name the bucket layout
/// (one word per bucket, packed, semi-sorted), and a level's block holds the layout's words.
pub(crate) const VERSION: u16 = 3;
/// The oldest version this build reads. Version 2: levels nest, fingerprints are the top bits of
/// the hash's low word, and every bucket is one word (version 1 derived keys differently, so
/// its tables cannot be read with version 2's mapping).
pub(crate) const OLDEST_VERSION: u16 = 2;
/// Words in the file header.
pub(crate) const HEADER_WORDS: usize = 8;
/// Words in a level header.
pub(crate) const LEVEL_HEADER_WORDS: usize = 3;
/// The value every filter's hasher hashes for the hasher check.
pub(crate) const HASHER_PROBE: &str = "atomic-cuckoo hasher check, format 1";
/// Largest expansion factor and level count that filters growing by levels wrote: a header
/// within them that grows is one of theirs (a format this build no longer reads), beyond them
/// it is corrupt.
const MAX_EXPANSION: u32 = 1 << 16;
const MAX_LEVELS: u32 = 64;

const RULE_FIXED_BITS: u32 = 1;
/// The target rate, split over levels by the earlier budget; a filter that does not grow gives
/// all of it to its one table, as `RULE_TARGET_RATE` does.
const RULE_TARGET_RATE_SPLIT: u32 = 2;
/// The target rate (split over levels by the harmonic budget when the filter grew by levels).
const RULE_TARGET_RATE: u32 = 3;

/// The layout codes of the header's flags (version 3).
const LAYOUTS: [(u16, LayoutKind); 3] = [
    (0, LayoutKind::OneWord),
    (1, LayoutKind::Packed),
    (2, LayoutKind::SemiSorted),
];

fn layout_code(kind: LayoutKind) -> u16 {
    LAYOUTS
        .iter()
        .find(|(_, k)| *k == kind)
        .map(|&(code, _)| code)
        .expect("every layout has a code")
}

/// The file header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Header {
    pub(crate) plan: TablePlan,
    pub(crate) items: u64,
    pub(crate) hasher_check: u64,
}

impl Header {
    pub(crate) fn encode(&self) -> [u64; HEADER_WORDS] {
        let (rule, bits, rate) = match self.plan.width {
            WidthRule::Fixed(bits) => (RULE_FIXED_BITS, bits, 0.0),
            WidthRule::Rate(rate) => (RULE_TARGET_RATE, 0, rate),
        };
        // No growth factor, one level of at most one.
        let (factor, max_levels, levels) = (0u64, 1u64, 1u64);
        [
            u64::from_le_bytes(MAGIC),
            u64::from(VERSION)
                | u64::from(layout_code(self.plan.layout)) << 16
                | u64::from(rule) << 32,
            u64::from(bits) | factor << 32,
            max_levels | levels << 32,
            rate.to_bits(),
            self.plan.capacity as u64,
            self.items,
            self.hasher_check,
        ]
    }

    /// Decodes and validates a header: every field in range, and the plan one the builder
    /// could have made. A filter that grew by levels (an expansion factor) wrote a format this
    /// build does not read: [`PersistError::RetiredFormat`].
    pub(crate) fn decode(w: &[u64; HEADER_WORDS]) -> Result<Self, PersistError> {
        if w[0].to_le_bytes() != MAGIC {
            return Err(PersistError::BadMagic);
        }
        let version = w[1] as u16;
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(PersistError::UnsupportedVersion { version });
        }
        let invalid = |field| Err(PersistError::InvalidParameter { field });
        let (flags, rule) = ((w[1] >> 16) as u16, (w[1] >> 32) as u32);
        // Version 2 has no layout: its buckets are one word each, and its flags are reserved.
        let layout = match LAYOUTS.iter().find(|&&(code, _)| code == flags) {
            Some(&(_, kind)) if version > 2 || kind == LayoutKind::OneWord => kind,
            _ if version == 2 => return invalid("flags"),
            _ => return invalid("bucket layout (unknown)"),
        };
        let (bits, factor) = (w[2] as u32, (w[2] >> 32) as u32);
        let (max_levels, levels) = (w[3] as u32, (w[3] >> 32) as u32);
        let rate = f64::from_bits(w[4]);
        let width = match rule {
            RULE_FIXED_BITS if (MIN_BITS..=MAX_BITS).contains(&bits) && w[4] == 0 => {
                WidthRule::Fixed(bits)
            }
            // Version 2 builds split the rate only the earlier way.
            RULE_TARGET_RATE if version == 2 => return invalid("width rule"),
            RULE_TARGET_RATE_SPLIT | RULE_TARGET_RATE
                if bits == 0 && params::rate_is_valid(rate) =>
            {
                WidthRule::Rate(rate)
            }
            RULE_FIXED_BITS | RULE_TARGET_RATE_SPLIT | RULE_TARGET_RATE => {
                return invalid("fingerprint width or rate")
            }
            _ => return invalid("width rule"),
        };
        if factor > MAX_EXPANSION {
            return invalid("expansion");
        }
        if !(1..=MAX_LEVELS).contains(&max_levels) || (factor == 0 && max_levels != 1) {
            return invalid("max_levels");
        }
        if !(1..=max_levels).contains(&levels) {
            return invalid("level count");
        }
        let capacity = usize::try_from(w[5]).unwrap_or(0);
        if capacity == 0 {
            return invalid("capacity");
        }
        if factor > 0 && max_levels > 1 {
            return Err(PersistError::RetiredFormat {
                written_by: "a CuckooFilter that grew by adding levels (Builder::expansion)",
            });
        }
        let plan = TablePlan {
            capacity,
            width,
            layout,
        };
        if plan.bits().is_err() {
            return invalid("false-positive rate (unreachable)");
        }
        Ok(Header {
            plan,
            items: w[6],
            hasher_check: w[7],
        })
    }
}

/// The header of one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LevelHeader {
    pub(crate) bits: u32,
    pub(crate) buckets: usize,
    pub(crate) items: u64,
    /// Words of the level's block (from the layout; not stored).
    pub(crate) words: usize,
}

impl LevelHeader {
    pub(crate) fn encode(&self) -> [u64; LEVEL_HEADER_WORDS] {
        [u64::from(self.bits), self.buckets as u64, self.items]
    }

    /// Decodes and validates a level header of a filter of layout `kind`: width in range,
    /// bucket count even and within the largest table, no more items than slots.
    pub(crate) fn decode(
        w: &[u64; LEVEL_HEADER_WORDS],
        kind: LayoutKind,
    ) -> Result<Self, PersistError> {
        let invalid = |field| Err(PersistError::InvalidParameter { field });
        let (bits, reserved) = (w[0] as u32, (w[0] >> 32) as u32);
        if reserved != 0 {
            return invalid("level reserved field");
        }
        let Some(layout) = BucketLayout::new(kind, bits) else {
            return invalid("level fingerprint width");
        };
        let buckets = w[1];
        if !(MIN_BUCKETS..=MAX_BUCKETS).contains(&buckets) || !buckets.is_multiple_of(2) {
            return invalid("level bucket count");
        }
        if w[2] > buckets * u64::from(layout.slots()) {
            return invalid("level item count");
        }
        let words = layout
            .words_for(buckets as usize)
            .ok_or(PersistError::InvalidParameter {
                field: "level bucket count",
            })?;
        Ok(LevelHeader {
            bits,
            buckets: buckets as usize,
            items: w[2],
            words,
        })
    }
}
