//! `Builder`: every bad setting is a typed error, never a panic or an abort.

use std::hash::BuildHasherDefault;

use atomic_cuckoo::{BuildError, CuckooFilter, Layout, DEFAULT_CAPACITY};

#[test]
fn zero_capacity_is_an_error() {
    let err = CuckooFilter::builder().capacity(0).build().unwrap_err();
    assert_eq!(err, BuildError::ZeroCapacity);
}

#[test]
fn capacities_beyond_the_largest_table_are_errors_not_aborts() {
    for items in [usize::MAX, usize::MAX / 3, usize::MAX / 64, 1 << 40] {
        let err = CuckooFilter::builder().capacity(items).build().unwrap_err();
        assert_eq!(err, BuildError::CapacityTooLarge { items }, "items={items}");
        assert!(err.to_string().contains(&items.to_string()));
    }
}

/// A table within the index limits whose memory the system refuses (2^32 buckets are 32 GiB)
/// is an allocation error. Where the system does grant it, the filter is built, which is right
/// too: nothing is touched until used... except that we zero it, so skip hosts with that much.
#[test]
fn a_table_the_system_cannot_allocate_is_an_error() {
    // 2^32 buckets of 2 slots at the 80 % sizing load.
    let items = ((1u64 << 32) as f64 * 2.0 * 0.80 * 0.999) as usize;
    let total_memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    match total_memory {
        Some(bytes) if bytes < 30 << 30 => {
            let err = CuckooFilter::builder()
                .capacity(items)
                .layout(Layout::OneWord)
                .fingerprint_bits(32)
                .build()
                .unwrap_err();
            assert!(
                matches!(err, BuildError::AllocationFailed { bytes } if bytes >= 30 << 30),
                "{err:?}"
            );
        }
        _ => println!("skipped: this host may be able to allocate 32 GiB"),
    }
}

#[test]
fn rates_outside_zero_one_are_errors() {
    for rate in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.1,
        1.0,
        1.5,
    ] {
        let err = CuckooFilter::builder()
            .false_positive_rate(rate)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, BuildError::InvalidFalsePositiveRate { .. }),
            "rate={rate}: {err:?}"
        );
        // Validated even when an explicit width makes the rate moot.
        let err = CuckooFilter::builder()
            .fingerprint_bits(16)
            .false_positive_rate(rate)
            .build()
            .unwrap_err();
        assert!(matches!(err, BuildError::InvalidFalsePositiveRate { .. }));
    }
}

#[test]
fn rates_below_what_32_bits_reach_are_errors() {
    let err = CuckooFilter::builder()
        .false_positive_rate(1e-12)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::UnreachableFalsePositiveRate { rate: 1e-12 }
    );
}

#[test]
fn fingerprint_widths_outside_4_to_32_are_errors() {
    for bits in [0, 1, 3, 33, 64, u32::MAX] {
        let err = CuckooFilter::builder()
            .fingerprint_bits(bits)
            .build()
            .unwrap_err();
        assert_eq!(err, BuildError::InvalidFingerprintBits { bits });
    }
    for bits in 4..=32 {
        let f = CuckooFilter::builder()
            .capacity(10)
            .fingerprint_bits(bits)
            .build()
            .unwrap();
        assert_eq!(f.fingerprint_bits(), bits);
    }
}

#[test]
fn the_rate_picks_the_narrowest_sufficient_width() {
    // Four fingerprints a bucket; expected rate 1 - (1 - 1/(2^f - 1))^(8 × sizing load) at the
    // sizing load, per width: 6: 1.1e-1 (0.915), 7: 5.8e-2 (0.935), 8: 2.9e-2 (0.945),
    // 9: 1.5e-2 (0.95), 10: 7.4e-3, 12: 1.9e-3, 13: 9.3e-4, 19: 1.5e-5, 20: 7.3e-6, 26: 1.1e-7,
    // 27: 5.7e-8 (0.955).
    let cases = [
        (0.1, 7),
        (0.05, 8),
        (0.03, 8),
        (0.01, 10),
        (0.001, 13),
        (1e-5, 20),
        (1e-7, 27),
    ];
    for (rate, bits) in cases {
        let f = CuckooFilter::builder()
            .capacity(1000)
            .false_positive_rate(rate)
            .build()
            .unwrap();
        assert_eq!(f.fingerprint_bits(), bits, "rate={rate}");
    }
}

#[test]
fn an_explicit_width_wins_over_a_rate() {
    let f = CuckooFilter::builder()
        .false_positive_rate(1e-6)
        .fingerprint_bits(8)
        .build()
        .unwrap();
    assert_eq!(f.fingerprint_bits(), 8);
}

#[test]
fn defaults_are_documented_values() {
    let f = CuckooFilter::builder().build().unwrap();
    assert!(f.capacity() >= DEFAULT_CAPACITY);
    assert_eq!(f.fingerprint_bits(), 10);
    assert_eq!(f.layout(), Layout::Packed);
    assert_eq!(CuckooFilter::with_capacity(5).fingerprint_bits(), 10);
}

#[test]
fn any_build_hasher_can_be_supplied() {
    let f = CuckooFilter::builder()
        .capacity(100)
        .hasher(BuildHasherDefault::<
            std::collections::hash_map::DefaultHasher,
        >::default())
        .build()
        .unwrap();
    f.insert("x").unwrap();
    assert!(f.contains("x"));
}

#[test]
fn errors_display_and_are_std_errors() {
    let errors: Vec<Box<dyn std::error::Error>> = vec![
        Box::new(BuildError::ZeroCapacity),
        Box::new(BuildError::InvalidFingerprintBits { bits: 2 }),
        Box::new(atomic_cuckoo::InsertError::Full),
    ];
    for e in errors {
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn builder_debug_shows_settings() {
    let b = CuckooFilter::builder().capacity(77).fingerprint_bits(9);
    let s = format!("{b:?}");
    assert!(s.contains("77") && s.contains('9'), "{s}");
}
