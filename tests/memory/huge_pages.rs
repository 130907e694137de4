//! Large tables are backed by transparent huge pages where the kernel offers them (Linux, THP
//! mode `madvise` or `always`), whether `build()` faults them in or the first inserts do;
//! `huge_pages(false)` opts out. The tests read the process's huge-page total, which other
//! tests' allocations would disturb: they run alone.

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

/// The THP mode and the KiB of anonymous huge pages in use now, where the system can give huge
/// pages; `None` (after saying why the test is skipped) where it cannot.
fn huge_pages_in_use() -> Option<(String, u64)> {
    let (Some(mode), Some(before)) = (thp_mode(), anon_huge_kib()) else {
        println!("skipped: no transparent huge page support reported");
        return None;
    };
    if mode == "never" {
        println!("skipped: THP disabled on this system ({mode})");
        return None;
    }
    Some((mode, before))
}

#[test]
fn large_tables_get_huge_pages_unless_opted_out() {
    let _one = one_at_a_time();
    let Some((mode, before)) = huge_pages_in_use() else {
        return;
    };
    // About 80 MiB of 16-bit buckets, made resident at build.
    let build = |huge| {
        CuckooFilter::builder()
            .capacity(40_000_000)
            .fingerprint_bits(16)
            .huge_pages(huge)
            .prefault(true)
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

/// A table left to the inserts to fault in (the default) still gets huge pages: `build()`
/// backs none, and a first fill of 200,000 items, which touches every 2 MiB of an 80 MiB
/// table many times over, is backed by huge pages.
#[test]
fn a_lazily_backed_table_gets_huge_pages_as_inserts_touch_it() {
    let _one = one_at_a_time();
    let Some((mode, before)) = huge_pages_in_use() else {
        return;
    };
    let filter = CuckooFilter::builder()
        .capacity(40_000_000)
        .fingerprint_bits(16)
        .build()
        .unwrap();
    let after_build = anon_huge_kib().unwrap();
    filter.insert_many(0..200_000u64).unwrap();
    let after_fill = anon_huge_kib().unwrap();
    let table_kib = (filter.memory_usage() / 1024) as u64;
    println!(
        "THP mode {mode}: AnonHugePages {before} KiB -> {after_build} KiB (built) -> \
         {after_fill} KiB (200,000 items), table {table_kib} KiB"
    );
    assert!(
        after_build.saturating_sub(before) < table_kib / 4,
        "build() backed {} KiB of a {table_kib} KiB table",
        after_build.saturating_sub(before)
    );
    assert!(
        after_fill.saturating_sub(after_build) >= table_kib / 2,
        "only {} KiB of a {table_kib} KiB table on huge pages after the first inserts",
        after_fill.saturating_sub(after_build)
    );
}
