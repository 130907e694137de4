//! Resealed random mutations (header words set to edge values, lanes and bitmap words
//! changed, several at once) of growable snapshots taken mid-doubling at every lane width
//! (13 to 32 bits, entries with tail bits left and entries without): each restore is a typed
//! error or a filter that answers, inserts, removes, finishes its doubling, shrinks and saves
//! again without a panic, in bounded time.

use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;

use crate::common::{seed, try_growable_planned, Rng};
use crate::format_model::{resealed, words_of};

const HEADER_WORDS: usize = 11;

fn build(capacity: usize, rate: f64, expected: Option<usize>) -> Option<CuckooFilter> {
    try_growable_planned(capacity, rate, expected).ok()
}

/// One filter per lane width, each grown from a table of two items through `doublings`
/// doublings (past the planned ones at the narrowest widths) and left in the middle of the
/// next one.
fn mid_doubling_at_every_width(rng: &mut Rng, doublings: u32) -> Vec<(u32, CuckooFilter)> {
    let mut widths = Vec::new();
    let mut out = Vec::new();
    let mut rate = 0.5f64;
    while rate > 1e-10 {
        for expected in [Some(2), None] {
            let Some(filter) = build(2, rate, expected) else {
                continue;
            };
            let width = filter.fingerprint_bits() + 1;
            if widths.contains(&width) {
                continue;
            }
            widths.push(width);
            let mut n = 0;
            while !(filter.doublings() >= doublings && filter.is_doubling()) && n < 100_000 {
                let _ = filter.insert(&rng.next_u64());
                n += 1;
            }
            assert!(filter.is_doubling(), "width {width}: never mid-doubling");
            out.push((width, filter));
        }
        rate *= 0.6;
    }
    out
}

/// A word value a forger would try.
fn edge_value(rng: &mut Rng, old: u64) -> u64 {
    match rng.below(8) {
        0 => 0,
        1 => u64::MAX,
        2 => 1 << rng.below(64),
        3 => old ^ (1 << rng.below(64)),
        4 => old.wrapping_add(1),
        5 => old.wrapping_sub(1),
        6 => (old & 0xffff_ffff) | (rng.below(64) << 32),
        _ => rng.next_u64(),
    }
}

#[test]
fn resealed_mutations_of_mid_doubling_snapshots_at_every_width_never_panic() {
    let seed = seed("resealed_mutations_of_mid_doubling_snapshots_at_every_width_never_panic");
    let mut rng = Rng::new(seed);
    let probes: Vec<u64> = (0..64).map(|_| rng.next_u64()).collect();
    let (mut refused, mut restored) = (0, 0);
    for (width, filter) in mid_doubling_at_every_width(&mut rng, 3) {
        let words = words_of(&filter.to_bytes());
        for round in 0..60 {
            let mut corrupt = words.clone();
            let mut changed = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let i = if rng.below(2) == 0 {
                    rng.below(HEADER_WORDS as u64) as usize
                } else {
                    rng.below(words.len() as u64 - 1) as usize
                };
                corrupt[i] = edge_value(&mut rng, corrupt[i]);
                changed.push((i, corrupt[i]));
            }
            let at = format!("seed {seed}, width {width}, round {round}, words {changed:x?}");
            let bytes = resealed(corrupt);
            let began = Instant::now();
            let result = std::panic::catch_unwind(|| {
                let whole = CuckooFilter::from_bytes(&bytes);
                let streamed = CuckooFilter::read_from(&bytes[..]);
                assert_eq!(whole.is_ok(), streamed.is_ok(), "from_bytes / read_from");
                let Ok(mut f) = whole else { return false };
                for k in &probes {
                    let _ = f.contains(k);
                    let _ = f.count(k);
                }
                let mut found = Vec::new();
                f.contains_many(&probes, &mut found);
                for k in &probes {
                    let _ = f.insert(k);
                }
                for k in &probes[..32] {
                    let _ = f.remove(k);
                }
                let _ = (
                    f.len(),
                    f.capacity(),
                    f.false_positive_rate(),
                    f.memory_usage(),
                );
                f.finish_doubling();
                f.shrink_to_fit();
                let again = CuckooFilter::from_bytes(&f.to_bytes()).expect("a used restore");
                let _ = again.contains(&probes[0]);
                true
            });
            match result {
                Ok(true) => restored += 1,
                Ok(false) => refused += 1,
                Err(_) => panic!("{at}: panicked (see above)"),
            }
            assert!(
                began.elapsed() < Duration::from_secs(2),
                "{at}: took {:?}",
                began.elapsed()
            );
        }
    }
    println!("{refused} refused, {restored} restored and used");
    assert!(refused > 0);
}
