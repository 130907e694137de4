//! Tiny growable filters (first tables of 1 to 4 items) at every lane width a growable
//! filter can have (13 to 32 bits, narrow lanes planned for no doubling so that entries run out
//! of bits), under threads while the table doubles again and again:
//!
//! - a writer inserts stable items (published after each insert returns) and inserts and
//!   removes items of its own (churn), so removes run beside lookups, splits and kicks;
//! - two racers `insert_unique` the same shared keys: at most one `Ok(true)` per key, and
//!   without churn a key with none is found (it matched an entry that stays);
//! - a reader checks that every published stable item and every shared key whose
//!   `insert_unique` returned `Ok(true)` is found by `contains`, `contains_many` and `count`;
//! - a saver clones and saves (`to_bytes`, `write_to`) mid-doubling: each copy holds every stable item
//!   published before it began.
//!
//! Each configuration runs for a bounded time and the test prints its seed.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use atomic_cuckoo::CuckooFilter;

use crate::common::{seed, try_growable_planned, Rng};

const STABLE: usize = 2000;
const SHARED: usize = 3000;

/// A growable filter of `capacity` for each lane width, narrowest first: `(width, filter)`.
fn filters_by_width(capacity: usize) -> Vec<(u32, f64, Option<usize>)> {
    let mut out: Vec<(u32, f64, Option<usize>)> = Vec::new();
    let mut rate = 0.5f64;
    while rate > 1e-10 {
        for expected in [Some(capacity), Some(capacity * 64), None] {
            if let Some(filter) = build(capacity, rate, expected) {
                let width = filter.fingerprint_bits() + 1;
                if !out.iter().any(|&(w, _, _)| w == width) {
                    out.push((width, rate, expected));
                }
            }
        }
        rate *= 0.6;
    }
    out.sort_by_key(|&(w, _, _)| w);
    out
}

fn build(capacity: usize, rate: f64, expected: Option<usize>) -> Option<CuckooFilter> {
    try_growable_planned(capacity, rate, expected).ok()
}

fn stable(seed: u64, i: usize) -> u64 {
    crate::common::Rng::new(seed ^ 0x57ab_1e00 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .next_u64()
}

fn shared(seed: u64, i: usize) -> u64 {
    crate::common::Rng::new(seed ^ 0x54a2_ed00 ^ (i as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
        .next_u64()
}

/// One configuration's run; the failures it saw.
fn round(
    seed: u64,
    width: u32,
    filter: &CuckooFilter,
    run: Duration,
    churn_on: bool,
) -> Vec<String> {
    let published = AtomicUsize::new(0);
    // The stable items, in the order they were inserted (published by `published`).
    let keys: Vec<AtomicU64> = (0..STABLE).map(|_| AtomicU64::new(0)).collect();
    let stable = |_seed: u64, i: usize| keys[i].load(Ordering::Relaxed);
    let done = AtomicBool::new(false);
    let wins: Vec<AtomicU8> = (0..SHARED).map(|_| AtomicU8::new(0)).collect();
    let returned: Vec<AtomicU8> = (0..SHARED).map(|_| AtomicU8::new(0)).collect();
    let racers_at = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let failures = std::sync::Mutex::new(Vec::<String>::new());
    let fail = |s: String| {
        let mut f = failures.lock().unwrap();
        if f.len() < 10 {
            f.push(s);
        }
    };
    let deadline = Instant::now() + run;
    std::thread::scope(|s| {
        // The writer.
        s.spawn(|| {
            let mut rng = Rng::new(seed ^ 1);
            let mut churn: Vec<u64> = Vec::new();
            let mut i = 0;
            let mut candidate = 0;
            while i < STABLE && Instant::now() < deadline {
                let key = self::stable(seed, candidate);
                candidate += 1;
                match filter.insert(&key) {
                    Ok(()) => {}
                    // Distinct items, never refused (not even by a jam of a tiny table: see
                    // `distinct_items_fill_a_growable_filter_of_capacity_twenty_without_a_refusal`
                    // in tests/growth/width_churn.rs).
                    Err(e) => {
                        fail(format!("width {width}: insert of stable {i}: {e:?}"));
                        break;
                    }
                }
                keys[i].store(key, Ordering::Relaxed);
                i += 1;
                published.store(i, Ordering::Release);
                if churn_on && rng.below(3) == 0 {
                    let key = rng.next_u64() | 1 << 63;
                    if filter.insert(&key).is_ok() {
                        churn.push(key);
                    }
                }
                if !churn.is_empty() && rng.below(3) == 0 {
                    let j = rng.below(churn.len() as u64) as usize;
                    let key = churn.swap_remove(j);
                    if !filter.remove(&key) {
                        fail(format!(
                            "width {width}: remove of churn item {key:#x} found none"
                        ));
                    }
                }
            }
            done.store(true, Ordering::Release);
        });
        // Two racers over the same shared keys.
        for (r, at) in racers_at.iter().enumerate() {
            let (wins, returned, done, fail) = (&wins, &returned, &done, &fail);
            s.spawn(move || {
                for j in 0..SHARED {
                    if done.load(Ordering::Acquire) {
                        break;
                    }
                    match filter.insert_unique(&shared(seed, j)) {
                        Ok(true) => {
                            wins[j].fetch_add(1, Ordering::Relaxed);
                            // Stored: found from now on. (An `Ok(false)` may have matched a
                            // churn item's entry, which the writer may remove.)
                            returned[j].store(1, Ordering::Release);
                        }
                        Ok(false) => {}
                        // Distinct items: never refused (see the writer).
                        Err(e) => {
                            fail(format!("width {width}: racer {r}: shared {j}: {e:?}"));
                            continue;
                        }
                    }
                    at.store(j + 1, Ordering::Release);
                }
            });
        }
        // The reader.
        s.spawn(|| {
            let mut rng = Rng::new(seed ^ 2);
            let mut found = Vec::new();
            let mut batch = Vec::new();
            while !done.load(Ordering::Acquire) {
                let n = published.load(Ordering::Acquire);
                if n == 0 {
                    std::thread::yield_now();
                    continue;
                }
                batch.clear();
                for _ in 0..32 {
                    let i = rng.below(n as u64) as usize;
                    // Recent items most, where the doubling splits.
                    let i = if rng.below(2) == 0 { n - 1 - i / 8 } else { i };
                    let key = stable(seed, i);
                    if !filter.contains(&key) {
                        fail(format!(
                            "width {width}: stable {i} ({key:#x}) missed by contains, \
                             {} doublings, splitting {}",
                            filter.doublings(),
                            filter.is_doubling()
                        ));
                    }
                    batch.push(key);
                }
                let j = rng.below(SHARED as u64) as usize;
                if returned[j].load(Ordering::Acquire) == 1 && !filter.contains(&shared(seed, j)) {
                    fail(format!(
                        "width {width}: shared {j} missed after an insert_unique stored it"
                    ));
                }
                filter.contains_many(&batch, &mut found);
                if let Some(k) = found.iter().position(|&f| !f) {
                    fail(format!(
                        "width {width}: {:#x} missed by contains_many",
                        batch[k]
                    ));
                }
                let key = batch[rng.below(batch.len() as u64) as usize];
                if filter.count(&key) == 0 {
                    fail(format!("width {width}: {key:#x} counted 0"));
                }
            }
        });
        // The saver.
        s.spawn(|| {
            let mut rng = Rng::new(seed ^ 3);
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_micros(200 + rng.below(800)));
                let n = published.load(Ordering::Acquire);
                let mid = filter.is_doubling();
                let copy = match rng.below(3) {
                    0 => filter.clone(),
                    1 => {
                        let mut written = Vec::new();
                        filter.write_to(&mut written).unwrap();
                        match CuckooFilter::read_from(&written[..]) {
                            Ok(f) => f,
                            Err(e) => {
                                fail(format!("width {width}: a write_to did not read back: {e}"));
                                continue;
                            }
                        }
                    }
                    _ => match CuckooFilter::from_bytes(&filter.to_bytes()) {
                        Ok(f) => f,
                        Err(e) => {
                            fail(format!("width {width}: a save did not load: {e}"));
                            continue;
                        }
                    },
                };
                if let Some(i) = (0..n).find(|&i| !copy.contains(&stable(seed, i))) {
                    fail(format!(
                        "width {width}: copy (begun mid-doubling: {mid}) misses stable {i} of {n}"
                    ));
                }
            }
        });
    });
    let mut failures = failures.into_inner().unwrap();
    let n = published.load(Ordering::Relaxed);
    let raced = racers_at[0]
        .load(Ordering::Relaxed)
        .min(racers_at[1].load(Ordering::Relaxed));
    for (j, win) in wins.iter().enumerate().take(raced) {
        let w = win.load(Ordering::Relaxed);
        // A false match (an entry of another item that matches the key, which the writer may
        // have removed since, with churn) leaves a key with no winner; two winners, never.
        // Without removes, a key with no winner is found (the entry it matched stays).
        if w > 1 || (w == 0 && !churn_on && !filter.contains(&shared(seed, j))) {
            failures.push(format!("width {width}: shared {j} had {w} winners"));
        }
    }
    for i in 0..n {
        if !filter.contains(&stable(seed, i)) {
            failures.push(format!("width {width}: stable {i} missed at the end"));
            break;
        }
    }
    if n == STABLE && filter.doublings() < 3 {
        failures.push(format!(
            "width {width}: only {} doublings in the run",
            filter.doublings()
        ));
    }
    failures
}

#[test]
fn items_stay_found_and_insert_unique_has_one_winner_at_every_width_while_tiny_tables_double() {
    let seed = seed(
        "items_stay_found_and_insert_unique_has_one_winner_at_every_width_while_tiny_tables_double",
    );
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    for capacity in [1usize, 2, 3, 4] {
        for (width, rate, expected) in filters_by_width(capacity) {
            // A quarter of the widths at each capacity (others each seed), to stay short.
            if rng.below(4) != 0 {
                continue;
            }
            // Fresh filters until the configuration's time is up: each run doubles from the
            // first table again.
            let end = Instant::now() + Duration::from_millis(120);
            let mut runs = 0u64;
            while Instant::now() < end {
                let filter = build(capacity, rate, expected).unwrap();
                let run_seed = seed ^ u64::from(width) ^ runs << 40;
                let churn_on = runs.is_multiple_of(2);
                for f in round(run_seed, width, &filter, end - Instant::now(), churn_on) {
                    failures.push(format!(
                        "seed {seed}, capacity {capacity}, rate {rate}, expected {expected:?}, \
                         run {runs}, churn {churn_on}: {f}"
                    ));
                }
                runs += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `clear` while a writer inserts and doubles a tiny table and a reader looks up: every item
/// whose insert began after the last clear ended (and no clear began since) is found, at every
/// width; `len` after the writer stops counts exactly the items inserted since the last clear.
#[test]
fn items_inserted_after_a_concurrent_clear_stay_found_at_every_width() {
    let seed = seed("items_inserted_after_a_concurrent_clear_stay_found_at_every_width");
    let mut failures = Vec::new();
    let mut clears = 0;
    let configs = filters_by_width(2);
    // Each width five times, with fresh filters.
    for (width, rate, expected) in configs.iter().flat_map(|&c| std::iter::repeat_n(c, 5)) {
        let filter = build(2, rate, expected).unwrap();
        let started = AtomicU64::new(0);
        let done = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        // Per item: the clears finished before its insert began, plus one once it returned.
        // (An insert that begins while a clear is under way may end before the clear freezes
        // writers, and be cleared.)
        let gens: Vec<AtomicU64> = (0..STABLE).map(|_| AtomicU64::new(0)).collect();
        let published = AtomicUsize::new(0);
        let fails = std::sync::Mutex::new(Vec::<String>::new());
        std::thread::scope(|s| {
            s.spawn(|| {
                for (i, gen) in gens.iter().enumerate() {
                    let g = done.load(Ordering::SeqCst);
                    match filter.insert(&stable(seed, i)) {
                        Ok(()) => gen.store(g + 1, Ordering::Release),
                        // Distinct items: never refused (see `round`).
                        Err(e) => {
                            fails
                                .lock()
                                .unwrap()
                                .push(format!("width {width}: insert {i}: {e:?}"));
                            break;
                        }
                    }
                    published.store(i + 1, Ordering::Release);
                }
                stop.store(true, Ordering::Release);
            });
            s.spawn(|| {
                let mut rng = Rng::new(seed ^ u64::from(width));
                while !stop.load(Ordering::Acquire) {
                    let n = published.load(Ordering::Acquire);
                    if n == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    let i = n - 1 - rng.below(n.min(64) as u64) as usize;
                    let g = gens[i].load(Ordering::Acquire) - 1;
                    let before = started.load(Ordering::SeqCst);
                    let found = filter.contains(&stable(seed, i));
                    let after = started.load(Ordering::SeqCst);
                    if before == g && after == g && done.load(Ordering::SeqCst) == g && !found {
                        fails.lock().unwrap().push(format!(
                            "width {width}: item {i} (inserted after clear {g}) missed, {} \
                             doublings",
                            filter.doublings()
                        ));
                    }
                }
            });
            let mut rng = Rng::new(seed ^ 0xc1ea);
            while !stop.load(Ordering::Acquire) {
                // A few clears in each run of the writer, which takes a millisecond or so.
                let until = Instant::now() + Duration::from_micros(20 + rng.below(300));
                while Instant::now() < until && !stop.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                started.fetch_add(1, Ordering::SeqCst);
                filter.clear();
                done.fetch_add(1, Ordering::SeqCst);
            }
        });
        let g = started.load(Ordering::SeqCst);
        clears += g;
        let n = published.load(Ordering::Relaxed);
        let kept = (0..n)
            .filter(|&i| gens[i].load(Ordering::Relaxed) - 1 == g)
            .count();
        if let Some(i) = (0..n).find(|&i| {
            gens[i].load(Ordering::Relaxed) - 1 == g && !filter.contains(&stable(seed, i))
        }) {
            failures.push(format!("width {width}: item {i} missed at the end"));
        }
        // Items whose insert overlapped the last clear may or may not have been cleared.
        if filter.len() < kept {
            failures.push(format!(
                "width {width}: len {} below the {kept} items inserted after the last clear",
                filter.len()
            ));
        }
        failures.extend(fails.into_inner().unwrap());
    }
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
    println!("{clears} clears");
    assert!(clears >= 20, "only {clears} clears");
}
