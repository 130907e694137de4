//! The access-specialised lane operations and stores against the generic `BucketLayout` code,
//! for every layout and width.

use super::*;
use crate::test_rng::SplitMix;

const KINDS: [LayoutKind; 3] = [
    LayoutKind::OneWord,
    LayoutKind::Packed,
    LayoutKind::SemiSorted,
];

fn snapshot(table: &Table) -> Vec<u64> {
    table
        .words
        .iter()
        .map(|w| w.load(Ordering::Relaxed))
        .collect()
}

fn check_table<const A: u8>(table: &Table, rng: &mut SplitMix, ctx: &str) {
    let layout = table.layout;
    assert_eq!(A, access_code(layout.access()), "{ctx}");
    let generic: Vec<u32> = layout.positions().collect();
    let special: Vec<u32> = table.positions_as::<A>().collect();
    assert_eq!(special, generic, "{ctx}: positions");
    assert_eq!(special.len() as u32, layout.slots(), "{ctx}");
    let buckets = table.shape.buckets;
    let max = layout.max_fingerprint();
    for step in 0..4_000 {
        // Bias towards the first and last buckets (shift 0, the end of the array).
        let bucket = match rng.next() % 4 {
            0 => 0,
            1 => buckets - 1,
            _ => (rng.next() % buckets as u64) as usize,
        };
        let ctx = format!("{ctx} step={step} bucket={bucket}");
        let words = snapshot(table);
        let (first, shift) = layout.locate(bucket);
        let at = |k: usize| words.get(first + k).copied().unwrap_or(0);
        let want = layout.bucket_at([at(0), at(1), at(2)], shift);
        let old = table.load_as::<A>(bucket, Ordering::Relaxed);
        assert_eq!(old, want, "{ctx}: load_as");
        assert_eq!(old, table.load(bucket, Ordering::Relaxed), "{ctx}: load");
        // Lane reads.
        for &p in &generic {
            assert_eq!(
                table.lane_as::<A>(&old, p),
                layout.lane(&old, p),
                "{ctx}: lane {p}"
            );
        }
        assert_eq!(
            table.occupied_as::<A>(&old),
            layout.occupied(&old),
            "{ctx}: occupied"
        );
        assert_eq!(
            table.first_empty_as::<A>(&old),
            layout.first_empty(&old),
            "{ctx}: first_empty"
        );
        let probe = match rng.next() % 3 {
            0 => rng.next() % max + 1,
            _ => {
                let p = generic[(rng.next() % generic.len() as u64) as usize];
                layout.lane(&old, p).max(1)
            }
        };
        assert_eq!(
            table.first_match_as::<A>(&old, probe),
            layout.first_match(&old, probe),
            "{ctx}: first_match {probe}"
        );
        assert_eq!(
            table.holds_as::<A>(&old, probe),
            layout.holds(&old, probe),
            "{ctx}: holds"
        );
        // Lookups and claims read a one-part bucket unmasked (`probe_from`): the lane tests
        // must answer as on the bucket itself.
        let probed = table.probe_from::<A>([at(0), at(1), at(2)], shift);
        assert_eq!(
            table.holds_as::<A>(&probed, probe),
            layout.holds(&old, probe),
            "{ctx}: holds, unmasked"
        );
        if is_one_part(A) {
            let part = layout.part();
            assert_eq!(
                part.zero_lanes(probed.lanes()),
                part.zero_lanes(old.lanes()),
                "{ctx}: zero_lanes, unmasked"
            );
            // The lanes a claim may not take: those across a word boundary, by their high bit
            // (among the lanes' high bits, the only ones that `zero_lanes` sets).
            let (bits, highs) = (part.bits(), part.zero_lanes(0));
            let across = generic
                .iter()
                .filter(|&&p| A == STRADDLING && shift + p < 64 && shift + p + bits > 64)
                .fold(0u64, |m, &p| m | 1 << (p + bits - 1));
            assert_eq!(
                table.straddling_lanes::<A>(shift) & highs,
                across,
                "{ctx}: straddling lanes at shift {shift}"
            );
        }
        if let Some(p) = table.first_match_as::<A>(&old, probe) {
            assert_eq!(
                table.lane_as::<A>(&old, p),
                probe,
                "{ctx}: lane at first_match"
            );
        }
        if let Some(p) = table.first_empty_as::<A>(&old) {
            assert_eq!(table.lane_as::<A>(&old, p), 0, "{ctx}: lane at first_empty");
        }
        // A change: fill the first empty lane, or set/clear a random lane.
        let (position, fp) = match (rng.next() % 3, table.first_empty_as::<A>(&old)) {
            (0, Some(p)) => (p, rng.next() % max + 1),
            (1, _) => (generic[(rng.next() % generic.len() as u64) as usize], 0),
            _ => (
                generic[(rng.next() % generic.len() as u64) as usize],
                rng.next() % max + 1,
            ),
        };
        let new = table.with_lane_as::<A>(old, position, fp);
        assert_eq!(new, layout.with_lane(old, position, fp), "{ctx}: with_lane");
        // The reference store: every mask of `change_masks`, applied to a copy.
        let mut expect = words.clone();
        for (k, mask) in layout.change_masks(&old, &new, shift).iter().enumerate() {
            if *mask != 0 {
                expect[first + k] ^= mask;
            }
        }
        let order = if rng.next() & 1 == 0 {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        table.store_as::<A>(bucket, &old, &new, order);
        let got = snapshot(table);
        assert_eq!(
            got, expect,
            "{ctx}: store_as words (shift {shift}, first {first})"
        );
        // Padding bits past the last bucket stay zero.
        let end = buckets as u64 * u64::from(layout.stride());
        for bit in end..(got.len() as u64 * 64) {
            assert_eq!(
                (got[(bit / 64) as usize] >> (bit % 64)) & 1,
                0,
                "{ctx}: padding bit {bit}"
            );
        }
        let back = table.load_as::<A>(bucket, Ordering::Relaxed);
        let mut l1: Vec<u64> = generic.iter().map(|&p| layout.lane(&back, p)).collect();
        let mut l2: Vec<u64> = generic.iter().map(|&p| layout.lane(&new, p)).collect();
        l1.sort_unstable();
        l2.sort_unstable();
        assert_eq!(l1, l2, "{ctx}: read back");
    }
}

#[test]
fn specialised_operations_agree_with_the_generic_ones() {
    let seed = 0x00a7_7ac4_u64;
    println!("specialised seed = {seed:#x}");
    let mut rng = SplitMix(seed);
    let mut seen = [0u32; 5];
    for kind in KINDS {
        for bits in 4..=32 {
            // Flat tables need an even number of buckets (see `Nesting::is_valid`).
            for buckets in [2usize, 4, 6, 14, 16, 18, 34] {
                let shape = TableShape::flat(kind, buckets, bits, 4);
                let table = Table::new(shape, Limits::DEFAULT, false).unwrap();
                let ctx = format!(
                    "{kind:?} f={bits} n={buckets} access={:?}",
                    table.layout.access()
                );
                let a = access_code(table.layout.access());
                seen[a as usize] += 1;
                match table.layout.access() {
                    Access::Word => check_table::<WORD>(&table, &mut rng, &ctx),
                    Access::Within => check_table::<WITHIN>(&table, &mut rng, &ctx),
                    Access::Straddling => check_table::<STRADDLING>(&table, &mut rng, &ctx),
                    Access::Sorted64 => check_table::<SORTED64>(&table, &mut rng, &ctx),
                    Access::General => check_table::<GENERAL>(&table, &mut rng, &ctx),
                }
            }
        }
    }
    println!("tables per access (word, within, straddling, sorted64, general): {seen:?}");
    assert!(seen.iter().all(|&n| n > 0));
}

/// Which access each layout and width gets (a stride of 64 is Word for packed f = 16, Sorted64
/// for semi-sorted f = 17).
#[test]
fn access_of_every_layout_and_width() {
    for bits in 4..=32u32 {
        let one = BucketLayout::new(LayoutKind::OneWord, bits).unwrap();
        assert_eq!(one.access(), Access::Word, "one-word f={bits}");
        let packed = BucketLayout::new(LayoutKind::Packed, bits).unwrap();
        let want = match bits {
            4 | 8 => Access::Within,
            16 => Access::Word,
            b if b < 16 => Access::Straddling,
            _ => Access::General,
        };
        assert_eq!(packed.access(), want, "packed f={bits}");
        let sorted = BucketLayout::new(LayoutKind::SemiSorted, bits).unwrap();
        let want = if bits <= 17 {
            Access::Sorted64
        } else {
            Access::General
        };
        assert_eq!(sorted.access(), want, "semi-sorted f={bits}");
    }
}
