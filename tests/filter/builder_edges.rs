//! Builder edge cases. Nothing may panic (debug assertions are on under `cargo
//! test`); every refusal is a typed error.

use std::panic::{catch_unwind, AssertUnwindSafe};

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
            "{end}; doublings={} len={} memory={}",
            f.doublings(),
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
fn extreme_capacities_and_rates_never_panic() {
    let cases: Vec<(&str, Builder, u64)> = vec![
        (
            "capacity 1, growable",
            b().capacity(1).growable(true),
            50_000,
        ),
        (
            "capacity 1, growable, the widest lanes",
            b().capacity(1).growable(true).false_positive_rate(4e-8),
            50_000,
        ),
        (
            "capacity 2, growable, rate 1e-6",
            b().capacity(2).growable(true).false_positive_rate(1e-6),
            50_000,
        ),
        ("capacity 1, fixed", b().capacity(1), 100),
        (
            "capacity 1, fixed, 4-bit",
            b().capacity(1).fingerprint_bits(4),
            100,
        ),
        (
            "capacity 1, fixed, 32-bit",
            b().capacity(1).fingerprint_bits(32),
            100,
        ),
        (
            "capacity usize::MAX, growable",
            b().capacity(usize::MAX).growable(true),
            1,
        ),
        (
            "capacity usize::MAX/2, growable",
            b().capacity(usize::MAX / 2).growable(true),
            1,
        ),
        (
            "capacity 2^36, growable",
            b().capacity(1 << 36).growable(true),
            1,
        ),
        (
            "rate tiny, growable",
            b().capacity(10).growable(true).false_positive_rate(1e-9),
            1,
        ),
        ("rate NaN", b().false_positive_rate(f64::NAN), 1),
        (
            "rate NaN, growable",
            b().growable(true).false_positive_rate(f64::NAN),
            1,
        ),
        (
            "rate just below 1, growable",
            b().capacity(10)
                .growable(true)
                .false_positive_rate(0.999_999),
            5000,
        ),
        ("bits 33", b().fingerprint_bits(33), 1),
        ("bits 3", b().fingerprint_bits(3), 1),
        (
            "bits 8, growable",
            b().fingerprint_bits(8).growable(true),
            1,
        ),
        ("capacity 0", b().capacity(0), 1),
        ("capacity 0, growable", b().capacity(0).growable(true), 1),
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

/// A growable filter keeps its target for its planned doublings with lanes of at most 32
/// bits: it builds for every rate from the finest such lanes reach (about 3.4e-8) up, and
/// refuses finer rates with `UnreachableFalsePositiveRate`, never another error.
#[test]
fn growable_filters_build_for_every_rate_down_to_the_finest_their_lanes_reach() {
    let mut built = Vec::new();
    for k in 0..400 {
        let rate = 1e-9 * 1.05f64.powi(k);
        if rate >= 1.0 {
            break;
        }
        match Builder::default()
            .capacity(100)
            .false_positive_rate(rate)
            .growable(true)
            .build()
        {
            Ok(filter) => {
                assert_eq!(filter.target_false_positive_rate(), Some(rate));
                built.push(rate);
            }
            Err(BuildError::UnreachableFalsePositiveRate { rate: r }) => {
                assert_eq!(r, rate);
                assert!(built.is_empty(), "{rate} refused after {} built", built[0]);
            }
            Err(e) => panic!("rate {rate}: {e:?}"),
        }
    }
    let finest = built[0];
    println!("finest rate built: {finest:e}");
    assert!((1e-8..=1e-7).contains(&finest), "{finest:e}");
}

/// A growable filter doubles its table: after `d` doublings it has exactly `2^d` times its
/// first slots, from tiny first tables, at every lane width.
#[test]
fn each_doubling_doubles_the_slots_exactly() {
    let mut bad = Vec::new();
    for rate in [0.3, 0.01, 1e-4, 4e-8] {
        for capacity in [1usize, 2, 5, 10, 30, 100, 1000] {
            let f = Builder::default()
                .capacity(capacity)
                .false_positive_rate(rate)
                .growable(true)
                .huge_pages(false)
                .build()
                .unwrap();
            let first = f.slots();
            let mut i = 0u64;
            while f.doublings() < 6 {
                f.insert(&i).unwrap();
                i += 1;
                let want = first << f.doublings();
                if f.slots() != want {
                    bad.push(format!(
                        "capacity {capacity}, rate {rate}: {} slots after {} doublings, not {want}",
                        f.slots(),
                        f.doublings()
                    ));
                    break;
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of 28 filters did not double exactly, e.g. {}",
        bad.len(),
        bad[0]
    );
}

#[test]
fn errors_are_the_documented_ones() {
    for growable in [false, true] {
        assert!(matches!(
            Builder::default()
                .capacity(usize::MAX)
                .growable(growable)
                .build(),
            Err(BuildError::CapacityTooLarge { .. })
        ));
        assert_eq!(
            Builder::default()
                .capacity(0)
                .growable(growable)
                .build()
                .unwrap_err(),
            BuildError::ZeroCapacity
        );
        // A width outside 4..=32 is refused as such, before the growable filter's rule.
        assert_eq!(
            Builder::default()
                .fingerprint_bits(3)
                .growable(growable)
                .build()
                .unwrap_err(),
            BuildError::InvalidFingerprintBits { bits: 3 }
        );
    }
    let _ = CuckooFilter::with_capacity(0);
}

/// A growable filter chooses its own lane width and packs its lanes: an explicit fingerprint
/// width, or a layout other than `Packed`, is refused with `NotForGrowable` naming the
/// builder method, and the message says so.
#[test]
fn growable_filters_refuse_a_fingerprint_width_or_layout_with_not_for_growable() {
    use atomic_cuckoo::Layout;
    let cases = [
        (b().growable(true).fingerprint_bits(16), "fingerprint_bits"),
        (b().growable(true).layout(Layout::Compact), "layout"),
        (b().growable(true).layout(Layout::OneWord), "layout"),
        (
            b().growable(true)
                .fingerprint_bits(12)
                .layout(Layout::Compact),
            "fingerprint_bits",
        ),
    ];
    for (builder, setting) in cases {
        let error = builder.build().unwrap_err();
        assert_eq!(error, BuildError::NotForGrowable { setting });
        let message = error.to_string();
        println!("{message}");
        assert!(message.contains("growable"), "{message}");
        assert!(message.contains(&format!("`{setting}`")), "{message}");
    }
    // The settings themselves are fine for a fixed filter, and `Packed` for a growable one.
    assert!(b().fingerprint_bits(16).build().is_ok());
    assert!(b().layout(Layout::OneWord).build().is_ok());
    let packed = b()
        .capacity(1_000)
        .growable(true)
        .layout(Layout::Packed)
        .build()
        .unwrap();
    assert!(packed.is_growable());
    assert_eq!(packed.layout(), Layout::Packed);
}

/// Insert and insert_unique of the same full fixed filter must agree on the error, and it is
/// `Full`.
#[test]
fn insert_and_insert_unique_agree_that_a_full_fixed_filter_is_full() {
    let f = Builder::default()
        .capacity(10)
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

/// The false-positive rate stays within the target for a grown filter, also from tiny first
/// tables, over many doublings (up to the 17 planned).
#[test]
fn grown_filters_meet_their_target_rate() {
    let mut bad = Vec::new();
    for (cap, rate) in [
        (1usize, 0.01),
        (10, 0.01),
        (7, 0.05),
        (3, 0.2),
        (100, 0.001),
    ] {
        let f = Builder::default()
            .capacity(cap)
            .false_positive_rate(rate)
            .growable(true)
            .huge_pages(false)
            .build()
            .unwrap();
        let n = 150_000u64;
        f.insert_many(0..n).unwrap();
        let probes = 1_000_000u64;
        let fp =
            (0..probes).filter(|i| f.contains(&(i + (1 << 50)))).count() as f64 / probes as f64;
        let line = format!(
            "cap {cap} rate {rate}: {} items after {} doublings, measured {fp:.5}, \
             predicted {:.5}, {} bits",
            f.len(),
            f.doublings(),
            f.false_positive_rate(),
            f.fingerprint_bits()
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
