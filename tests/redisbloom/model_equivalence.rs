//! Single-threaded, `RedisCuckooFilter` holds exactly the bytes of an independent
//! serial model of RedisBloom (`serial_model::Model`), after long random operation sequences
//! on tiny tables, for every bucket size 1..=9, 16, 255, expansions 0..=4, max iterations
//! 1..=30, and through reloads from both export formats.

use crate::common::{seed, Rng};
use crate::serial_model::{MErr, Model};
use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInsertError, PORTABLE_RDB_VERSION};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

fn map_err(e: RedisInsertError) -> MErr {
    match e {
        RedisInsertError::Full => MErr::Full,
        RedisInsertError::MaxExpansionsReached => MErr::MaxExp,
        other => panic!("unexpected {other:?}"),
    }
}

/// Items in one `insert_many`/`contains_many` call: mostly a few, now and then past the
/// filter's batch of 32 (the calls load a batch's buckets before handling its items).
fn batch_len(rng: &mut Rng) -> usize {
    if rng.below(6) == 0 {
        30 + rng.below(50) as usize
    } else {
        1 + rng.below(6) as usize
    }
}

fn pool(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = vec![Vec::new()]; // the empty item ""
    while items.len() < n {
        let len = rng.below(12) as usize;
        items.push((0..len).map(|_| rng.next_u64() as u8).collect());
    }
    items
}

fn assert_same(f: &RedisCuckooFilter, m: &Model, ctx: &str) {
    let got = f.scandump();
    let want = m.scandump();
    if got != want {
        let shape = |c: &[(u64, Vec<u8>)]| {
            c.iter()
                .map(|(i, d)| format!("{i}:{:02x?}", d))
                .collect::<Vec<_>>()
        };
        panic!(
            "{ctx}: SCANDUMP differs\n got  {:?}\n want {:?}",
            shape(&got),
            shape(&want)
        );
    }
    let info = f.info();
    assert_eq!(info.items, m.items, "{ctx}: items");
    assert_eq!(info.deletes, m.deletes, "{ctx}: deletes");
    assert_eq!(info.filters, m.subs.len() as u64, "{ctx}: filters");
    assert_eq!(info.size, m.info_size(), "{ctx}: size");
    assert_eq!(info.buckets, m.nb, "{ctx}: buckets");
    assert_eq!(info.expansion, m.expansion, "{ctx}: expansion");
    assert_eq!(info.bucket_size, m.bs as u64, "{ctx}: bucket size");
    assert_eq!(
        info.max_iterations,
        u64::from(m.max_iter),
        "{ctx}: max iter"
    );
}

/// Largest sub-filter index the model may reach while keeping sub-filters small.
fn safe_max_exp(nb: u64, bs: u64, exp: u64, rng: &mut Rng) -> u64 {
    if exp <= 1 {
        return 1 + rng.below(12);
    }
    let mut n = 1;
    while n < 12 && nb * exp.pow(n as u32) * bs <= 1 << 15 {
        n += 1;
    }
    1 + rng.below(n)
}

/// How many more sub-filters the model may add before its newest one would pass 64 KiB: a
/// batch is cut to this length. `safe_max_exp` bounds the sub-filters that the max-expansions
/// check lets a single insert add, but `insert_many` (CF.INSERT) checks that limit once per
/// call, and every inserted copy may add a sub-filter (a hot item fills both its buckets in
/// each one). Uncut, a batch of 75 copies of 5 items grew a 2-byte filter with expansion 4
/// from 4 sub-filters until the 17th, of 8 GiB, could not be allocated. No insert can grow a
/// filter at its limit, nor one with expansion 0; with expansion 1 the sub-filters stay small.
fn growth_room(m: &Model) -> usize {
    if m.expansion <= 1 || m.subs.len() as u64 >= m.max_exp {
        return usize::MAX;
    }
    let mut bytes = m.nb.saturating_mul(m.bs as u64);
    for _ in 1..m.subs.len() {
        bytes = bytes.saturating_mul(m.expansion);
    }
    let mut room = 0;
    loop {
        bytes = bytes.saturating_mul(m.expansion);
        if bytes > 1 << 16 {
            return room;
        }
        room += 1;
    }
}

#[allow(clippy::too_many_arguments)]
fn run_sequence(
    rng: &mut Rng,
    bs: u64,
    expansion: u64,
    max_iter: u64,
    cap: u64,
    max_exp: u64,
    ops: usize,
    ctx0: &str,
) {
    let f = RedisCuckooFilter::builder()
        .capacity(cap)
        .bucket_size(bs)
        .max_iterations(max_iter)
        .expansion(expansion)
        .max_expansions(max_exp)
        .build()
        .unwrap();
    let mut f = f;
    let mut m = Model::reserve(cap, bs, max_iter, expansion, max_exp);
    let slots = m.subs[0].len();
    let items = pool(rng, (slots * 3).clamp(4, 400));
    let pick = |rng: &mut Rng| items[rng.below(items.len() as u64) as usize].clone();
    // Bias towards inserts first, then mix.
    for op in 0..ops {
        let ctx = format!("{ctx0} op {op}");
        let r = rng.below(100);
        let (subs_before, items_before) = (m.subs.len(), m.items);
        let insert_bias = if op < ops / 3 { 55 } else { 35 };
        let room = growth_room(&m);
        if r < insert_bias + 15 && room == 0 {
            // No insert can be allowed to grow the filter any further: stop this sequence.
            assert_same(&f, &m, &ctx);
            return;
        }
        if r < insert_bias {
            let it = pick(rng);
            let got = f.insert(&it).map_err(map_err);
            let want = m.insert(&it);
            assert_eq!(got, want, "{ctx}: insert {it:02x?}");
        } else if r < insert_bias + 8 {
            let it = pick(rng);
            let got = f.insert_unique(&it).map_err(map_err);
            let want = m.insert_unique(&it);
            assert_eq!(got, want, "{ctx}: insert_unique {it:02x?}");
        } else if r < insert_bias + 12 {
            let n = batch_len(rng).min(room);
            let batch: Vec<Vec<u8>> = (0..n).map(|_| pick(rng)).collect();
            let got = f.insert_many(&batch).map_err(map_err);
            let want = m.insert_many(&batch);
            assert_eq!(got, want, "{ctx}: insert_many");
        } else if r < insert_bias + 15 {
            let n = batch_len(rng).min(room);
            let batch: Vec<Vec<u8>> = (0..n).map(|_| pick(rng)).collect();
            let got = f.insert_many_unique(&batch).map_err(map_err);
            let want = m.insert_many_unique(&batch);
            assert_eq!(got, want, "{ctx}: insert_many_unique");
        } else if r < 88 {
            let it = pick(rng);
            assert_eq!(f.remove(&it), m.remove(&it), "{ctx}: remove {it:02x?}");
        } else if r < 91 {
            f.compact();
            m.compact(true);
        } else if r < 96 {
            for _ in 0..4 {
                let it = pick(rng);
                assert_eq!(f.contains(&it), m.contains(&it), "{ctx}: contains");
                assert_eq!(f.count(&it), m.count(&it), "{ctx}: count");
            }
            // Past one batch of the filter's `contains_many` (32 items) now and then.
            let batch: Vec<Vec<u8>> = (0..batch_len(rng)).map(|_| pick(rng)).collect();
            let mut found = Vec::new();
            f.contains_many(&batch, &mut found);
            let want: Vec<bool> = batch.iter().map(|it| m.contains(it)).collect();
            assert_eq!(found, want, "{ctx}: contains_many");
        } else if r < 98 {
            // Reload through SCANDUMP (a loaded filter gets the default 32 max expansions).
            let chunks = f.scandump();
            if !chunks.is_empty() {
                let g =
                    RedisCuckooFilter::from_chunks(chunks.iter().map(|(i, d)| (*i, d.as_slice())))
                        .unwrap_or_else(|e| panic!("{ctx}: from_chunks: {e:?}"));
                f = g;
                m.max_exp = 32;
            }
        } else {
            let payload = f.dump_payload(PORTABLE_RDB_VERSION);
            if m.items > 0 {
                let g = RedisCuckooFilter::from_dump_payload(&payload)
                    .unwrap_or_else(|e| panic!("{ctx}: from_dump_payload: {e:?}"));
                f = g;
                m.max_exp = 32;
            }
        }
        // Keep the model's sub-filters small after a reload raised max_exp.
        if m.max_exp == 32 && m.expansion > 1 {
            let last = m.subs.len() as u32;
            if m.nb * m.expansion.pow(last) * m.bs as u64 > 1 << 16 {
                // too big to grow further; delete-heavy from here: stop this sequence.
                assert_same(&f, &m, &ctx);
                return;
            }
        }
        assert_same(&f, &m, &ctx);
        let stat = |i: usize| STATS[i].fetch_add(1, Relaxed);
        if m.subs.len() < subs_before {
            stat(0); // a sub-filter dropped
        }
        if m.subs.len() > subs_before {
            stat(1); // growth
        }
        if m.subs.len() == subs_before
            && subs_before > 1
            && m.items < items_before
            && m.deletes == 0
        {
            stat(2); // a compaction that dropped nothing
        }
        if m.subs.len() as u64 >= m.max_exp {
            stat(3); // at the expansion limit
        }
        if m.subs.len() >= 4 {
            stat(4);
        }
    }
}

static STATS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// A fixed number of sequences, not a time budget: a seed replays the whole run.
const ROUNDS_PER_BUCKET_SIZE: u64 = 150;

#[test]
fn random_sequences_match_the_serial_model_byte_for_byte() {
    let s = seed("random_sequences_match_the_serial_model_byte_for_byte");
    let mut rng = Rng::new(s);
    let sizes = [1u64, 2, 3, 4, 5, 6, 7, 8, 9, 16, 255];
    let rounds = ROUNDS_PER_BUCKET_SIZE * sizes.len() as u64;
    for round in 0..rounds {
        let bs = sizes[(round % sizes.len() as u64) as usize];
        let expansion = [0u64, 1, 2, 3, 4][rng.below(5) as usize];
        let max_iter = 1 + rng.below(30);
        let cap = 2 * bs + rng.below(2 * bs * 7 + 1);
        let m0 = Model::reserve(cap, bs, max_iter, expansion, 1);
        let max_exp = safe_max_exp(m0.nb, bs, m0.expansion, &mut rng);
        let ops = if bs >= 16 { 400 } else { 1500 };
        let ctx = format!(
            "round {round} (cap {cap} bs {bs} exp {expansion} iter {max_iter} maxexp {max_exp})"
        );
        run_sequence(&mut rng, bs, expansion, max_iter, cap, max_exp, ops, &ctx);
    }
    let st: Vec<u64> = STATS.iter().map(|a| a.load(Relaxed)).collect();
    println!("{rounds} sequences; ops that dropped / grew / compacted-without-drop / at-limit / >=4 subs: {st:?}");
    assert!(st.iter().all(|&n| n > 0), "coverage: {st:?}");
}

/// A filter below its max-expansions limit gets a batch cut too: one `insert_many` may add a
/// sub-filter per copy, past the limit.
#[test]
fn batches_below_the_expansion_limit_are_cut_to_the_growth_room() {
    // 2 buckets of 1 slot, expansion 4, at most 5 sub-filters; 4 of them, the last 128 bytes.
    let mut m = Model::reserve(2, 1, 22, 3, 5);
    for k in 1..4 {
        m.subs.push(vec![0; 2 * 4usize.pow(k)]);
    }
    // 512, 2 Ki, 8 Ki and 32 Ki bytes fit under 64 KiB; 128 KiB does not.
    assert_eq!(growth_room(&m), 4);
    // Batches of one hot item, each as long as the room allows, as `run_sequence` cuts them:
    // every copy that finds its two slots taken in every sub-filter adds one.
    loop {
        let room = growth_room(&m);
        if room == usize::MAX {
            break;
        }
        m.insert_many(&vec![b"hot".to_vec(); room]).unwrap();
    }
    assert!(m.subs.len() >= 5, "{} sub-filters", m.subs.len());
    let largest = m.subs.iter().map(Vec::len).max().unwrap();
    assert!(largest <= 1 << 16, "a sub-filter of {largest} bytes");
}

/// Hand-checked spec facts the model above relies on (so a bug shared by model and crate
/// still shows up): the worked example, count double counting, the rollback.
#[test]
fn model_reproduces_the_spec_worked_example() {
    let mut m = Model::reserve(4, 1, 20, 1, 32);
    for it in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        m.insert(it.as_bytes()).unwrap();
    }
    let data: Vec<u8> = m.subs.concat();
    assert_eq!(
        data,
        [0x00, 0xc4, 0xcb, 0x10, 0x00, 0xbc, 0xa9, 0x06, 0x4b, 0x00, 0x00, 0x1c]
    );
    assert_eq!(m.info_size(), 100);
    let mut c = Model::reserve(4, 2, 20, 1, 32);
    c.insert(b"b").unwrap();
    assert_eq!(c.count(b"b"), 2);
    c.insert(b"b").unwrap();
    assert_eq!(c.count(b"b"), 4);
    c.remove(b"b");
    assert_eq!(c.subs[0], [0, 0, 0, 0x10]);
}

/// Expansion 0 with a full table: every failed insert leaves the bytes exactly as they were
/// (the rollback), for every bucket size and max_iterations.
#[test]
fn failed_inserts_leave_bytes_unchanged_for_every_geometry() {
    let s = seed("failed_inserts_leave_bytes_unchanged_for_every_geometry");
    let mut rng = Rng::new(s);
    for bs in [1u64, 2, 3, 4, 5, 6, 7, 8, 9, 16, 255] {
        for max_iter in [1u64, 2, 3, 7, 20, 30, 1000] {
            let cap = 2 * bs + rng.below(6 * bs);
            let f = RedisCuckooFilter::builder()
                .capacity(cap)
                .bucket_size(bs)
                .max_iterations(max_iter)
                .expansion(0)
                .build()
                .unwrap();
            let mut m = Model::reserve(cap, bs, max_iter, 0, 32);
            let mut fails = 0;
            let mut i = 0u64;
            while fails < 40 && i < 20_000 {
                let it = rng.next_u64().to_le_bytes();
                let before = f.scandump();
                let got = f.insert(it).map_err(map_err);
                assert_eq!(got, m.insert(&it), "bs {bs} iter {max_iter} #{i}");
                if got.is_err() {
                    fails += 1;
                    assert_eq!(
                        f.scandump(),
                        before,
                        "bs {bs} iter {max_iter}: failed insert"
                    );
                }
                i += 1;
            }
            assert_eq!(f.scandump(), m.scandump(), "bs {bs} iter {max_iter}");
        }
    }
}

/// Fixed, like `ROUNDS_PER_BUCKET_SIZE`, so that a seed replays the whole run.
const MEDIUM_ROUNDS: u64 = 400;

/// Medium tables (stripes covering several buckets, words shared by buckets of different
/// stripes), long sequences, compared every 97 operations.
#[test]
fn medium_tables_match_the_serial_model() {
    let s = seed("medium_tables_match_the_serial_model");
    let mut rng = Rng::new(s);
    for round in 0..MEDIUM_ROUNDS {
        let bs = [1u64, 2, 3, 4, 5, 7, 8, 9, 16][rng.below(9) as usize];
        let cap = 2 * bs + rng.below(3000);
        let exp = [0u64, 1, 2][rng.below(3) as usize];
        let mi = 1 + rng.below(30);
        let f = RedisCuckooFilter::builder()
            .capacity(cap)
            .bucket_size(bs)
            .max_iterations(mi)
            .expansion(exp)
            .max_expansions(6)
            .build()
            .unwrap();
        let mut m = Model::reserve(cap, bs, mi, exp, 6);
        let mut live: Vec<[u8; 8]> = Vec::new();
        let ctx = format!("seed {s} round {round} cap {cap} bs {bs} exp {exp} mi {mi}");
        for op in 0..20_000 {
            if rng.below(3) != 0 || live.is_empty() {
                let it = rng.next_u64().to_le_bytes();
                let r = f.insert(it).map_err(map_err);
                assert_eq!(r, m.insert(&it), "{ctx} op {op}");
                if r.is_ok() {
                    live.push(it);
                }
            } else {
                let it = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(f.remove(it), m.remove(&it), "{ctx} op {op}");
            }
            if op % 97 == 0 {
                assert_same(&f, &m, &format!("{ctx} op {op}"));
            }
        }
        assert_same(&f, &m, &ctx);
    }
}

/// Filters loaded from arbitrary bytes (fingerprints anywhere, 1-bucket sub-filters, any
/// deletes counter): Redis answers and kicks purely from the bytes, and so must the crate.
#[test]
fn arbitrary_loaded_bytes_then_operations_match_the_model() {
    let s = seed("arbitrary_loaded_bytes_then_operations_match_the_model");
    let mut rng = Rng::new(s);
    for round in 0..1500 {
        let nb = 1u64 << rng.below(5);
        let bs = 1 + rng.below(9) as usize;
        let exp = [0u64, 1, 2, 4][rng.below(4) as usize];
        let nf = if exp == 0 {
            1
        } else {
            1 + rng.below(4) as usize
        };
        let density = rng.below(101);
        let subs: Vec<Vec<u8>> = (0..nf)
            .map(|i| {
                (0..(nb * exp.pow(i as u32)) as usize * bs)
                    .map(|_| {
                        if rng.below(100) < density {
                            1 + rng.below(255) as u8
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect();
        let mut m = Model {
            nb,
            bs,
            max_iter: 1 + rng.below(25) as u16,
            expansion: exp,
            max_exp: 32,
            subs,
            items: 0,
            deletes: rng.below(50),
        };
        m.items = m.occupied();
        if m.items == 0 {
            continue;
        }
        let f =
            RedisCuckooFilter::from_chunks(m.scandump().iter().map(|(i, d)| (*i, d.as_slice())))
                .unwrap_or_else(|e| panic!("seed {s} round {round}: {e:?}"));
        let ctx = format!("seed {s} round {round} nb {nb} bs {bs} exp {exp} nf {nf}");
        assert_same(&f, &m, &ctx);
        for op in 0..300 {
            let it = (rng.next_u64() % 64).to_le_bytes();
            let ctx = format!("{ctx} op {op}");
            match rng.below(6) {
                0 | 1 => assert_eq!(f.insert(it).map_err(map_err), m.insert(&it), "{ctx}"),
                2 | 3 => assert_eq!(f.remove(it), m.remove(&it), "{ctx}"),
                4 => {
                    f.compact();
                    m.compact(true);
                }
                _ => {
                    assert_eq!(f.count(it), m.count(&it), "{ctx}");
                    assert_eq!(f.contains(it), m.contains(&it), "{ctx}");
                }
            }
            if m.nb * m.expansion.pow(m.subs.len() as u32) * m.bs as u64 > 1 << 16 {
                break;
            }
            assert_same(&f, &m, &ctx);
            if m.items == 0 {
                break;
            }
        }
    }
}
