//! Random sequences of operations checked against a multiset model, for every fingerprint width.

use std::collections::HashMap;

use crate::common;
use crate::common::Rng;
use atomic_cuckoo::{CuckooFilter, InsertError};

/// Runs `steps` random operations on a small filter of `bits`-wide fingerprints and checks every
/// answer against a `HashMap` multiset:
/// - no false negatives: a key the model holds is always found;
/// - `count` is at least the model's count (collisions may add to it), and exactly it for
///   fingerprints of 24 bits or more, where two of the 500 keys sharing a fingerprint and a
///   bucket pair is a ~1e-5 event per run;
/// - `len` equals the model's total after every step;
/// - `remove` of a held key succeeds; `remove` of a key proven absent fails and changes nothing;
/// - `insert_unique` returns `false` only if the key looked present before;
/// - a failed insert leaves the model (and the filter) as they were.
fn run_model(bits: u32, seed: u64, steps: usize) {
    let filter = CuckooFilter::builder()
        .capacity(300)
        .fingerprint_bits(bits)
        .build()
        .unwrap();
    let mut model: HashMap<u64, usize> = HashMap::new();
    let mut total = 0usize;
    let mut rng = Rng::new(seed ^ u64::from(bits));
    // A small key space, so keys repeat and copies accumulate.
    let key_space = 500u64;
    for step in 0..steps {
        let key = rng.below(key_space);
        let ctx = || format!("bits={bits} seed={seed} step={step} key={key}");
        match rng.below(6) {
            0 | 1 => match filter.insert(&key) {
                Ok(()) => {
                    *model.entry(key).or_default() += 1;
                    total += 1;
                }
                Err(InsertError::Full) => {}
                // Keys repeat: a key's own copies can fill its two buckets, or those of a key it
                // collides with completely, which count as its own (the filter finds it).
                Err(InsertError::ItemBucketsFull) => assert!(
                    model.get(&key).copied().unwrap_or(0) > 0 || filter.count(&key) > 0,
                    "stuck without a copy of its own ({})",
                    ctx()
                ),
                Err(e) => panic!("unexpected {e} ({})", ctx()),
            },
            2 => {
                let looked_present = filter.contains(&key);
                match filter.insert_unique(&key) {
                    Ok(true) => {
                        *model.entry(key).or_default() += 1;
                        total += 1;
                    }
                    Ok(false) => {
                        assert!(looked_present, "unique refused an absent key ({})", ctx())
                    }
                    Err(_) => {}
                }
            }
            3 => {
                let held = model.get(&key).copied().unwrap_or(0);
                if held > 0 {
                    assert!(
                        filter.remove(&key),
                        "remove of a held key failed ({})",
                        ctx()
                    );
                    *model.get_mut(&key).unwrap() -= 1;
                    total -= 1;
                } else if !filter.contains(&key) {
                    assert!(
                        !filter.remove(&key),
                        "remove of an absent key succeeded ({})",
                        ctx()
                    );
                }
                // A key that is absent but looks present would be a false delete: not done.
            }
            4 => {
                let held = model.get(&key).copied().unwrap_or(0);
                let counted = filter.count(&key);
                assert!(counted >= held, "count {counted} < {held} ({})", ctx());
                if bits >= 24 {
                    assert_eq!(counted, held, "count ({})", ctx());
                }
            }
            _ => {
                if model.get(&key).copied().unwrap_or(0) > 0 {
                    assert!(filter.contains(&key), "false negative ({})", ctx());
                }
            }
        }
        assert_eq!(filter.len(), total, "len ({})", ctx());
    }
    for (key, &held) in &model {
        if held > 0 {
            assert!(
                filter.contains(key),
                "false negative at end: bits={bits} key={key}"
            );
            assert!(filter.count(key) >= held);
        }
    }
}

#[test]
fn random_operations_agree_with_a_multiset_model_for_every_width() {
    let seed = common::seed("model_based");
    for bits in 4..=32 {
        run_model(bits, seed, 6_000);
    }
}

/// The same model, driven to the copies limit: one key inserted until `Full`.
#[test]
fn one_key_takes_at_most_two_buckets_of_copies() {
    for bits in [4u32, 8, 12, 16, 32] {
        let filter = CuckooFilter::builder()
            .capacity(10_000)
            .fingerprint_bits(bits)
            .build()
            .unwrap();
        // Four fingerprints a bucket, of any width.
        let slots = 4;
        let mut copies = 0;
        while filter.insert("same").is_ok() {
            copies += 1;
            assert!(
                copies <= 2 * slots,
                "bits={bits}: more than 2 x slots copies"
            );
        }
        assert_eq!(copies, 2 * slots, "bits={bits}");
        assert_eq!(filter.count("same"), 2 * slots);
        assert_eq!(filter.len(), 2 * slots);
        for _ in 0..copies {
            assert!(filter.remove("same"));
        }
        assert!(!filter.contains("same"));
        assert!(filter.is_empty());
    }
}
