//! `insert_many` prefetches each item's buckets a few items ahead of its insert (12, see
//! `PREFETCH_AHEAD`), restarting at every batch of 64. A prefetch is only a hint, so a filter
//! filled with `insert_many` must be the filter that one `insert` per item builds: the same
//! bytes, the same first failure. These tests check that exactly, at the lengths around the
//! prefetch distance and the batch size, in fixed filters that fill up mid-batch and in growable
//! filters that double mid-batch.

use atomic_cuckoo::{CuckooFilter, InsertManyError};

use crate::common;

/// Lengths around the prefetch distance (12) and the batch (64), and a few batches long.
const LENGTHS: [usize; 12] = [0, 1, 11, 12, 13, 63, 64, 65, 76, 128, 129, 700];

/// A filter to fill: fixed (capacity, fingerprint bits) or growable (capacity, target rate).
#[derive(Clone, Copy, Debug)]
enum Shape {
    Fixed(usize, u32),
    Growable(usize, f64),
}

const SHAPES: [Shape; 5] = [
    Shape::Fixed(50, 8),
    Shape::Fixed(300, 16),
    Shape::Growable(20, 0.001),
    Shape::Growable(7, 0.3),
    Shape::Growable(40, 4e-8),
];

fn build(shape: Shape) -> CuckooFilter {
    let builder = CuckooFilter::builder();
    match shape {
        Shape::Fixed(capacity, bits) => builder.capacity(capacity).fingerprint_bits(bits),
        Shape::Growable(capacity, rate) => builder
            .capacity(capacity)
            .false_positive_rate(rate)
            .growable(true),
    }
    .build()
    .unwrap()
}

/// Per item, as `insert_many` promises to behave: stops at the first failure.
fn one_at_a_time(filter: &CuckooFilter, keys: &[u64]) -> Result<(), (usize, String)> {
    for (i, k) in keys.iter().enumerate() {
        filter.insert(k).map_err(|e| (i, e.to_string()))?;
    }
    Ok(())
}

#[test]
fn insert_many_builds_the_same_filter_as_one_insert_per_item() {
    let seed = common::seed("insert_many equals inserts");
    let mut rng = common::Rng::new(seed);
    for shape in SHAPES {
        for len in LENGTHS {
            // Distinct keys, then a stretch with repeats (hot keys fill their buckets).
            let mut keys = common::distinct_keys(rng.next_u64(), len);
            for i in 0..len / 3 {
                keys[len - 1 - i] = keys[i % 5];
            }
            let batched = build(shape);
            let single = build(shape);
            let got = batched
                .insert_many(&keys)
                .map_err(|InsertManyError { index, error, .. }| (index, error.to_string()));
            let want = one_at_a_time(&single, &keys);
            assert_eq!(got, want, "shape {shape:?}, {len} keys, seed {seed}");
            assert_eq!(
                batched.to_bytes(),
                single.to_bytes(),
                "shape {shape:?}, {len} keys, seed {seed}: insert_many built another filter"
            );
            let stored = want.map_or_else(|(i, _)| i, |()| len);
            assert_eq!(batched.len(), stored, "shape {shape:?}, {len} keys");
            for k in &keys[..stored] {
                assert!(batched.contains(k), "shape {shape:?}: {k} lost");
            }
        }
    }
}

/// Batches that end on every offset relative to the prefetch distance, into one growable
/// filter: whatever went in before stays, and every call's items are in after it.
#[test]
fn consecutive_batches_of_every_length_keep_every_item() {
    let seed = common::seed("consecutive insert_many batches");
    let mut rng = common::Rng::new(seed);
    let filter = build(Shape::Growable(10, 0.01));
    let mut all = Vec::new();
    for len in 0..80 {
        let keys = common::distinct_keys(rng.next_u64(), len);
        filter.insert_many(&keys).unwrap();
        all.extend(keys);
        assert_eq!(
            filter.len(),
            all.len(),
            "after a batch of {len}, seed {seed}"
        );
    }
    assert!(filter.doublings() > 3, "{} doublings", filter.doublings());
    for k in &all {
        assert!(filter.contains(k), "{k} lost, seed {seed}");
    }
}
