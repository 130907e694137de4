//! Builder edge cases. Nothing may panic (debug assertions are on under `cargo
//! test`); every refusal is a typed error.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::format_model::Snapshot;
use atomic_cuckoo::{BuildError, Builder, CuckooFilter, InsertError};

fn describe(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or(p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Builds, then inserts distinct items until `inserts` are done, an error, or the filter's
/// memory passes `max_bytes`. Returns what happened; panics are caught and returned as Err.
fn exercise(b: Builder, inserts: u64, max_bytes: usize) -> Result<String, String> {
    catch_unwind(AssertUnwindSafe(|| {
        let f = match b.build() {
            Ok(f) => f,
            Err(e) => return format!("build: {e:?}"),
        };
        let mut end = format!("{inserts} inserts");
        for i in 0..inserts {
            if let Err(e) = f.insert(&i) {
                end = format!("insert {i}: {e:?}");
                break;
            }
            if f.memory_usage() > max_bytes {
                end = format!("memory {} after {} inserts", f.memory_usage(), i + 1);
                break;
            }
        }
        for i in 0..inserts.min(1000) {
            let _ = f.contains(&i);
            let _ = f.count(&i);
        }
        format!(
            "{end}; levels={} len={} memory={}",
            f.levels(),
            f.len(),
            f.memory_usage()
        )
    }))
    .map_err(describe)
}

fn b() -> Builder {
    Builder::default().huge_pages(false)
}

#[test]
fn extreme_expansions_and_capacities_never_panic() {
    let cases: Vec<(&str, Builder, u64)> = vec![
        (
            "expansion u32::MAX, capacity 1",
            b().capacity(1).expansion(u32::MAX),
            200,
        ),
        (
            "expansion u32::MAX, capacity 1, 64 levels",
            b().capacity(1).expansion(u32::MAX).max_levels(64),
            200,
        ),
        (
            "expansion u32::MAX, capacity 1000, 2 levels",
            b().capacity(1000)
                .expansion(u32::MAX)
                .max_levels(2)
                .fingerprint_bits(32),
            3000,
        ),
        (
            "expansion 2^16, 64 levels",
            b().capacity(3).expansion(1 << 16).max_levels(64),
            100_000,
        ),
        (
            "expansion 2^31, 64 levels, 4-bit",
            b().capacity(1)
                .expansion(1 << 31)
                .max_levels(64)
                .fingerprint_bits(4),
            200,
        ),
        (
            "expansion 1000, 64 levels, rate 1e-6",
            b().capacity(2)
                .expansion(1000)
                .max_levels(64)
                .false_positive_rate(1e-6),
            50_000,
        ),
        (
            "capacity 1, expansion 1, 64 levels",
            b().capacity(1).expansion(1).max_levels(64),
            1000,
        ),
        (
            "capacity 1, expansion 1, 64 levels, 32-bit",
            b().capacity(1)
                .expansion(1)
                .max_levels(64)
                .fingerprint_bits(32),
            1000,
        ),
        ("capacity 1, no growth", b().capacity(1), 100),
        (
            "capacity 1, max_levels 1 with expansion",
            b().capacity(1).expansion(2).max_levels(1),
            100,
        ),
        (
            "capacity usize::MAX, growth",
            b().capacity(usize::MAX).expansion(2),
            1,
        ),
        (
            "capacity usize::MAX/2, growth 64 levels",
            b().capacity(usize::MAX / 2).expansion(2).max_levels(64),
            1,
        ),
        (
            "capacity 2^36, growth",
            b().capacity(1 << 36).expansion(2),
            1,
        ),
        (
            "capacity 2^20, expansion u32::MAX, 64 levels",
            b().capacity(1 << 20)
                .expansion(u32::MAX)
                .max_levels(64)
                .fingerprint_bits(4),
            10,
        ),
        ("max_levels 0", b().expansion(2).max_levels(0), 1),
        ("max_levels 65", b().expansion(2).max_levels(65), 1),
        (
            "max_levels u32::MAX",
            b().expansion(2).max_levels(u32::MAX),
            1,
        ),
        (
            "rate tiny with 64 levels",
            b().capacity(10)
                .expansion(2)
                .max_levels(64)
                .false_positive_rate(1e-9),
            1,
        ),
        ("rate NaN", b().false_positive_rate(f64::NAN), 1),
        (
            "rate just below 1",
            b().capacity(10).expansion(3).false_positive_rate(0.999_999),
            5000,
        ),
        ("bits 33", b().fingerprint_bits(33), 1),
        ("bits 3", b().fingerprint_bits(3), 1),
        ("capacity 0", b().capacity(0).expansion(2), 1),
    ];
    let mut panics = Vec::new();
    for (what, builder, inserts) in cases {
        match exercise(builder, inserts, 6 << 30) {
            Ok(s) => println!("{what}: {s}"),
            Err(p) => {
                println!("{what}: PANIC {p}");
                panics.push(format!("{what}: {p}"));
            }
        }
    }
    assert!(panics.is_empty(), "panics:\n{}", panics.join("\n"));
}

/// A growing filter limited to one level is a filter that never grows: it must build whenever
/// the same settings without growth build.
#[test]
fn max_levels_1_with_growth_builds_like_no_growth() {
    let mut refused = Vec::new();
    for k in 0..200 {
        let rate = 7.0e-10 * 1.005f64.powi(k);
        let fixed = Builder::default()
            .capacity(100)
            .false_positive_rate(rate)
            .build();
        let grow1 = Builder::default()
            .capacity(100)
            .false_positive_rate(rate)
            .expansion(2)
            .max_levels(1)
            .build();
        if fixed.is_ok() && grow1.is_err() {
            refused.push((rate, grow1.err().unwrap()));
        }
    }
    assert!(
        refused.is_empty(),
        "{} rates build without growth but not with expansion(2).max_levels(1), e.g. {:?}",
        refused.len(),
        refused.first()
    );
}

/// The level plan's documented promise (Builder::expansion, levels.rs `level_shape`): "with a
/// power-of-two factor and one width, exactly factor^i × level 0's buckets".
#[test]
fn a_power_of_two_expansion_with_one_width_grows_by_exactly_that_factor() {
    let mut bad = Vec::new();
    for factor in [2u32, 4] {
        for bits in [4u32, 8, 16, 32] {
            for capacity in [1usize, 2, 5, 10, 30, 100, 1000] {
                let f = Builder::default()
                    .capacity(capacity)
                    .expansion(factor)
                    .max_levels(8)
                    .fingerprint_bits(bits)
                    .huge_pages(false)
                    .build()
                    .unwrap();
                let mut i = 0u64;
                while f.levels() < 6 {
                    f.insert(&i).unwrap();
                    i += 1;
                }
                let buckets: Vec<usize> = Snapshot::parse(&f.to_bytes())
                    .levels
                    .iter()
                    .map(|l| l.buckets)
                    .collect();
                let want: Vec<usize> = (0..buckets.len())
                    .map(|j| buckets[0] * (factor as usize).pow(j as u32))
                    .collect();
                if buckets != want {
                    bad.push(format!(
                        "capacity {capacity}, {bits}-bit, expansion {factor}: buckets {buckets:?}"
                    ));
                }
            }
        }
    }
    for b in &bad {
        println!("{b}");
    }
    assert!(
        bad.is_empty(),
        "{} of 56 plans do not grow by their factor, e.g. {}",
        bad.len(),
        bad[0]
    );
}

#[test]
fn errors_are_the_documented_ones() {
    assert!(matches!(
        Builder::default().capacity(usize::MAX).expansion(2).build(),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert!(matches!(
        Builder::default().expansion(2).max_levels(65).build(),
        Err(BuildError::InvalidMaxLevels { levels: 65 })
    ));
    // An expansion past 65,536 is refused at build time.
    assert!(matches!(
        Builder::default().expansion(u32::MAX).build(),
        Err(BuildError::InvalidExpansion { factor: u32::MAX })
    ));
    // A filter that cannot grow further reports a typed error, not a panic. (Capacity 100,000
    // with 32-bit fingerprints and the largest expansion: level 1 would need more than 2^32
    // buckets.)
    let f = Builder::default()
        .capacity(100_000)
        .expansion(1 << 16)
        .max_levels(64)
        .fingerprint_bits(32)
        .huge_pages(false)
        .build()
        .unwrap();
    let mut last = Ok(());
    for i in 0..1_000_000u64 {
        last = f.insert(&i);
        if last.is_err() {
            break;
        }
    }
    println!(
        "expansion 65536: {last:?}, levels {}, memory {}",
        f.levels(),
        f.memory_usage()
    );
    assert!(
        matches!(last, Err(InsertError::GrowthFailed { .. })),
        "{last:?}"
    );
    let _ = CuckooFilter::with_capacity(0);
}

/// `Builder::max_levels(1)` makes a filter that never grows: with `expansion(2)` too, insert and
/// insert_unique of the same full filter must agree on the error, and it is `Full`.
#[test]
fn a_growing_filter_limited_to_one_level_is_a_fixed_filter() {
    let f = Builder::default()
        .capacity(10)
        .expansion(2)
        .max_levels(1)
        .fingerprint_bits(32)
        .build()
        .unwrap();
    let mut i = 0u64;
    let insert_err = loop {
        if let Err(e) = f.insert(&i) {
            break e;
        }
        i += 1;
    };
    let unique_err = (i..i + 1000)
        .find_map(|k| f.insert_unique(&k).err())
        .expect("a full filter refuses some insert_unique");
    println!("after {i} items: insert -> {insert_err:?}, insert_unique -> {unique_err:?}");
    assert_eq!(
        insert_err, unique_err,
        "insert and insert_unique disagree on a full filter"
    );
    assert_eq!(insert_err, InsertError::Full);
}

/// DESIGN §5 / README Growth: the compound false-positive rate stays within the target for a
/// grown filter, also from tiny first levels and with non-power-of-two expansions.
#[test]
fn grown_filters_meet_their_target_rate() {
    let mut bad = Vec::new();
    for (cap, rate, exp) in [
        (1usize, 0.01, 2u32),
        (10, 0.01, 3),
        (7, 0.05, 2),
        (3, 0.2, 4),
        (100, 0.001, 2),
        (1, 0.01, 1),
    ] {
        let f = Builder::default()
            .capacity(cap)
            .false_positive_rate(rate)
            .expansion(exp)
            .max_levels(64)
            .huge_pages(false)
            .build()
            .unwrap();
        let n = if exp == 1 { 300 } else { 150_000u64 };
        let mut stored = 0;
        for i in 0..n {
            if f.insert(&i).is_ok() {
                stored += 1;
            }
        }
        let probes = 1_000_000u64;
        let fp =
            (0..probes).filter(|i| f.contains(&(i + (1 << 50)))).count() as f64 / probes as f64;
        let line = format!(
            "cap {cap} rate {rate} expansion {exp}: {stored} items in {} levels, measured {fp:.5}, \
             predicted {:.5}, widths {:?}",
            f.levels(),
            f.false_positive_rate(),
            f.level_stats().iter().map(|s| s.fingerprint_bits).collect::<Vec<_>>()
        );
        println!("{line}");
        if fp > rate || f.false_positive_rate() > rate {
            bad.push(line);
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Rates in error messages print in a short form: a rate far from 1 % in scientific notation
/// (`1e-300`, not 300 zeros), an ordinary one as written.
#[test]
fn rates_in_error_messages_print_in_a_short_form() {
    let tiny = Builder::default()
        .false_positive_rate(1e-300)
        .build()
        .unwrap_err();
    assert_eq!(
        tiny,
        BuildError::UnreachableFalsePositiveRate { rate: 1e-300 }
    );
    let cases = [
        (tiny, "1e-300"),
        (
            BuildError::InvalidFalsePositiveRate { rate: 1e300 },
            "1e300",
        ),
        (
            BuildError::InvalidFalsePositiveRate { rate: -2.5e-20 },
            "-2.5e-20",
        ),
        (
            BuildError::UnreachableFalsePositiveRate { rate: 1.5e-12 },
            "1.5e-12",
        ),
        (BuildError::InvalidFalsePositiveRate { rate: 1.5 }, "1.5"),
        (
            BuildError::InvalidFalsePositiveRate { rate: f64::NAN },
            "NaN",
        ),
        (
            BuildError::InvalidFalsePositiveRate { rate: 0.0 },
            "rate 0 ",
        ),
    ];
    for (error, shown) in cases {
        let message = error.to_string();
        println!("{message}");
        assert!(message.contains(shown), "{message:?} lacks {shown:?}");
        assert!(message.len() < 80, "{message:?}");
    }
}

#[test]
fn debug_shows_whether_build_prefaults() {
    let shown = format!("{:?}", Builder::default());
    assert!(shown.contains("prefault: false"), "{shown}");
    let shown = format!("{:?}", Builder::default().prefault(true));
    assert!(shown.contains("prefault: true"), "{shown}");
}
