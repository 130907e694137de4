//! The lane width of a growable table: the narrowest that keeps the target rate for the
//! planned doublings.
//!
//! The rate after `T` doublings, for a table at load `α` whose entries were all stored with
//! `f` bits: an entry stored `j` doublings ago has `f − j` bits left, and the items stored
//! before each doubling are about half of those after it, so the expected number of matches of
//! an absent item in its two buckets of four lanes is about `8 α 2^-f (1 + T / 2)`. The width
//! is the smallest `f` that keeps this at the target for the planned doublings at the load at
//! which the table doubles; that `f` may keep the rate for more doublings than planned, and
//! the table doubles past them too (its rate then rises slowly).

use super::counts::Totals;
use super::keys::{KeyMap, ANCHOR_BITS};
use super::table::{Table, LANES};
use super::{largest_table_stripes, Doubling, Parts, MAX_DOUBLINGS, MAX_LOAD};
use crate::error::BuildError;

/// Doublings a growable filter keeps its target rate for: 17, so that a filter grows from its
/// first capacity to 131,072 times it within the target (at 1 %, 14-bit entries; the copies of
/// exhausted entries, not the rate formula, decide that width).
pub(crate) const PLANNED_DOUBLINGS: u32 = 17;

/// The doublings a table built for `capacity` items makes before it holds `expected` items
/// (each doubles what it takes before the next), at most `MAX_DOUBLINGS`; 0 when `expected`
/// is no more than `capacity`.
pub(crate) fn doublings_to_reach(capacity: usize, expected: usize) -> u32 {
    let mut doublings = 0;
    let mut holds = capacity.max(1) as u128;
    while holds < expected as u128 && doublings < MAX_DOUBLINGS {
        holds *= 2;
        doublings += 1;
    }
    doublings
}

/// Widest lane: a marker bit and 31 bits of entry.
const MAX_LANE_BITS: u32 = 32;

/// Fewest tail bits, whatever the rate and the plan. Past its planned doublings the table
/// doubles on, and an entry stored `j` doublings before the latest one with `T` tail bits has
/// `2^(j − T)` copies once `j > T`; the items stored before each doubling are half of those
/// after it, so after `D` doublings the copies add about `(D − T + 1) 2^−T` lanes per item. With
/// few tail bits that nears one lane per item, and a doubling then hardly lowers the load:
/// the table would double on every insert. Seven bits keep the copies under a fifth of the
/// lanes at the most doublings a table makes (32).
const MIN_TAIL_BITS: u32 = 7;

/// An empty growable table for `capacity` items before its first doubling (at least 1), that
/// keeps `rate` (strictly between 0 and 1) for `planned` doublings (at most `MAX_DOUBLINGS`).
///
/// # Errors
///
/// [`BuildError::UnreachableFalsePositiveRate`] (lanes would need more than 32 bits),
/// [`BuildError::CapacityTooLarge`] and [`BuildError::AllocationFailed`].
pub(crate) fn build(
    capacity: usize,
    rate: f64,
    planned: u32,
    huge_pages: bool,
) -> Result<Doubling, BuildError> {
    debug_assert!(capacity > 0 && rate > 0.0 && rate < 1.0 && planned <= MAX_DOUBLINGS);
    let entry_bits = entry_bits(rate, planned);
    if entry_bits >= MAX_LANE_BITS
        || matches_per_bit_weight(planned) * f64::from(entry_bits).exp2().recip() > rate
        || doublings_allowed(rate, entry_bits) < planned
    {
        return Err(BuildError::UnreachableFalsePositiveRate { rate });
    }
    let too_large = BuildError::CapacityTooLarge { items: capacity };
    let buckets = (capacity as f64 / (LANES as f64 * MAX_LOAD)).ceil() as u64;
    let base = buckets.max(2).next_multiple_of(2);
    if base > 1 << 32 {
        return Err(too_large);
    }
    let table = Table::new(base, entry_bits + 1, huge_pages).map_err(|bytes| match bytes {
        usize::MAX => too_large,
        bytes => BuildError::AllocationFailed { bytes },
    })?;
    Ok(Doubling::from_parts(Parts {
        keys: KeyMap::new(base),
        stripes: largest_table_stripes(base),
        table,
        planned: doublings_allowed(rate, entry_bits).min(MAX_DOUBLINGS),
        tail_bits: entry_bits - ANCHOR_BITS,
        target: rate,
        doublings: 0,
        splitting: None,
        totals: Totals::default(),
        rng: 0x2545_f491_4f6c_dd1d,
    }))
}

/// Whether [`build`] could have chosen lanes of `entry_bits` entry bits for
/// `rate` (strictly between 0 and 1) and some planned number of doublings, and would then allow
/// `max_doublings`: a restored snapshot's parameters must be such a choice.
pub(super) fn is_builder_choice(rate: f64, entry_bits: u32, max_doublings: u32) -> bool {
    (ANCHOR_BITS + 1..MAX_LANE_BITS).contains(&entry_bits)
        && doublings_allowed(rate, entry_bits).min(MAX_DOUBLINGS) == max_doublings
        && (0..=MAX_DOUBLINGS).any(|planned| {
            self::entry_bits(rate, planned) == entry_bits
                && matches_per_bit_weight(planned) * f64::from(entry_bits).exp2().recip() <= rate
                && doublings_allowed(rate, entry_bits) >= planned
        })
}

/// Expected matches of an absent item at load `MAX_LOAD` after `doublings` doublings, per
/// `2^-f` (see the module docs).
fn matches_per_bit_weight(doublings: u32) -> f64 {
    2.0 * LANES as f64 * MAX_LOAD * (1.0 + f64::from(doublings) / 2.0)
}

/// The entry bits (anchor and tail) that keep `rate` for `doublings` doublings: at least the
/// anchor and `MIN_TAIL_BITS`, and enough tail bits for the copies' bound.
fn entry_bits(rate: f64, doublings: u32) -> u32 {
    let bits = (matches_per_bit_weight(doublings) / rate).log2().ceil();
    // Saturating: a rate too small for any lane is refused by the caller.
    let fewest = f64::from(ANCHOR_BITS + MIN_TAIL_BITS);
    let mut bits = bits.clamp(fewest, f64::from(MAX_LANE_BITS)) as u32;
    while bits < MAX_LANE_BITS && doublings_allowed(rate, bits) < doublings {
        bits += 1;
    }
    bits
}

/// The most doublings `entry_bits` bits allow: within the rate and the copies' bound.
fn doublings_allowed(rate: f64, entry_bits: u32) -> u32 {
    let tail = entry_bits - ANCHOR_BITS;
    // The largest D with (D + 1) 2^-(tail + 1) <= 1/64, or 0.
    let copies_slack = (f64::from(tail + 1).exp2() / 64.0).floor().clamp(1.0, 64.0) as u32 - 1;
    doublings_within(rate, entry_bits).min(tail + copies_slack)
}

/// The most doublings `entry_bits` bits keep `rate` for.
fn doublings_within(rate: f64, entry_bits: u32) -> u32 {
    let allowed = rate * f64::from(entry_bits).exp2() / (2.0 * LANES as f64 * MAX_LOAD);
    let doublings = (2.0 * (allowed - 1.0)).floor();
    if doublings < 0.0 {
        0
    } else {
        (doublings.min(f64::from(MAX_DOUBLINGS))) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doublings_to_reach_an_expected_size_are_the_fewest_that_hold_it() {
        assert_eq!(doublings_to_reach(1_000, 0), 0);
        assert_eq!(doublings_to_reach(1_000, 1_000), 0);
        assert_eq!(doublings_to_reach(1_000, 1_001), 1);
        assert_eq!(doublings_to_reach(1_000, 2_000), 1);
        assert_eq!(doublings_to_reach(1_000, 1_000_000), 10);
        assert_eq!(doublings_to_reach(1_000, 1_024_001), 11);
        assert_eq!(doublings_to_reach(1, usize::MAX), MAX_DOUBLINGS);
    }

    #[test]
    fn the_width_keeps_the_rate_for_the_doublings_it_allows() {
        for rate in [0.2, 0.05, 0.01, 0.001, 1e-4, 1e-6] {
            for planned in [0, 4, 12, 20] {
                let bits = entry_bits(rate, planned);
                let allowed = doublings_allowed(rate, bits);
                assert!(allowed >= planned, "{rate} {planned}: {allowed}");
                let expected = matches_per_bit_weight(allowed) * f64::from(bits).exp2().recip();
                assert!(expected <= rate * 1.000_001, "{rate} {planned}: {expected}");
                // The fewest bits: one less misses the rate or the planned doublings, or
                // leaves fewer than `MIN_TAIL_BITS` tail bits.
                let fewer = bits - 1;
                let rate_misses =
                    matches_per_bit_weight(planned) * f64::from(fewer).exp2().recip() > rate;
                let doublings_miss = doublings_allowed(rate, fewer) < planned;
                let tail_too_short = fewer < ANCHOR_BITS + MIN_TAIL_BITS;
                assert!(
                    rate_misses || doublings_miss || tail_too_short,
                    "{rate} {planned}: one bit fewer would do"
                );
                assert!(
                    bits >= ANCHOR_BITS + MIN_TAIL_BITS,
                    "{rate} {planned}: {bits}"
                );
            }
        }
    }
}
