//! Attacks on `ShardedFilter` without a server: the shard rule at crafted boundaries for many
//! shard counts (items built by inverting MurmurHash64A), every operation routed to the item's
//! shard and nowhere else, batch order and refusals, no false negatives under threads in tiny
//! growing or full shards, and `docs/SHARDED.md` (its Python reference, its tables and its
//! manifest example) against the code.

use crate::common::{seed, Rng};
use crate::serial_model::murmur;
use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError, ShardedFilter, MAX_SHARDS};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const M: u64 = 0xc6a4_a793_5bd1_e995;

fn inverse_of_m() -> u64 {
    // Newton's iteration for the inverse of an odd number modulo 2^64.
    let mut inv = M;
    for _ in 0..6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(M.wrapping_mul(inv)));
    }
    assert_eq!(M.wrapping_mul(inv), 1);
    inv
}

/// An 8-byte item whose MurmurHash64A (seed 0) is `hash`: every step of the hash of one block
/// is a bijection (`x ^= x >> 47` is its own inverse, `M` is odd), so it runs backwards.
fn item_with_hash(hash: u64) -> [u8; 8] {
    let inv = inverse_of_m();
    let unshift = |x: u64| x ^ (x >> 47);
    let h3 = unshift(hash);
    let h2 = h3.wrapping_mul(inv);
    let h1 = unshift(h2);
    let k = h1.wrapping_mul(inv) ^ 8u64.wrapping_mul(M);
    let k = unshift(k.wrapping_mul(inv));
    let block = k.wrapping_mul(inv);
    let item = block.to_le_bytes();
    assert_eq!(murmur(&item), hash, "the crafted item hashes to {hash:#x}");
    item
}

/// The documented rule in 128-bit arithmetic (no overflow possible).
fn documented(hash: u64, shards: usize) -> usize {
    ((u128::from(hash >> 32) * shards as u128) >> 32) as usize
}

/// The shard counts tried: all up to 300, powers of two and their neighbours, primes near the
/// top, and random counts (printed with the seed).
fn shard_counts(rng: &mut Rng) -> Vec<usize> {
    let mut counts: Vec<usize> = (1..=300).collect();
    for p in 9..=14 {
        let n = 1usize << p;
        counts.extend([n - 1, n, n + 1]);
    }
    counts.extend([16_381, 16_383, MAX_SHARDS, 10_007, 12_289]);
    for _ in 0..12 {
        counts.push(1 + rng.below(MAX_SHARDS as u64) as usize);
    }
    counts.retain(|&n| (1..=MAX_SHARDS).contains(&n));
    counts.sort_unstable();
    counts.dedup();
    counts
}

fn tiny(shards: usize) -> ShardedFilter {
    ShardedFilter::with_builder(shards, &RedisCuckooFilter::builder().capacity(4)).unwrap()
}

/// For every shard count tried, items crafted to hash exactly at each side of shard
/// boundaries (the smallest high half that the rule sends to shard `s`, and the one below),
/// at 0 and at `u64::MAX`, plus empty, long and binary items, land where the documented rule
/// says, and `ShardedFilter` stores them there.
#[test]
fn the_shard_rule_holds_at_crafted_boundaries_for_many_shard_counts() {
    let mut rng = Rng::new(seed("the_shard_rule_holds_at_crafted_boundaries"));
    let counts = shard_counts(&mut rng);
    let started = Instant::now();
    for &n in &counts {
        let filter = tiny(n);
        let check = |hash: u64| {
            let item = item_with_hash(hash);
            let want = documented(hash, n);
            assert!(want < n);
            assert_eq!(filter.shard_of(item), want, "H = {hash:#x} among {n}");
        };
        check(0);
        check(u64::MAX);
        check(u64::MAX >> 32);
        check(1 << 32);
        // Boundaries: the smallest high half h with h * n >= s * 2^32.
        let boundaries: Vec<u64> = if n <= 300 {
            (1..n as u64).collect()
        } else {
            (0..200).map(|_| 1 + rng.below(n as u64 - 1)).collect()
        };
        for s in boundaries {
            let high = ((u128::from(s) << 32).div_ceil(n as u128)) as u64;
            let low = rng.next_u64() & 0xffff_ffff;
            check((high << 32) | low);
            assert_eq!(documented(high << 32, n), s as usize);
            check(((high - 1) << 32) | 0xffff_ffff);
            assert_eq!(
                documented(((high - 1) << 32) | 0xffff_ffff, n),
                s as usize - 1
            );
        }
        for len in [0usize, 1, 7, 8, 9, 200, 1 << 16] {
            let item: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            assert_eq!(
                filter.shard_of(&item),
                documented(murmur(&item), n),
                "len {len}"
            );
        }
    }
    println!("{} shard counts in {:?}", counts.len(), started.elapsed());
}

/// Every operation goes to the item's shard and to no other: copies of an item planted in
/// every *other* shard are invisible to `contains`, `contains_many`, `count`, `remove` and
/// `insert_unique`/`insert_many_unique` (which store it anyway), and inserts grow only the
/// item's shard.
#[test]
fn every_operation_touches_only_the_items_shard() {
    let mut rng = Rng::new(seed("every_operation_touches_only_the_items_shard"));
    for n in [2usize, 3, 5, 64] {
        let filter =
            ShardedFilter::with_builder(n, &RedisCuckooFilter::builder().capacity(4_096)).unwrap();
        let items: Vec<Vec<u8>> = (0..200)
            .map(|i| {
                let len = rng.below(24) as usize;
                let mut item: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                item.extend_from_slice(format!("#{i}").as_bytes());
                item
            })
            .collect();
        for item in &items {
            let home = documented(murmur(item), n);
            for (s, shard) in filter.shards().iter().enumerate() {
                if s != home {
                    shard.insert(item).unwrap();
                }
            }
        }
        let lens = |f: &ShardedFilter| f.shards().iter().map(|s| s.len()).collect::<Vec<_>>();
        for (i, item) in items.iter().enumerate() {
            let home = documented(murmur(item), n);
            let planted = filter.shards()[home].contains(item);
            assert_eq!(filter.contains(item), planted, "{n} shards, item {i}");
            assert_eq!(filter.count(item), filter.shards()[home].count(item));
            let before = lens(&filter);
            assert_eq!(
                filter.remove(item),
                planted,
                "remove touches only shard {home}"
            );
            assert_eq!(lens(&filter), {
                let mut want = before.clone();
                if planted {
                    want[home] -= 1;
                }
                want
            });
            let before = lens(&filter);
            let op = i % 4;
            match op {
                0 => filter.insert(item).unwrap(),
                1 => assert_eq!(filter.insert_unique(item), Ok(true), "item {i}"),
                2 => assert_eq!(filter.insert_many([item]).unwrap(), [true]),
                _ => assert_eq!(filter.insert_many_unique([item]).unwrap(), [Some(true)]),
            }
            let mut want = before;
            want[home] += 1;
            assert_eq!(
                lens(&filter),
                want,
                "op {op} on item {i} grows only shard {home}"
            );
            assert!(filter.contains(item));
        }
        let mut found = Vec::new();
        filter.contains_many(&items, &mut found);
        assert!(found.iter().all(|&f| f));
    }
}

/// Batches of random items (empty, binary, long, duplicated), crossing the 32-item batch
/// boundary, answer in input order exactly as item-by-item calls on a twin filter.
#[test]
fn random_batches_answer_in_input_order() {
    let mut rng = Rng::new(seed("random_batches_answer_in_input_order"));
    for round in 0..40 {
        let n = 1 + rng.below(40) as usize;
        let a = ShardedFilter::reserve(64 * n as u64, n).unwrap();
        let b = ShardedFilter::reserve(64 * n as u64, n).unwrap();
        let count = rng.below(200) as usize;
        let pool: Vec<Vec<u8>> = (0..count.max(1))
            .map(|_| {
                let len = [0, 1, 8, 33, 500][rng.below(5) as usize];
                (0..len).map(|_| rng.next_u64() as u8).collect()
            })
            .collect();
        let batch: Vec<Vec<u8>> = (0..count)
            .map(|_| pool[rng.below(pool.len() as u64) as usize].clone())
            .collect();
        let single: Vec<bool> = batch.iter().map(|x| b.insert(x).is_ok()).collect();
        assert_eq!(a.insert_many(&batch).unwrap(), single, "round {round}");
        let single: Vec<Option<bool>> = batch.iter().map(|x| b.insert_unique(x).ok()).collect();
        assert_eq!(
            a.insert_many_unique(&batch).unwrap(),
            single,
            "round {round}"
        );
        let mut got = vec![false; 7];
        let probes: Vec<Vec<u8>> = batch
            .iter()
            .cloned()
            .chain((0..50).map(|i| format!("absent{i}").into_bytes()))
            .collect();
        a.contains_many(&probes, &mut got);
        let want: Vec<bool> = probes.iter().map(|x| b.contains(x)).collect();
        assert_eq!(got, want, "round {round}");
        for (x, y) in a.shards().iter().zip(b.shards()) {
            assert_eq!(x.scandump(), y.scandump(), "round {round}");
        }
    }
}

/// `insert_many_unique` stops at the first item whose shard refuses (its sub-filter limit
/// reached), the refusing shard's first item placed after a 32-item batch boundary: the
/// items before it are in, none after, and the iterator yielded at most 31 more.
#[test]
fn insert_many_unique_stops_at_the_first_refusing_shard() {
    let open = || RedisCuckooFilter::reserve(1_000).unwrap();
    let closed = RedisCuckooFilter::builder()
        .capacity(1_000)
        .max_expansions(1)
        .build()
        .unwrap();
    let filter = ShardedFilter::from_shards(vec![open(), open(), closed, open()]).unwrap();
    // 40 items of shards 0, 1, 3, then one of shard 2, then 100 of any shard.
    let mut items: Vec<Vec<u8>> = (0..)
        .map(|i| format!("u{i}").into_bytes())
        .filter(|x| filter.shard_of(x) != 2)
        .take(40)
        .collect();
    items.push(
        (0..)
            .map(|i| format!("v{i}").into_bytes())
            .find(|x| filter.shard_of(x) == 2)
            .unwrap(),
    );
    items.extend((0..100).map(|i| format!("w{i}").into_bytes()));
    let taken = AtomicUsize::new(0);
    let result = filter.insert_many_unique(items.iter().inspect(|_| {
        taken.fetch_add(1, Ordering::Relaxed);
    }));
    assert_eq!(result, Err(RedisInsertError::MaxExpansionsReached));
    for (i, item) in items.iter().enumerate() {
        assert_eq!(filter.contains(item), i < 40, "item {i}");
    }
    assert_eq!(filter.len(), 40);
    let taken = taken.load(Ordering::Relaxed);
    assert!(
        (41..=41 + 31).contains(&taken),
        "the iterator yielded {taken}"
    );
}

/// Shards that never grow (expansion 0), bucket size 1, filled far past their room by several
/// threads at once: every insert that returned `Ok` is found afterwards (a refused insert's
/// kick walk must not lose a stored item), and `len` counts exactly the `Ok`s.
#[test]
fn full_expansion_0_shards_never_lose_a_stored_item() {
    let seed = seed("full_expansion_0_shards_never_lose_a_stored_item");
    let builder = RedisCuckooFilter::builder()
        .capacity(64)
        .bucket_size(1)
        .expansion(0)
        .max_iterations(50);
    let filter = Arc::new(ShardedFilter::with_builder(3, &builder).unwrap());
    let stored: Vec<Vec<Vec<u8>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|t| {
                let filter = Arc::clone(&filter);
                scope.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..2_000 {
                        let item = format!("{seed}-{t}-{i}").into_bytes();
                        match filter.insert(&item) {
                            Ok(()) => mine.push(item),
                            Err(RedisInsertError::Full) => {}
                            Err(e) => panic!("{e}"),
                        }
                        // Everything this thread stored so far is still there.
                        if i % 64 == 0 {
                            for x in &mine {
                                assert!(filter.contains(x), "thread {t} lost {x:?}");
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: usize = stored.iter().map(Vec::len).sum();
    assert!(total < 3 * 2_000, "the shards filled up");
    for mine in &stored {
        let mut found = Vec::new();
        filter.contains_many(mine, &mut found);
        assert!(found.iter().all(|&f| f), "an Ok-inserted item is missing");
    }
    assert_eq!(filter.len(), total);
}

/// Tiny shards (bucket size 1, capacity 4) that grow many sub-filters and compact as items are
/// removed, two writers inserting and removing, two readers: an item whose insert returned and
/// that no one removed is always found, by `contains` and by `contains_many`.
#[test]
fn tiny_growing_shards_under_inserts_and_removes_have_no_false_negatives() {
    let seed = seed("tiny_growing_shards_under_inserts_and_removes");
    let builder = RedisCuckooFilter::builder()
        .capacity(4)
        .bucket_size(1)
        .expansion(2)
        .max_iterations(3)
        .max_expansions(65_536);
    let filter = Arc::new(ShardedFilter::with_builder(4, &builder).unwrap());
    const N: usize = 60_000;
    const LAG: usize = 64;
    // Item i of writer t: inserted; items with odd i removed LAG steps later.
    let item = move |t: usize, i: usize| format!("{seed}:{t}:{i}").into_bytes();
    let done: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| {
        for t in 0..2 {
            let (filter, done) = (Arc::clone(&filter), Arc::clone(&done));
            scope.spawn(move || {
                for i in 0..N {
                    filter.insert(item(t, i)).unwrap();
                    if i >= LAG && (i - LAG) % 2 == 1 {
                        assert!(
                            filter.remove(item(t, i - LAG)),
                            "writer {t} item {}",
                            i - LAG
                        );
                    }
                    done[t].store(i + 1, Ordering::Release);
                }
            });
        }
        for r in 0..2 {
            let (filter, done, stop) = (Arc::clone(&filter), Arc::clone(&done), Arc::clone(&stop));
            scope.spawn(move || {
                let mut rng = Rng::new(seed ^ r);
                let mut found = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = rng.below(2) as usize;
                    let d = done[t].load(Ordering::Acquire);
                    if d == 0 {
                        continue;
                    }
                    // Even items below d are in, and never removed (odd ones may go any time).
                    let batch: Vec<Vec<u8>> = (0..40)
                        .map(|_| item(t, rng.below(d as u64) as usize & !1))
                        .collect();
                    for x in &batch {
                        assert!(
                            filter.contains(x),
                            "reader {r}: {:?} missing",
                            String::from_utf8_lossy(x)
                        );
                    }
                    filter.contains_many(&batch, &mut found);
                    assert!(
                        found.iter().all(|&f| f),
                        "reader {r}: contains_many missed one"
                    );
                    if done.iter().all(|d| d.load(Ordering::Relaxed) == N) {
                        break;
                    }
                }
            });
        }
        // The writers finish; the readers stop at the end (or after 20 s at most).
        let deadline = Instant::now() + Duration::from_secs(20);
        while done.iter().any(|d| d.load(Ordering::Relaxed) < N) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
    });
    for t in 0..2 {
        for i in 0..N {
            let removed = i + LAG < N && i % 2 == 1;
            if !removed {
                assert!(filter.contains(item(t, i)), "writer {t} item {i}");
            }
        }
    }
    println!(
        "sub-filters per shard: {:?}",
        filter
            .shards()
            .iter()
            .map(|s| s.info().filters)
            .collect::<Vec<_>>()
    );
}

/// CRC16/XMODEM, Redis Cluster's key hash, written from the cluster specification.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// `docs/SHARDED.md`'s tables and example are true: the hashes and shards of its reference
/// values, the slots it says three shards aim at, and the tags of its manifest example (the
/// smallest hex number with that slot).
#[test]
fn the_docs_reference_values_and_manifest_example_are_true() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/SHARDED.md"))
            .unwrap();
    for (item, hash, want) in [
        (
            &b"user:42"[..],
            0xbcc2_6ebc_12a8_e649_u64,
            [1, 2, 2, 11, 12_080],
        ),
        (b"a", 0x0717_17d2_d36b_6b11, [0, 0, 0, 0, 453]),
        (b"", 0, [0, 0, 0, 0, 0]),
    ] {
        assert_eq!(murmur(item), hash);
        for (n, want) in [2, 3, 4, 16, 16_384].into_iter().zip(want) {
            assert_eq!(tiny(n).shard_of(item), want, "{item:?} among {n}");
        }
    }
    let slots: Vec<u16> = (0..3).map(|s| ((2 * s + 1) * 16_384 / 6) as u16).collect();
    assert_eq!(slots, [2730, 8192, 13653]);
    assert!(docs.contains("slots 2730, 8192 and 13653 for three shards"));
    for (slot, tag) in slots.iter().zip(["eff9", "8209", "79e9"]) {
        let smallest = (0u32..)
            .map(|n| format!("{n:x}"))
            .find(|t| crc16(t.as_bytes()) & 0x3fff == *slot)
            .unwrap();
        assert_eq!(smallest, tag, "slot {slot}");
        assert!(docs.contains(&format!("{{{tag}}}")), "{tag} in the example");
    }
}

/// The Python reference code of `docs/SHARDED.md` (taken from the page itself) and the
/// functions of `scripts/sharded_client.py` compute the same shard as `ShardedFilter::shard_of`
/// for random items (empty, binary, long) and shard counts, crafted boundary items included.
#[test]
fn the_docs_python_reference_agrees_with_shard_of() {
    let mut rng = Rng::new(seed("the_docs_python_reference_agrees_with_shard_of"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/SHARDED.md")).unwrap();
    let start = docs.find("```python\n").expect("a Python block") + "```python\n".len();
    let code = &docs[start..start + docs[start..].find("```").unwrap()];
    let mut cases: Vec<(Vec<u8>, usize)> = Vec::new();
    for _ in 0..3_000 {
        let len = [0, 1, 3, 7, 8, 9, 15, 16, 17, 64, 1000][rng.below(11) as usize];
        let item: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let n = [1, 2, 3, 7, 16, 1000, 5_461, 16_383, 16_384][rng.below(9) as usize];
        cases.push((item, n));
    }
    for n in [3usize, 1000, 16_384] {
        for s in 1..n.min(50) {
            let high = ((u128::from(s as u64) << 32).div_ceil(n as u128)) as u64;
            cases.push((item_with_hash(high << 32).to_vec(), n));
            cases.push((item_with_hash(((high - 1) << 32) | 0xffff_ffff).to_vec(), n));
        }
    }
    cases.push((item_with_hash(u64::MAX).to_vec(), 16_384));
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let input: String = cases
        .iter()
        .map(|(item, n)| format!("x{} {n}\n", hex(item)))
        .collect();
    let dir = std::env::temp_dir().join(format!("sharded-attack-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cases.txt"), input).unwrap();
    let driver = r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location('client', CLIENT)
client = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(client)
except ImportError:
    client = None
out = []
for line in open(CASES):
    item_hex, n = line.split()
    item, n = bytes.fromhex(item_hex[1:]), int(n)
    a = shard_of(item, n)
    b = client.shard_of(item, n) if client else a
    out.append(f'{a} {b}')
print('\n'.join(out))
print('client', 'yes' if client else 'no', file=sys.stderr)
"#
    .replace(
        "CLIENT",
        &format!(
            "{:?}",
            root.join("scripts/sharded_client.py").display().to_string()
        ),
    )
    .replace(
        "CASES",
        &format!("{:?}", dir.join("cases.txt").display().to_string()),
    );
    let driver = format!("{code}\n{driver}");
    std::fs::write(dir.join("driver.py"), driver).unwrap();
    let output = Command::new("python3")
        .arg(dir.join("driver.py"))
        .env("PYTHONPATH", root.join(".redis-stack/python"))
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "python failed:\n{stderr}");
    println!("{stderr}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), cases.len());
    let mut filters = std::collections::HashMap::new();
    for ((item, n), line) in cases.iter().zip(lines) {
        let filter = filters.entry(*n).or_insert_with(|| tiny(*n));
        let want = filter.shard_of(item);
        assert_eq!(line, format!("{want} {want}"), "{} among {n}", hex(item));
    }
}
