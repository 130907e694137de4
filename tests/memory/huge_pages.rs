//! Large tables are backed by transparent huge pages where the kernel offers them (Linux, THP
//! mode `madvise` or `always`); `huge_pages(false)` opts out. The test reads the process's
//! huge-page total, which other tests' allocations would disturb: it runs alone.

use atomic_cuckoo::CuckooFilter;

use crate::counting_alloc::one_at_a_time;

/// AnonHugePages of this process, in KiB (None where the kernel does not report it).
fn anon_huge_kib() -> Option<u64> {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = rollup.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn thp_mode() -> Option<String> {
    let s = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = s.find('[')? + 1;
    let end = s[start..].find(']')? + start;
    Some(s[start..end].to_string())
}

#[test]
fn large_tables_get_huge_pages_unless_opted_out() {
    let _one = one_at_a_time();
    let (Some(mode), Some(before)) = (thp_mode(), anon_huge_kib()) else {
        println!("skipped: no transparent huge page support reported");
        return;
    };
    if mode == "never" {
        println!("skipped: THP disabled on this system ({mode})");
        return;
    }
    // About 80 MiB of 16-bit buckets.
    let build = |huge| {
        CuckooFilter::builder()
            .capacity(40_000_000)
            .fingerprint_bits(16)
            .huge_pages(huge)
            .build()
            .unwrap()
    };
    let plain = build(false);
    let after_plain = anon_huge_kib().unwrap();
    let huge = build(true);
    let after_huge = anon_huge_kib().unwrap();
    let table_kib = (huge.memory_usage() / 1024) as u64;
    println!(
        "THP mode {mode}: AnonHugePages {before} KiB -> {after_plain} KiB (plain) -> {after_huge} KiB (huge), table {table_kib} KiB"
    );
    if mode == "madvise" {
        assert!(
            after_plain - before < table_kib / 4,
            "opted out, yet backed by huge pages"
        );
    }
    assert!(
        after_huge - after_plain >= table_kib / 2,
        "only {} KiB of a {table_kib} KiB table on huge pages",
        after_huge - after_plain
    );
    drop((plain, huge));
}
