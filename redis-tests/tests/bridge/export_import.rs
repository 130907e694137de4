//! The Redis bridge against real servers (Redis + RedisBloom, started here on free ports; see
//! `redis-tests/src/lib.rs`): export both ways, import, random command sequences pipelined to Redis and
//! replayed locally, error paths, and the `CF.LOADCHUNK` replication caveat.
//!
//! Each test is ignored unless asked for (`cargo test -p redis-tests -- --include-ignored`): it
//! needs `redis-server` and the module. Run `scripts/install-redis.sh` once to install both.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use crate::common;
use crate::common::Rng;
use atomic_cuckoo::redisbloom::{
    BridgeError, ExportMode, RedisCuckooFilter, RedisInfo, RedisInsertError,
};
use redis::{Connection, Value};
use redis_tests::{server_scandump, wait_until_alone, CuttingProxy, Server, Trigger};

const RESTORE: ExportMode = ExportMode::Restore { replace: false };

// ---- helpers --------------------------------------------------------------------------------

/// `CF.INFO key` as a [`RedisInfo`]-like tuple list.
fn server_info(conn: &mut Connection, key: &str) -> Vec<(String, i64)> {
    let reply: Vec<Value> = redis::cmd("CF.INFO").arg(key).query(conn).unwrap();
    reply
        .chunks(2)
        .map(|pair| {
            let name = match &pair[0] {
                Value::SimpleString(s) => s.clone(),
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("CF.INFO name {other:?}"),
            };
            let Value::Int(v) = pair[1] else {
                panic!("CF.INFO value {:?}", pair[1])
            };
            (name, v)
        })
        .collect()
}

fn info_fields(i: RedisInfo) -> Vec<(String, i64)> {
    [
        ("Size", i.size),
        ("Number of buckets", i.buckets),
        ("Number of filters", i.filters),
        ("Number of items inserted", i.items),
        ("Number of items deleted", i.deletes),
        ("Bucket size", i.bucket_size),
        ("Expansion rate", i.expansion),
        ("Max iterations", i.max_iterations),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_owned(), v as i64))
    .collect()
}

/// `CF.MEXISTS` of `items`, 1,000 per command, all commands in one pipeline.
fn server_mexists(conn: &mut Connection, key: &str, items: &[Vec<u8>]) -> Vec<bool> {
    let mut pipe = redis::pipe();
    for batch in items.chunks(1000) {
        pipe.cmd("CF.MEXISTS").arg(key).arg(batch);
    }
    let replies: Vec<Vec<i64>> = pipe.query(conn).unwrap();
    replies.into_iter().flatten().map(|v| v != 0).collect()
}

fn local_contains(f: &RedisCuckooFilter, items: &[Vec<u8>]) -> Vec<bool> {
    let mut out = Vec::new();
    f.contains_many(items, &mut out);
    out
}

fn keys_matching(conn: &mut Connection, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS").arg(pattern).query(conn).unwrap()
}

fn server_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {d}", e.code()),
        None => e.code().to_owned(),
    }
}

/// A reply in a comparable form: errors as their text.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    Int(i64),
    Ok,
    Ints(Vec<i64>),
    Err(String),
}

fn reply(v: Value) -> Reply {
    match v {
        Value::Int(n) => Reply::Int(n),
        Value::Okay => Reply::Ok,
        Value::Array(items) => Reply::Ints(
            items
                .into_iter()
                .map(|i| match i {
                    Value::Int(n) => n,
                    other => panic!("array element {other:?}"),
                })
                .collect(),
        ),
        Value::ServerError(e) => Reply::Err(server_text(&e)),
        other => panic!("unexpected reply {other:?}"),
    }
}

fn insert_err(e: RedisInsertError) -> Reply {
    Reply::Err(e.to_string())
}

/// A CF command with its items.
#[derive(Clone, Debug)]
enum Op {
    Add(Vec<u8>),
    AddNx(Vec<u8>),
    Insert(Vec<Vec<u8>>),
    InsertNx(Vec<Vec<u8>>),
    Exists(Vec<u8>),
    MExists(Vec<Vec<u8>>),
    Count(Vec<u8>),
    Del(Vec<u8>),
    Compact,
}

impl Op {
    fn push(&self, pipe: &mut redis::Pipeline, key: &str) {
        match self {
            Op::Add(i) => pipe.cmd("CF.ADD").arg(key).arg(i),
            Op::AddNx(i) => pipe.cmd("CF.ADDNX").arg(key).arg(i),
            Op::Insert(items) => pipe.cmd("CF.INSERT").arg(key).arg("ITEMS").arg(items),
            Op::InsertNx(items) => pipe.cmd("CF.INSERTNX").arg(key).arg("ITEMS").arg(items),
            Op::Exists(i) => pipe.cmd("CF.EXISTS").arg(key).arg(i),
            Op::MExists(items) => pipe.cmd("CF.MEXISTS").arg(key).arg(items),
            Op::Count(i) => pipe.cmd("CF.COUNT").arg(key).arg(i),
            Op::Del(i) => pipe.cmd("CF.DEL").arg(key).arg(i),
            Op::Compact => pipe.cmd("CF.COMPACT").arg(key),
        };
    }

    /// Applies the command to the local filter; Redis's reply (RESP2).
    fn apply(&self, f: &RedisCuckooFilter) -> Reply {
        let b = |x: bool| Reply::Int(i64::from(x));
        match self {
            Op::Add(i) => f.insert(i).map_or_else(insert_err, |()| Reply::Int(1)),
            Op::AddNx(i) => f.insert_unique(i).map_or_else(insert_err, b),
            Op::Insert(items) => f.insert_many(items).map_or_else(insert_err, |r| {
                Reply::Ints(r.into_iter().map(|ok| if ok { 1 } else { -1 }).collect())
            }),
            Op::InsertNx(items) => f.insert_many_unique(items).map_or_else(insert_err, |r| {
                Reply::Ints(
                    r.into_iter()
                        .map(|o| match o {
                            Some(true) => 1,
                            Some(false) => 0,
                            None => -1,
                        })
                        .collect(),
                )
            }),
            Op::Exists(i) => b(f.contains(i)),
            Op::MExists(items) => Reply::Ints(
                local_contains(f, items)
                    .into_iter()
                    .map(i64::from)
                    .collect(),
            ),
            Op::Count(i) => Reply::Int(f.count(i) as i64),
            Op::Del(i) => b(f.remove(i)),
            Op::Compact => {
                f.compact();
                Reply::Ok
            }
        }
    }
}

/// Sends `ops` to `key` in pipelines of 200 and applies them locally; every reply must match.
/// Returns the number of commands sent.
fn replay(conn: &mut Connection, key: &str, f: &RedisCuckooFilter, ops: &[Op], what: &str) {
    for (batch_no, batch) in ops.chunks(200).enumerate() {
        let mut pipe = redis::pipe();
        for op in batch {
            op.push(&mut pipe, key);
        }
        let replies: Vec<Value> = pipe.ignore_errors().query(conn).unwrap();
        assert_eq!(replies.len(), batch.len());
        for (i, (op, got)) in batch.iter().zip(replies).enumerate() {
            let want = op.apply(f);
            assert_eq!(
                reply(got),
                want,
                "{what}: op {} ({op:?}) on {key}",
                batch_no * 200 + i
            );
        }
    }
}

fn item_pool(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    let mut pool = vec![Vec::new(), vec![0xff, 0xfe, 0x00], vec![0x80]];
    while pool.len() < n {
        pool.push(format!("item-{}", rng.next_u64() % 100_000).into_bytes());
    }
    pool
}

fn random_op(rng: &mut Rng, pool: &[Vec<u8>], phase: usize) -> Op {
    let item = |rng: &mut Rng| pool[rng.below(pool.len() as u64) as usize].clone();
    let items = |rng: &mut Rng| {
        let n = 1 + rng.below(5) as usize;
        (0..n).map(|_| item(rng)).collect::<Vec<_>>()
    };
    // Weights per phase: grow, delete-heavy, mixed.
    let weights: [u64; 9] = match phase {
        0 => [40, 10, 15, 5, 10, 5, 5, 8, 2],
        1 => [8, 4, 3, 2, 8, 3, 5, 60, 7],
        _ => [25, 10, 10, 5, 10, 5, 5, 25, 5],
    };
    let mut pick = rng.below(weights.iter().sum());
    let which = weights
        .iter()
        .position(|&w| {
            if pick < w {
                true
            } else {
                pick -= w;
                false
            }
        })
        .unwrap();
    match which {
        0 => Op::Add(item(rng)),
        1 => Op::AddNx(item(rng)),
        2 => Op::Insert(items(rng)),
        3 => Op::InsertNx(items(rng)),
        4 => Op::Exists(item(rng)),
        5 => Op::MExists(items(rng)),
        6 => Op::Count(item(rng)),
        7 => Op::Del(item(rng)),
        _ => Op::Compact,
    }
}

fn reserve(conn: &mut Connection, key: &str, capacity: u64, bs: u64, mi: u64, exp: u64) {
    let _: () = redis::cmd("CF.RESERVE")
        .arg(key)
        .arg(capacity)
        .arg("BUCKETSIZE")
        .arg(bs)
        .arg("MAXITERATIONS")
        .arg(mi)
        .arg("EXPANSION")
        .arg(exp)
        .query(conn)
        .unwrap();
}

fn redis_version(conn: &mut Connection) -> String {
    let info: String = redis::cmd("INFO").arg("server").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap()
        .trim()
        .to_owned()
}

// ---- (a) a filter built here by several threads, exported both ways ------------------------

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn threaded_build_exported_both_ways_answers_like_the_local_filter() {
    let server = Server::start("threaded_build_exported_both_ways");
    let mut conn = server.conn();
    let filter = Arc::new(
        RedisCuckooFilter::builder()
            .capacity(100_000)
            .bucket_size(4)
            .expansion(2)
            .build()
            .unwrap(),
    );
    // 4 threads, 150,000 items: the filter grows to several sub-filters.
    let threads = 4;
    let per_thread = 37_500;
    thread::scope(|s| {
        for t in 0..threads {
            let f = &filter;
            s.spawn(move || {
                for i in 0..per_thread {
                    f.insert(format!("user:{}", t * per_thread + i)).unwrap();
                }
            });
        }
    });
    let inserted: Vec<Vec<u8>> = (0..threads * per_thread)
        .map(|i| format!("user:{i}").into_bytes())
        .collect();
    let info = filter.info();
    assert!(info.filters > 1, "{info:?}");

    let restored = filter.export_to(&mut conn, "restored", RESTORE).unwrap();
    let loaded = filter
        .export_to(&mut conn, "loaded", ExportMode::LoadChunk)
        .unwrap();
    let version = redis_version(&mut conn);
    println!("Redis {version}: RESTORE {restored:?}; LOADCHUNK {loaded:?}");
    if version.starts_with("7.0.") {
        assert_eq!(restored.rdb_version, Some(10));
    }
    assert!(keys_matching(&mut conn, "*atomic-cuckoo-load*").is_empty());

    let mut rng = Rng::new(common::seed("threaded_build_exported_both_ways"));
    let probes: Vec<Vec<u8>> = (0..100_000)
        .map(|_| format!("probe:{}", rng.next_u64()).into_bytes())
        .collect();
    let local_probes = local_contains(&filter, &probes);
    for key in ["restored", "loaded"] {
        assert_eq!(server_scandump(&mut conn, key), filter.scandump(), "{key}");
        assert_eq!(server_info(&mut conn, key), info_fields(filter.info()));
        let found = server_mexists(&mut conn, key, &inserted);
        assert_eq!(
            found.iter().filter(|&&b| b).count(),
            inserted.len(),
            "{key}"
        );
        let answers = server_mexists(&mut conn, key, &probes);
        assert_eq!(answers, local_probes, "{key}: 100,000 random probes");
        let fp = answers.iter().filter(|&&b| b).count();
        println!(
            "{key}: {} inserted all found; 100,000 probes equal, {fp} false positives",
            inserted.len()
        );
    }

    // Further CF.ADD / CF.DEL in Redis behave as the local filter predicts: the same replies,
    // then the same bytes. One local copy per key (both start from the export).
    let copy =
        RedisCuckooFilter::from_chunks(filter.scandump().iter().map(|(it, c)| (*it, c.as_slice())))
            .unwrap();
    let ops: Vec<Op> = (0..20_000)
        .map(|_| {
            let n = rng.next_u64();
            match n % 3 {
                0 => Op::Del(inserted[(n >> 8) as usize % inserted.len()].clone()),
                1 => Op::Del(format!("absent:{}", n >> 8).into_bytes()),
                _ => Op::Add(format!("new:{}", n >> 8).into_bytes()),
            }
        })
        .collect();
    replay(&mut conn, "restored", &filter, &ops, "after RESTORE");
    replay(&mut conn, "loaded", &copy, &ops, "after LOADCHUNK");
    assert_eq!(server_scandump(&mut conn, "restored"), filter.scandump());
    assert_eq!(server_scandump(&mut conn, "loaded"), copy.scandump());
    println!("20,000 further CF.ADD/CF.DEL on each key: replies and bytes equal");
}

// ---- (b) import ------------------------------------------------------------------------------

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn import_of_a_filter_built_by_cf_insert_answers_like_redis() {
    let server = Server::start("import_of_a_filter_built_by_cf_insert");
    let mut conn = server.conn();
    reserve(&mut conn, "ins", 20_000, 3, 10, 2);
    let items: Vec<Vec<u8>> = (0..60_000).map(|i| format!("k{i}").into_bytes()).collect();
    let mut pipe = redis::pipe();
    for batch in items.chunks(1000) {
        pipe.cmd("CF.INSERT")
            .arg("ins")
            .arg("ITEMS")
            .arg(batch)
            .ignore();
    }
    for item in items.iter().step_by(7) {
        pipe.cmd("CF.DEL").arg("ins").arg(item).ignore();
    }
    let () = pipe.query(&mut conn).unwrap();

    let replica = RedisCuckooFilter::import_from(&mut conn, "ins").unwrap();
    assert_eq!(replica.scandump(), server_scandump(&mut conn, "ins"));
    assert_eq!(info_fields(replica.info()), server_info(&mut conn, "ins"));
    let mut rng = Rng::new(common::seed("import_of_a_filter_built_by_cf_insert"));
    let mut probes: Vec<Vec<u8>> = (0..100_000)
        .map(|_| format!("p{}", rng.next_u64()).into_bytes())
        .collect();
    probes.extend(items.iter().cloned());
    assert_eq!(
        local_contains(&replica, &probes),
        server_mexists(&mut conn, "ins", &probes)
    );
    println!(
        "imported {:?}; {} probes answered as Redis does",
        replica.info(),
        probes.len()
    );

    // The same under RESP3 (booleans and maps on the wire).
    let mut resp3 = server.conn_resp3();
    let again = RedisCuckooFilter::import_from(&mut resp3, "ins").unwrap();
    assert_eq!(again.scandump(), replica.scandump());
    again
        .export_to(&mut resp3, "ins-resp3", ExportMode::LoadChunk)
        .unwrap();
    again.export_to(&mut resp3, "ins-resp3-r", RESTORE).unwrap();
    let empty = RedisCuckooFilter::reserve(100).unwrap();
    empty.export_to(&mut resp3, "empty-resp3", RESTORE).unwrap();
    let back = RedisCuckooFilter::import_from(&mut resp3, "empty-resp3").unwrap();
    assert_eq!(info_fields(back.info()), info_fields(empty.info()));
    assert_eq!(server_scandump(&mut conn, "ins-resp3"), replica.scandump());
    assert_eq!(
        server_scandump(&mut conn, "ins-resp3-r"),
        replica.scandump()
    );
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn empty_filters_import_from_cf_info_geometry() {
    let server = Server::start("empty_filters_import_from_cf_info_geometry");
    let mut conn = server.conn();
    // Freshly reserved: one sub-filter, no items.
    reserve(&mut conn, "fresh", 1000, 4, 7, 4);
    // Grown to several sub-filters, then every item deleted (deletes counted, compaction).
    reserve(&mut conn, "emptied", 8, 2, 20, 2);
    let items: Vec<String> = (0..40).map(|i| format!("e{i}")).collect();
    let () = redis::cmd("CF.INSERT")
        .arg("emptied")
        .arg("ITEMS")
        .arg(&items)
        .query::<Vec<i64>>(&mut conn)
        .map(|_| ())
        .unwrap();
    for item in &items {
        let _: i64 = redis::cmd("CF.DEL")
            .arg("emptied")
            .arg(item)
            .query(&mut conn)
            .unwrap();
    }
    // Three sub-filters, no items, 9 deletes: a header-only CF.LOADCHUNK.
    let mut header = Vec::new();
    for word in [0u64, 8, 9, 3] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    for half in [2u16, 20, 2] {
        header.extend_from_slice(&half.to_le_bytes());
    }
    let () = redis::cmd("CF.LOADCHUNK")
        .arg("headeronly")
        .arg(1)
        .arg(&header)
        .query(&mut conn)
        .unwrap();
    for key in ["fresh", "emptied", "headeronly"] {
        assert!(server_scandump(&mut conn, key).is_empty(), "{key}");
        let f = RedisCuckooFilter::import_from(&mut conn, key).unwrap();
        assert_eq!(info_fields(f.info()), server_info(&mut conn, key), "{key}");
        println!("{key}: imported empty as {:?}", f.info());
        // Exported again both ways, it is the same filter there.
        for mode in [RESTORE, ExportMode::LoadChunk] {
            let copy = format!("{key}:{mode:?}");
            f.export_to(&mut conn, &copy, mode).unwrap();
            assert_eq!(server_info(&mut conn, &copy), server_info(&mut conn, key));
        }
        // And it goes on like Redis.
        let mut rng = Rng::new(7);
        let pool = item_pool(&mut rng, 30);
        let ops: Vec<Op> = (0..200).map(|_| random_op(&mut rng, &pool, 2)).collect();
        replay(&mut conn, key, &f, &ops, "after importing an empty filter");
        assert_eq!(f.scandump(), server_scandump(&mut conn, key), "{key}");
    }
}

// ---- (c) random sequences: Redis and the local filter in lockstep ---------------------------

/// Largest filter (CF.INFO's Size) a random case goes on with.
const MAX_CASE_BYTES: u64 = 16 << 20;

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn random_command_sequences_match_redis_reply_for_reply_and_byte_for_byte() {
    let server = Server::start("random_command_sequences_match_redis");
    let mut conn = server.conn();
    let mut rng = Rng::new(common::seed("random_command_sequences_match_redis"));
    let (mut commands, mut max_filters, mut cases) = (0usize, 0u64, 0usize);
    for bs in [1u64, 2, 3, 4, 8] {
        for exp in [0u64, 1, 2, 4] {
            for mi in [5u64, 20] {
                let capacity = 2 * bs + rng.below(64 - 2 * bs + 1);
                let key = format!("seq:bs{bs}:e{exp}:m{mi}");
                reserve(&mut conn, &key, capacity, bs, mi, exp);
                let local = RedisCuckooFilter::builder()
                    .capacity(capacity)
                    .bucket_size(bs)
                    .max_iterations(mi)
                    .expansion(exp)
                    .build()
                    .unwrap();
                let pool = item_pool(&mut rng, 8 + (capacity as usize) * 2);
                let mut ops = Vec::new();
                for (phase, n) in [(0, 200), (1, 150), (2, 150)] {
                    ops.extend((0..n).map(|_| random_op(&mut rng, &pool, phase)));
                }
                for (i, part) in ops.chunks(100).enumerate() {
                    replay(&mut conn, &key, &local, part, &format!("{key} part {i}"));
                    assert_eq!(
                        local.scandump(),
                        server_scandump(&mut conn, &key),
                        "{key}: SCANDUMP after {} ops",
                        (i + 1) * 100
                    );
                    // A repeated item fills its buckets and makes RedisBloom grow on every
                    // copy: with expansion 4 a few hundred ops can reach gigabytes (seen: 15
                    // sub-filters, 1.4 GB, which the 2-core CI machine cannot ship three
                    // times). Stop such a case here; its replies so far were compared.
                    if local.info().size > MAX_CASE_BYTES {
                        break;
                    }
                }
                assert_eq!(
                    info_fields(local.info()),
                    server_info(&mut conn, &key),
                    "{key}"
                );
                max_filters = max_filters.max(local.info().filters);
                commands += ops.len();
                cases += 1;

                // The bridge on the same state: export both ways, import back.
                let back = RedisCuckooFilter::import_from(&mut conn, &key).unwrap();
                assert_eq!(back.scandump(), local.scandump(), "{key}: import");
                let r = format!("{key}:restored");
                let l = format!("{key}:loaded");
                local.export_to(&mut conn, &r, RESTORE).unwrap();
                local
                    .export_to(&mut conn, &l, ExportMode::LoadChunk)
                    .unwrap();
                assert_eq!(server_info(&mut conn, &r), server_info(&mut conn, &key));
                assert_eq!(server_info(&mut conn, &l), server_info(&mut conn, &key));
                assert_eq!(server_scandump(&mut conn, &r), local.scandump());
                assert_eq!(server_scandump(&mut conn, &l), local.scandump());
            }
        }
    }
    println!(
        "{cases} configurations, {commands} commands pipelined and replayed: every reply and \
         every SCANDUMP equal; up to {max_filters} sub-filters"
    );
}

// ---- (d) failure paths ----------------------------------------------------------------------

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn missing_keys_wrong_types_and_existing_keys_are_typed_errors() {
    let server = Server::start("missing_keys_wrong_types_and_existing_keys");
    let mut conn = server.conn();
    let filter = RedisCuckooFilter::reserve(1000).unwrap();
    filter.insert("x").unwrap();

    let e = RedisCuckooFilter::import_from(&mut conn, "nope").unwrap_err();
    let missing = matches!(&e, BridgeError::MissingKey { key, message }
        if key == "nope" && message == "ERR not found");
    assert!(missing, "{e:?}");
    println!("missing key: {e}");

    let () = redis::cmd("SET")
        .arg("s")
        .arg("a string")
        .query(&mut conn)
        .unwrap();
    let e = RedisCuckooFilter::import_from(&mut conn, "s").unwrap_err();
    assert!(
        matches!(&e, BridgeError::WrongType { message, .. } if message.starts_with("WRONGTYPE")),
        "{e:?}"
    );
    println!("wrong type: {e}");
    // The connection is still usable (UNWATCH was sent).
    let () = redis::cmd("SET")
        .arg("s2")
        .arg("v")
        .query(&mut conn)
        .unwrap();

    let e = filter.export_to(&mut conn, "s", RESTORE).unwrap_err();
    assert!(
        matches!(&e, BridgeError::KeyExists { message: Some(m), .. } if m.starts_with("BUSYKEY")),
        "{e:?}"
    );
    println!("key exists (RESTORE): {e}");
    let e = filter
        .export_to(&mut conn, "s", ExportMode::LoadChunk)
        .unwrap_err();
    assert!(
        matches!(&e, BridgeError::KeyExists { message: None, .. }),
        "{e:?}"
    );
    println!("key exists (LOADCHUNK): {e}");
    let s: String = redis::cmd("GET").arg("s").query(&mut conn).unwrap();
    assert_eq!(s, "a string");

    // Replacing works both ways, also over a key of another type.
    filter
        .export_to(&mut conn, "s", ExportMode::Restore { replace: true })
        .unwrap();
    assert_eq!(server_scandump(&mut conn, "s"), filter.scandump());
    let () = redis::cmd("SET")
        .arg("s")
        .arg("again")
        .query(&mut conn)
        .unwrap();
    filter
        .export_to(&mut conn, "s", ExportMode::LoadChunkReplace)
        .unwrap();
    assert_eq!(server_scandump(&mut conn, "s"), filter.scandump());
    // An existing filter is refused without replace, replaced with it.
    let e = filter.export_to(&mut conn, "s", RESTORE).unwrap_err();
    assert!(matches!(e, BridgeError::KeyExists { .. }), "{e:?}");
    let other = RedisCuckooFilter::reserve(50).unwrap();
    other.insert("y").unwrap();
    other
        .export_to(&mut conn, "s", ExportMode::LoadChunkReplace)
        .unwrap();
    assert_eq!(server_scandump(&mut conn, "s"), other.scandump());
    assert!(keys_matching(&mut conn, "*atomic-cuckoo-load*").is_empty());
}

/// A filter of 50,000 items: its chunks are binary, and a server without the module echoes the
/// first bytes of an unknown command's arguments in its error reply, which the client cannot
/// parse (invalid UTF-8) and which breaks the connection.
fn fifty_thousand_items() -> RedisCuckooFilter {
    let filter = RedisCuckooFilter::reserve(100_000).unwrap();
    for i in 0..50_000 {
        filter.insert(format!("m{i}")).unwrap();
    }
    filter
}

/// Exports to a server without the module fail with `ModuleMissing` before any payload is
/// sent, and the connection stays usable: checked with `COMMAND INFO`, and with the fallback
/// probe when `COMMAND` is renamed away.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_server_without_the_module_is_detected_before_sending() {
    let filter = fifty_thousand_items();
    for extra in [&[][..], &["--rename-command", "COMMAND", ""][..]] {
        let server = Server::start_with("a_server_without_the_module", extra, false);
        let mut conn = server.conn();
        for mode in [RESTORE, ExportMode::LoadChunk, ExportMode::LoadChunkReplace] {
            let e = filter.export_to(&mut conn, "k", mode).unwrap_err();
            assert!(
                matches!(e, BridgeError::ModuleMissing { .. }),
                "{extra:?} {mode:?}: {e:?}"
            );
            println!("{extra:?} {mode:?} without the module: {e}");
            let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
            assert_eq!(pong, "PONG", "{mode:?}: the connection is still usable");
        }
        let () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query(&mut conn)
            .unwrap();
        let e = RedisCuckooFilter::import_from(&mut conn, "k").unwrap_err();
        assert!(matches!(e, BridgeError::ModuleMissing { .. }), "{e:?}");
        println!("import without the module: {e}");
        let keys = keys_matching(&mut conn, "*");
        assert_eq!(keys, ["k"], "nothing left behind");
    }
}

/// A server where `COMMAND` and `CONFIG` are renamed away (as managed services do): both
/// checks before an export are refused, and the export goes on.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn exports_go_on_when_command_and_config_are_refused() {
    let server = Server::start_with(
        "exports_go_on_when_command_and_config_are_refused",
        &[
            "--rename-command",
            "COMMAND",
            "",
            "--rename-command",
            "CONFIG",
            "",
        ],
        true,
    );
    let mut conn = server.conn();
    let filter = fifty_thousand_items();
    for (key, mode) in [("r", RESTORE), ("l", ExportMode::LoadChunk)] {
        let sent = filter.export_to(&mut conn, key, mode).unwrap();
        assert_eq!(server_scandump(&mut conn, key), filter.scandump(), "{key}");
        println!("{mode:?} with COMMAND and CONFIG refused: {sent:?}");
    }
}

/// Keys with no expiry, other than `allowed`.
fn keys_without_expiry(admin: &mut Connection, allowed: &[&str]) -> Vec<String> {
    keys_matching(admin, "*")
        .into_iter()
        .filter(|k| !allowed.contains(&k.as_str()))
        .filter(|k| redis::cmd("PTTL").arg(k).query::<i64>(admin).unwrap() == -1)
        .collect()
}

/// The connection cut right after the `CF.LOADCHUNK` of the header, which creates the
/// temporary key: the key must not stay without an expiry (the server allocates every
/// sub-filter for the header alone).
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_cut_right_after_the_loadchunk_header_leaves_no_key_without_expiry() {
    let server = Server::start("a_cut_right_after_the_loadchunk_header");
    let mut admin = server.conn();
    let filter = RedisCuckooFilter::reserve(1000).unwrap();
    filter.insert("x").unwrap();
    for mode in [ExportMode::LoadChunk, ExportMode::LoadChunkReplace] {
        let proxy = CuttingProxy::start(server.port);
        let mut conn = redis::Client::open(proxy.url())
            .unwrap()
            .get_connection()
            .unwrap();
        proxy.on_command("CF.LOADCHUNK", 1, Trigger::Cut);
        let e = filter.export_to(&mut conn, "target", mode).unwrap_err();
        assert!(proxy.triggered.load(Ordering::SeqCst), "{mode:?}: no cut");
        assert!(matches!(e, BridgeError::Connection(_)), "{mode:?}: {e:?}");
        // Once the server dropped the client, it has run everything it received.
        drop(conn);
        wait_until_alone(&mut admin);
        let left = keys_without_expiry(&mut admin, &[]);
        assert!(left.is_empty(), "{mode:?}: keys without expiry: {left:?}");
        for tmp in keys_matching(&mut admin, "*atomic-cuckoo-load*") {
            let ttl: i64 = redis::cmd("PTTL").arg(&tmp).query(&mut admin).unwrap();
            println!("{mode:?}: temporary key {tmp} left with PTTL {ttl} ms");
        }
        println!("{mode:?} cut after the header's CF.LOADCHUNK: {e}");
        let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
    }
}

/// A payload over the server's `proto-max-bulk-len` (1 MiB here, a 4 MiB filter): `Restore`
/// is refused before anything is sent, `LoadChunk` sends smaller chunks and succeeds.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn payloads_over_proto_max_bulk_len_are_refused_or_split() {
    let server = Server::start_with(
        "payloads_over_proto_max_bulk_len",
        &["--proto-max-bulk-len", "1mb"],
        true,
    );
    let mut conn = server.conn();
    let filter = RedisCuckooFilter::builder()
        .capacity(1 << 22)
        .bucket_size(4)
        .build()
        .unwrap();
    for i in 0..100_000 {
        filter.insert(format!("p{i}")).unwrap();
    }
    assert!(filter.info().size >= 4 << 20);
    for replace in [false, true] {
        let e = filter
            .export_to(&mut conn, "r", ExportMode::Restore { replace })
            .unwrap_err();
        assert!(
            matches!(&e, BridgeError::Refused { command: "RESTORE", message }
                if message.contains("proto-max-bulk-len")),
            "{e:?}"
        );
        println!("RESTORE of 4 MiB, proto-max-bulk-len 1mb: {e}");
        let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
        assert_eq!(pong, "PONG");
    }
    for (key, mode) in [
        ("l", ExportMode::LoadChunk),
        ("lr", ExportMode::LoadChunkReplace),
    ] {
        let sent = filter.export_to(&mut conn, key, mode).unwrap();
        println!("{mode:?} of 4 MiB, proto-max-bulk-len 1mb: {sent:?}");
        assert_eq!(server_scandump(&mut conn, key), filter.scandump(), "{key}");
    }
    let mut keys = keys_matching(&mut conn, "*");
    keys.sort();
    assert_eq!(keys, ["l", "lr"], "no temporary key, nothing restored");
}

/// The server's reply held back until the client's read times out: the export returns
/// `Connection` whether or not the key was written, and the check the docs give (on a fresh
/// connection: `EXISTS`, then the filter compared) tells which. No key without an expiry stays
/// besides a written target.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn an_unknown_outcome_is_told_apart_by_the_documented_check() {
    let server = Server::start("an_unknown_outcome_is_told_apart");
    let mut admin = server.conn();
    let filter = fifty_thousand_items();
    // The command whose reply (and all after it) is held, and which occurrence of it.
    for (mode, command, nth) in [
        (RESTORE, "RESTORE", 1),
        (ExportMode::LoadChunk, "RENAMENX", 1),
        (ExportMode::LoadChunk, "CF.LOADCHUNK", 2),
        (ExportMode::LoadChunkReplace, "RENAME", 1),
    ] {
        let proxy = CuttingProxy::start(server.port);
        let mut conn = redis::Client::open(proxy.url())
            .unwrap()
            .get_connection()
            .unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_millis(300)))
            .unwrap();
        proxy.on_command(command, nth, Trigger::HoldReplies);
        let e = filter.export_to(&mut conn, "target", mode).unwrap_err();
        assert!(proxy.triggered.load(Ordering::SeqCst), "{mode:?} {command}");
        assert!(matches!(e, BridgeError::Connection(_)), "{mode:?}: {e:?}");
        drop(conn);
        wait_until_alone(&mut admin);
        // What the server did, from its replies that never reached the client: RESTORE's OK,
        // or the publishing transaction's EXEC (PERSIST 1, RENAME OK / RENAMENX 1, ...).
        let held = String::from_utf8_lossy(&proxy.held()).into_owned();
        let written = match command {
            "RESTORE" => held.starts_with("+OK\r\n"),
            "RENAMENX" => held.contains("*3\r\n:1\r\n:1\r\n"),
            "RENAME" => held.contains("*2\r\n:1\r\n+OK\r\n"),
            _ => false,
        };
        // The documented check, on a fresh connection.
        let mut fresh = server.conn();
        let exists: i64 = redis::cmd("EXISTS")
            .arg("target")
            .query(&mut fresh)
            .unwrap();
        assert_eq!(exists == 1, written, "{mode:?} {command}: held {held:?}");
        if exists == 1 {
            let there = RedisCuckooFilter::import_from(&mut fresh, "target").unwrap();
            assert_eq!(there.scandump(), filter.scandump(), "{mode:?} {command}");
        }
        let left = keys_without_expiry(&mut fresh, if written { &["target"] } else { &[] });
        assert!(left.is_empty(), "{mode:?} {command}: {left:?}");
        println!(
            "{mode:?}, replies held from {command} #{nth}: {e}; key written: {written}, EXISTS \
             {exists}"
        );
        let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
    }
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_connection_lost_mid_export_leaves_the_key_untouched() {
    let server = Server::start("a_connection_lost_mid_export");
    let mut admin = server.conn();
    let filter = RedisCuckooFilter::builder()
        .capacity(1 << 20)
        .bucket_size(4)
        .build()
        .unwrap();
    for i in 0..200_000 {
        filter.insert(format!("i{i}")).unwrap();
    }
    for mode in [RESTORE, ExportMode::LoadChunk] {
        let proxy = CuttingProxy::start(server.port);
        let mut conn = redis::Client::open(proxy.url())
            .unwrap()
            .get_connection()
            .unwrap();
        // Enough for the bookkeeping and the LOADCHUNK header, not for 1 MiB of data.
        proxy.cut_after(100_000);
        let e = filter.export_to(&mut conn, "target", mode).unwrap_err();
        assert!(matches!(e, BridgeError::Connection(_)), "{mode:?}: {e:?}");
        assert!(std::error::Error::source(&e).is_some());
        println!("{mode:?} cut after 100,000 bytes: {e}");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("target")
            .query(&mut admin)
            .unwrap();
        assert_eq!(exists, 0, "{mode:?}: the target key must not exist");
        // The half-loaded temporary key (if any) expires within a minute.
        for tmp in keys_matching(&mut admin, "*atomic-cuckoo-load*") {
            let ttl: i64 = redis::cmd("PTTL").arg(&tmp).query(&mut admin).unwrap();
            assert!((1..=60_000).contains(&ttl), "{tmp}: PTTL {ttl}");
            println!("{mode:?}: temporary key {tmp} left with PTTL {ttl} ms");
        }
    }
    // The same export on a working connection succeeds.
    filter
        .export_to(&mut admin, "target", ExportMode::LoadChunk)
        .unwrap();
    assert_eq!(server_scandump(&mut admin, "target"), filter.scandump());
}

// ---- (e) replication: RESTORE reaches the replica, LOADCHUNK's data does not ----------------

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn replicas_receive_restore_exports_but_not_loadchunk_data() {
    let primary = Server::start("replicas_receive_restore_not_loadchunk");
    let replica = primary.replica("replicas_receive_restore_not_loadchunk");
    let mut conn = primary.conn();
    let mut rconn = replica.conn();
    let filter = RedisCuckooFilter::reserve(100_000).unwrap();
    let items: Vec<Vec<u8>> = (0..50_000).map(|i| format!("r{i}").into_bytes()).collect();
    for item in &items {
        filter.insert(item).unwrap();
    }
    filter.export_to(&mut conn, "via-restore", RESTORE).unwrap();
    filter
        .export_to(&mut conn, "via-loadchunk", ExportMode::LoadChunk)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged the writes");

    let on_primary = |key| {
        let mut c = primary.conn();
        server_mexists(&mut c, key, &items)
            .into_iter()
            .filter(|&b| b)
            .count()
    };
    let restore_found = server_mexists(&mut rconn, "via-restore", &items)
        .into_iter()
        .filter(|&b| b)
        .count();
    let loadchunk_found = server_mexists(&mut rconn, "via-loadchunk", &items)
        .into_iter()
        .filter(|&b| b)
        .count();
    println!(
        "of {} items: primary finds {} (RESTORE) and {} (LOADCHUNK); the replica finds {} \
         (RESTORE) and {} (LOADCHUNK)",
        items.len(),
        on_primary("via-restore"),
        on_primary("via-loadchunk"),
        restore_found,
        loadchunk_found
    );
    assert_eq!(restore_found, items.len());
    assert_eq!(
        server_scandump(&mut rconn, "via-restore"),
        filter.scandump()
    );
    // The documented caveat (Redis up to 8.6): only LOADCHUNK's header reached the replica.
    // It has the counters and the geometry, and every slot empty.
    assert_eq!(
        loadchunk_found, 0,
        "LOADCHUNK data chunks are not replicated"
    );
    assert_eq!(
        server_info(&mut rconn, "via-loadchunk"),
        server_info(&mut conn, "via-loadchunk")
    );
    let dump = server_scandump(&mut rconn, "via-loadchunk");
    assert_eq!(dump[0], filter.scandump()[0], "the header is replicated");
    assert!(dump[1..].iter().all(|(_, c)| c.iter().all(|&b| b == 0)));
    // And the replica's filter is inconsistent (items counted, none stored): import says so.
    let e = RedisCuckooFilter::import_from(&mut rconn, "via-loadchunk").unwrap_err();
    assert!(matches!(e, BridgeError::Inconsistent { .. }), "{e:?}");
    println!("import from the replica: {e}");
}

// ---- import under concurrent writes ---------------------------------------------------------

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn import_under_concurrent_writes_is_a_consistent_snapshot() {
    let server = Server::start("import_under_concurrent_writes");
    let mut conn = server.conn();
    reserve(&mut conn, "hot", 200_000, 2, 20, 1);
    let stop = Arc::new(AtomicBool::new(false));
    // Two writers, one CF.ADD per round trip each: most WATCHed snapshots are aborted, and
    // after 5 aborts in a row the import falls back to DUMP.
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (stop, mut wconn) = (stop.clone(), server.conn());
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let _: i64 = redis::cmd("CF.ADD")
                        .arg("hot")
                        .arg(n * 2 + w)
                        .query(&mut wconn)
                        .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    while server_scandump(&mut conn, "hot").is_empty() {
        thread::yield_now();
    }
    let mut sizes = Vec::new();
    for _ in 0..20 {
        let f = RedisCuckooFilter::import_from(&mut conn, "hot").unwrap();
        sizes.push(f.info().items);
    }
    stop.store(true, Ordering::Relaxed);
    let written: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut conn)
        .unwrap();
    let calls = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse().unwrap())
    };
    println!(
        "20 imports during {written} concurrent CF.ADDs: item counts {sizes:?}; the server ran \
         {} WATCH, {} EXEC (aborted ones included), {} DUMP",
        calls("watch"),
        calls("exec"),
        calls("dump")
    );
    assert!(sizes.windows(2).all(|w| w[0] <= w[1]));
    assert!(sizes[0] > 0);
}

// ---- RDB version negotiation, through a ConnectionLike of our own ---------------------------

/// A connection that claims to be another Redis version in `INFO` and passes the rest on.
struct ClaimsVersion {
    inner: Connection,
    version: &'static str,
    infos: usize,
}

impl redis::ConnectionLike for ClaimsVersion {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<Value> {
        // INFO itself (`*2 $4 INFO $6 server`), not COMMAND INFO.
        if cmd.starts_with(b"*2\r\n$4\r\nINFO\r\n") {
            self.infos += 1;
            let text = format!(
                "# Server\r\nredis_version:{}\r\nredis_mode:standalone\r\n",
                self.version
            );
            return Ok(Value::BulkString(text.into_bytes()));
        }
        self.inner.req_packed_command(cmd)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        self.inner.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.inner.check_connection()
    }

    fn is_open(&self) -> bool {
        self.inner.is_open()
    }
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn restore_steps_down_to_an_rdb_version_the_server_takes() {
    let server = Server::start("restore_steps_down_to_an_rdb_version");
    let mut conn = server.conn();
    let actual = redis_version(&mut conn);
    let filter = RedisCuckooFilter::reserve(1000).unwrap();
    filter.insert("v").unwrap();
    let honest = filter.export_to(&mut conn, "honest", RESTORE).unwrap();
    // A server that claims 8.0 (RDB 12): versions above its own are refused, and the export
    // steps down until one is taken, the same one as above.
    let mut liar = ClaimsVersion {
        inner: server.conn(),
        version: "8.0.0",
        infos: 0,
    };
    let stepped = filter.export_to(&mut liar, "stepped", RESTORE).unwrap();
    assert_eq!(liar.infos, 1);
    assert_eq!(stepped.rdb_version, honest.rdb_version);
    let tries = u64::from(12 - honest.rdb_version.unwrap()) + 1;
    assert_eq!(
        stepped.commands,
        3 + tries,
        "COMMAND INFO, CONFIG GET, INFO, then one RESTORE per version"
    );
    println!(
        "Redis {actual}: honest INFO → RDB {:?} in {} commands; claiming 8.0.0 → RDB {:?} after \
         {tries} RESTOREs",
        honest.rdb_version, honest.commands, stepped.rdb_version
    );
    assert_eq!(server_scandump(&mut conn, "stepped"), filter.scandump());
    // A server that claims 6.2 gets RDB 9, which every Redis from 5.0 on takes.
    let mut old = ClaimsVersion {
        inner: server.conn(),
        version: "6.2.14",
        infos: 0,
    };
    let nine = filter.export_to(&mut old, "nine", RESTORE).unwrap();
    assert_eq!(nine.rdb_version, Some(9));
    assert_eq!(server_scandump(&mut conn, "nine"), filter.scandump());
}

// ---- sub-filters larger than one 16 MiB chunk, and empty filters, both ways ------------------

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn large_sub_filters_travel_in_16_mib_chunks_and_empty_filters_by_geometry() {
    let server = Server::start("large_sub_filters_travel_in_16_mib_chunks");
    let mut conn = server.conn();
    // One 32 MiB sub-filter (bucket size 1, 2^25 buckets): SCANDUMP splits it in two.
    let big = RedisCuckooFilter::builder()
        .capacity(1 << 25)
        .bucket_size(1)
        .build()
        .unwrap();
    for i in 0..20_000 {
        big.insert(format!("b{i}")).unwrap();
    }
    let local = big.scandump();
    assert_eq!(
        local.iter().map(|(it, _)| *it).collect::<Vec<_>>(),
        [1, 16_777_217, 33_554_433]
    );
    let r = big.export_to(&mut conn, "big-r", RESTORE).unwrap();
    let l = big
        .export_to(&mut conn, "big-l", ExportMode::LoadChunk)
        .unwrap();
    println!("32 MiB filter: RESTORE {r:?}; LOADCHUNK {l:?}");
    for key in ["big-r", "big-l"] {
        assert_eq!(server_scandump(&mut conn, key), local, "{key}");
        let back = RedisCuckooFilter::import_from(&mut conn, key).unwrap();
        assert_eq!(back.scandump(), local, "{key}: import");
    }

    // Empty filters of several sub-filters (everything deleted) export and import by geometry.
    let empty = RedisCuckooFilter::builder()
        .capacity(8)
        .bucket_size(2)
        .expansion(2)
        .build()
        .unwrap();
    let items: Vec<String> = (0..60).map(|i| format!("e{i}")).collect();
    for item in &items {
        empty.insert(item).unwrap();
    }
    for item in &items {
        assert!(empty.remove(item));
    }
    assert!(empty.scandump().is_empty());
    for (key, mode) in [("empty-r", RESTORE), ("empty-l", ExportMode::LoadChunk)] {
        let sent = empty.export_to(&mut conn, key, mode).unwrap();
        assert_eq!(
            server_info(&mut conn, key),
            info_fields(empty.info()),
            "{key}"
        );
        let back = RedisCuckooFilter::import_from(&mut conn, key).unwrap();
        assert_eq!(info_fields(back.info()), info_fields(empty.info()), "{key}");
        println!("empty {:?} exported with {mode:?}: {sent:?}", empty.info());
    }
}

/// A single-node Redis Cluster (every slot on one server, `cluster-enabled yes`) reached
/// through the `redis` crate's `ClusterConnection`: both exports and the import work through
/// it (the `LoadChunk` temporary key shares the key's hash slot, and `WATCH` and the `MULTI`
/// pipeline are routed by the key to its node), and a key with a hash tag keeps working.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn exports_and_imports_through_a_cluster_connection() {
    let server = Server::start_with(
        "exports_and_imports_through_a_cluster_connection",
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ],
        true,
    );
    let mut admin = server.conn();
    redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query::<()>(&mut admin)
        .expect("CLUSTER ADDSLOTSRANGE");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut admin).unwrap();
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "cluster not ok: {info}"
        );
        thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut cluster = redis::cluster::ClusterClient::new(vec![server.url()])
        .expect("cluster client")
        .get_connection()
        .expect("cluster connection");

    let mut rng = Rng::new(0xC100_57E4);
    let filter = RedisCuckooFilter::builder()
        .capacity(2_000)
        .bucket_size(2)
        .build()
        .unwrap();
    let items = item_pool(&mut rng, 3_000);
    filter.insert_many(&items).unwrap();
    assert!(filter.info().filters > 1, "several sub-filters");

    filter
        .export_to(
            &mut cluster,
            "{users}:a",
            ExportMode::Restore { replace: false },
        )
        .expect("RESTORE through the cluster connection");
    filter
        .export_to(&mut cluster, "{users}:b", ExportMode::LoadChunk)
        .expect("CF.LOADCHUNK through the cluster connection");
    let probes = item_pool(&mut Rng::new(0xC100_57E5), 2_000);
    let want = local_contains(&filter, &probes);
    for key in ["{users}:a", "{users}:b"] {
        assert_eq!(
            server_scandump(&mut admin, key),
            filter.scandump(),
            "{key}: the server holds the filter's bytes"
        );
        let replica = RedisCuckooFilter::import_from(&mut cluster, key)
            .expect("import through the cluster connection");
        assert_eq!(
            replica.scandump(),
            filter.scandump(),
            "{key}: imported bytes"
        );
        assert_eq!(
            local_contains(&replica, &probes),
            want,
            "{key}: replica answers"
        );
        assert_eq!(
            server_mexists(&mut admin, key, &probes),
            want,
            "{key}: server answers"
        );
    }
    // Keys with a `}` but no hash tag hash whole: the temporary key must be in their slot too.
    for key in ["a}b", "{}x", "x{}y{z}", "}{a}"] {
        filter
            .export_to(&mut cluster, key, ExportMode::LoadChunk)
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert_eq!(server_scandump(&mut admin, key), filter.scandump(), "{key}");
    }
    // The rule the bridge's unit test checks temporary keys against (the redis crate's slot
    // function) is the server's.
    for key in [
        &b"a}b"[..],
        b"{}x",
        b"{a}{b}",
        b"a{b}c",
        b"{",
        b"}{a}",
        b"\xff{\x00}\x80",
    ] {
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut admin)
            .unwrap();
        assert_eq!(
            redis::cluster_routing::Slot::new(slot),
            Some(redis::cluster_routing::Slot::for_key(key)),
            "{key:?}"
        );
    }
    assert_eq!(
        keys_matching(&mut admin, "*").len(),
        6,
        "no temporary key left behind"
    );
}

// ---- failures at every command of an export ------------------------------------------------

const ALL_MODES: [ExportMode; 4] = [
    ExportMode::Restore { replace: false },
    ExportMode::Restore { replace: true },
    ExportMode::LoadChunk,
    ExportMode::LoadChunkReplace,
];

/// A connection through `proxy`, with a short read timeout (a held reply fails it soon).
fn proxied(proxy: &CuttingProxy) -> Connection {
    let conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_connection()
        .unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    conn
}

/// The commands an export sends, in order, each with its occurrence among those of its name
/// (1 = the first): a run through a recording proxy, the target as `prepare` leaves it.
fn export_commands(
    server: &Server,
    admin: &mut Connection,
    filter: &RedisCuckooFilter,
    mode: ExportMode,
    prepare: &dyn Fn(&mut Connection),
) -> Vec<(String, usize)> {
    let () = redis::cmd("FLUSHALL").query(admin).unwrap();
    prepare(admin);
    let proxy = CuttingProxy::start(server.port);
    let mut conn = proxied(&proxy);
    proxy.record();
    let _ = filter.export_to(&mut conn, "target", mode);
    drop(conn);
    wait_until_alone(admin);
    let mut out: Vec<(String, usize)> = Vec::new();
    for name in proxy.names() {
        let nth = out.iter().filter(|(n, _)| *n == name).count() + 1;
        out.push((name, nth));
    }
    out
}

/// A key's type and (for a filter) its chunks, else its value as one chunk.
type KeyState = (String, Vec<(u64, Vec<u8>)>);

/// What `target` holds: `None` if absent, else its type and (for a filter) its chunks.
fn target_state(admin: &mut Connection) -> Option<KeyState> {
    let kind: String = redis::cmd("TYPE").arg("target").query(admin).unwrap();
    match kind.as_str() {
        "none" => None,
        "MBbloomCF" => Some((kind, server_scandump(admin, "target"))),
        _ => {
            let value: Vec<u8> = redis::cmd("GET").arg("target").query(admin).unwrap();
            Some((kind, vec![(0, value)]))
        }
    }
}

/// The export cut (the command forwarded whole, then the connection closed) and stalled (its
/// reply and all after it held until the client's read times out) at every command it sends,
/// in every mode, with the target absent and holding another value: once the server has
/// dropped the client, no key without an expiry is left but the target, which holds either
/// what it held before or the whole filter; an export that fails with anything but
/// `Connection` left it as it was, one that succeeded wrote the filter.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn every_cut_and_stall_of_an_export_leaves_no_key_without_expiry() {
    let server = Server::start("every_cut_and_stall_of_an_export");
    let mut admin = server.conn();
    let filter = RedisCuckooFilter::builder()
        .capacity(2_000)
        .bucket_size(2)
        .build()
        .unwrap();
    let mut rng = Rng::new(0x0C07_0C07);
    filter.insert_many(item_pool(&mut rng, 3_000)).unwrap();
    assert!(filter.info().filters > 1, "several sub-filters");
    let want = filter.scandump();
    let absent: &dyn Fn(&mut Connection) = &|_| {};
    let string: &dyn Fn(&mut Connection) = &|c| {
        let () = redis::cmd("SET").arg("target").arg("old").query(c).unwrap();
    };
    let mut runs = 0;
    for mode in ALL_MODES {
        for (before, prepare) in [("absent", absent), ("a string", string)] {
            let commands = export_commands(&server, &mut admin, &filter, mode, prepare);
            println!("{mode:?}, target {before}: {commands:?}");
            for (name, nth) in &commands {
                for trigger in [Trigger::Cut, Trigger::HoldReplies] {
                    let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
                    prepare(&mut admin);
                    let old = target_state(&mut admin);
                    let proxy = CuttingProxy::start(server.port);
                    let mut conn = proxied(&proxy);
                    proxy.on_command(name, *nth, trigger);
                    let result = filter.export_to(&mut conn, "target", mode);
                    let what = format!("{mode:?}, target {before}, {trigger:?} at {name} #{nth}");
                    assert!(
                        proxy.triggered.load(Ordering::SeqCst),
                        "{what}: not reached"
                    );
                    drop(conn);
                    wait_until_alone(&mut admin);
                    let now = target_state(&mut admin);
                    let written = now.as_ref().is_some_and(|(_, chunks)| *chunks == want);
                    match &result {
                        Ok(_) => assert!(written, "{what}: Ok, but the filter is not there"),
                        Err(BridgeError::Connection(_)) => {
                            assert!(written || now == old, "{what}: target changed: {now:?}")
                        }
                        Err(e) => assert_eq!(now, old, "{what}: {e} changed the target"),
                    }
                    let allowed: &[&str] = if now.is_some() { &["target"] } else { &[] };
                    let left = keys_without_expiry(&mut admin, allowed);
                    assert!(left.is_empty(), "{what}: keys without expiry {left:?}");
                    runs += 1;
                }
            }
        }
    }
    println!("{runs} failed exports checked");
}

// ---- a server without the module, under every client the checks may meet -------------------

/// An ACL user allowed everything but `COMMAND` and `CONFIG` (as managed services set them up).
fn restricted_user(admin: &mut Connection) -> String {
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-command")
        .arg("-config")
        .query(admin)
        .unwrap();
    "app:secret@".to_owned()
}

/// Connections of every kind the module check meets: RESP2 and RESP3, the default user and
/// one that may run neither `COMMAND` nor `CONFIG`.
fn every_client(server: &Server, admin: &mut Connection) -> Vec<(&'static str, Connection)> {
    let user = restricted_user(admin);
    let url = |auth: &str, resp3: bool| {
        format!(
            "redis://{auth}127.0.0.1:{}/{}",
            server.port,
            if resp3 { "?protocol=resp3" } else { "" }
        )
    };
    let open = |url: String| redis::Client::open(url).unwrap().get_connection().unwrap();
    vec![
        ("RESP2", open(url("", false))),
        ("RESP3", open(url("", true))),
        ("RESP2, no COMMAND/CONFIG", open(url(&user, false))),
        ("RESP3, no COMMAND/CONFIG", open(url(&user, true))),
    ]
}

/// Exports of a filter with binary chunks, to binary keys, on a server without the module
/// (and with `COMMAND` renamed away), over RESP2 and RESP3, by the default user and one that
/// may not run `COMMAND` or `CONFIG`: each fails with `ModuleMissing` and the connection
/// still answers. Imports of binary keys too.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_missing_module_is_detected_for_every_client_and_binary_keys() {
    let filter = fifty_thousand_items();
    let keys: [&[u8]; 4] = [b"k", b"\xff\xfe\x80", b"{\xc3}\x00\r\n", b""];
    for extra in [&[][..], &["--rename-command", "COMMAND", ""][..]] {
        let server = Server::start_with("a_missing_module_every_client", extra, false);
        let mut admin = server.conn();
        for (client, mut conn) in every_client(&server, &mut admin) {
            for key in keys {
                for mode in ALL_MODES {
                    let what = format!("{extra:?} {client} {key:?} {mode:?}");
                    let e = filter.export_to(&mut conn, key, mode).unwrap_err();
                    assert!(
                        matches!(e, BridgeError::ModuleMissing { .. }),
                        "{what}: {e:?}"
                    );
                    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
                    assert_eq!(pong, "PONG", "{what}");
                }
                let what = format!("{extra:?} {client} {key:?} import");
                let e = RedisCuckooFilter::import_from(&mut conn, key).unwrap_err();
                assert!(
                    matches!(e, BridgeError::ModuleMissing { .. }),
                    "{what}: {e:?}"
                );
                let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
                assert_eq!(pong, "PONG", "{what}");
            }
        }
        assert!(keys_matching(&mut admin, "*").is_empty(), "{extra:?}");
    }
}

/// The same clients and keys with the module: every export writes the filter's bytes, and it
/// imports back.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn exports_with_the_module_work_for_every_client_and_binary_keys() {
    let server = Server::start("exports_with_the_module_every_client");
    let mut admin = server.conn();
    let filter = fifty_thousand_items();
    let want = filter.scandump();
    let keys: [&[u8]; 4] = [b"k", b"\xff\xfe\x80", b"{\xc3}\x00\r\n", b""];
    for (client, mut conn) in every_client(&server, &mut admin) {
        for key in keys {
            for mode in ALL_MODES {
                let what = format!("{client} {key:?} {mode:?}");
                let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
                filter
                    .export_to(&mut conn, key, mode)
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let back = RedisCuckooFilter::import_from(&mut conn, key)
                    .unwrap_or_else(|e| panic!("{what}: import: {e:?}"));
                assert_eq!(back.scandump(), want, "{what}");
                let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
                assert_eq!(keys, [key.to_vec()], "{what}");
            }
        }
    }
}

// ---- the check after an unknown outcome ----------------------------------------------------

/// A request still on its way when the export gave up (held by a hop, here the proxy, and
/// delivered later, as a proxy or a slow path may): asked at once on a new connection, `EXISTS`
/// says the key was not written, and then the late request writes it. The documented check
/// first kills the old connection by the id `CLIENT ID` gave on it before the export: after
/// that nothing sent on it can run, and the answer stays true.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn the_documented_check_holds_when_a_request_arrives_late() {
    let server = Server::start("the_documented_check_holds_when_a_request_arrives_late");
    let mut admin = server.conn();
    let filter = fifty_thousand_items();
    for (mode, command, nth) in [
        (RESTORE, "RESTORE", 1),
        (ExportMode::LoadChunk, "MULTI", 2),
        (ExportMode::LoadChunkReplace, "MULTI", 2),
    ] {
        for kill_first in [false, true] {
            let what = format!("{mode:?}, {command} #{nth} held, kill first: {kill_first}");
            let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
            let proxy = CuttingProxy::start(server.port);
            let mut conn = proxied(&proxy);
            let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
            proxy.on_command(command, nth, Trigger::HoldRequest);
            let e = filter.export_to(&mut conn, "target", mode).unwrap_err();
            assert!(proxy.triggered.load(Ordering::SeqCst), "{what}");
            assert!(matches!(e, BridgeError::Connection(_)), "{what}: {e:?}");
            drop(conn);
            let mut fresh = server.conn();
            if kill_first {
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("ID")
                    .arg(id)
                    .query(&mut fresh)
                    .unwrap();
                assert_eq!(killed, 1, "{what}");
            }
            let answer: i64 = redis::cmd("EXISTS")
                .arg("target")
                .query(&mut fresh)
                .unwrap();
            drop(fresh);
            proxy.release();
            wait_until_alone(&mut admin);
            let truth: i64 = redis::cmd("EXISTS")
                .arg("target")
                .query(&mut admin)
                .unwrap();
            println!("{what}: EXISTS answered {answer}, the key exists now: {truth}");
            if kill_first {
                assert_eq!(answer, truth, "{what}: the documented check was wrong");
            } else {
                assert_eq!(
                    (answer, truth),
                    (0, 1),
                    "{what}: the late request did not land"
                );
            }
            let allowed: &[&str] = if truth == 1 { &["target"] } else { &[] };
            let left = keys_without_expiry(&mut admin, allowed);
            assert!(left.is_empty(), "{what}: {left:?}");
        }
    }
}

// ---- proto-max-bulk-len at the edges -------------------------------------------------------

fn set_max_bulk(admin: &mut Connection, limit: usize) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg(limit)
        .query(admin)
        .unwrap();
}

/// `RESTORE` at a `proto-max-bulk-len` of exactly the payload's length is sent and takes; one
/// byte less is refused before anything is sent. `LoadChunk` at limits just around 16 MiB
/// (the chunk size: chunks of 16 MiB - 1 leave a 1-byte one), at 1 MiB and 1 MiB + 1 (odd
/// splits) writes the same bytes the filter holds, for a filter of one 16 MiB sub-filter and
/// one of two sub-filters.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn proto_max_bulk_len_limits_around_the_payload_and_the_chunk_size() {
    let server = Server::start("proto_max_bulk_len_limits_around");
    let mut admin = server.conn();
    let big = RedisCuckooFilter::builder()
        .capacity(1 << 24)
        .bucket_size(4)
        .build()
        .unwrap();
    for i in 0..20_000 {
        big.insert(format!("b{i}")).unwrap();
    }
    assert!(big.info().size >= 16 << 20);
    let two = RedisCuckooFilter::builder()
        .capacity(1 << 19)
        .bucket_size(2)
        .expansion(2)
        .build()
        .unwrap();
    let mut n = 0u64;
    while two.info().filters < 2 {
        two.insert(format!("t{n}")).unwrap();
        n += 1;
    }
    for (name, filter) in [("16 MiB", &big), ("two sub-filters", &two)] {
        let want = filter.scandump();
        let len = filter.dump_payload(12).len();
        for (limit, fits) in [(len, true), (len - 1, false)] {
            let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
            set_max_bulk(&mut admin, limit.max(1 << 20));
            let result = filter.export_to(&mut admin, "r", RESTORE);
            let what = format!("{name}: RESTORE of {len} bytes, limit {limit}");
            if fits {
                let sent = result.unwrap_or_else(|e| panic!("{what}: {e:?}"));
                assert_eq!(sent.bytes, len as u64, "{what}");
                assert_eq!(server_scandump(&mut admin, "r"), want, "{what}");
            } else {
                let e = result.unwrap_err();
                assert!(
                    matches!(
                        &e,
                        BridgeError::Refused {
                            command: "RESTORE",
                            ..
                        }
                    ),
                    "{what}: {e:?}"
                );
                assert!(keys_matching(&mut admin, "*").is_empty(), "{what}");
                let pong: String = redis::cmd("PING").query(&mut admin).unwrap();
                assert_eq!(pong, "PONG", "{what}");
            }
            println!("{what}: ok");
        }
        let chunk = 16usize << 20;
        for limit in [1 << 20, (1 << 20) + 1, chunk - 1, chunk, chunk + 1] {
            for mode in [ExportMode::LoadChunk, ExportMode::LoadChunkReplace] {
                let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
                set_max_bulk(&mut admin, limit);
                let what = format!("{name}: {mode:?}, limit {limit}");
                let sent = filter
                    .export_to(&mut admin, "l", mode)
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"));
                assert_eq!(server_scandump(&mut admin, "l"), want, "{what}");
                assert_eq!(keys_matching(&mut admin, "*"), ["l"], "{what}");
                println!("{what}: {sent:?}");
            }
        }
    }
}

// ---- temporary keys of adversarial keys in a cluster ---------------------------------------

/// A one-node cluster serving every slot: multi-key commands and transactions whose keys are in
/// different slots are refused there (`CROSSSLOT`), even on one node.
fn one_node_cluster(test: &str) -> Server {
    let server = Server::start_with(
        test,
        &[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ],
        true,
    );
    let mut admin = server.conn();
    let () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut admin)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut admin).unwrap();
        if info.contains("cluster_state:ok") {
            return server;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn keyslot(conn: &mut Connection, key: &[u8]) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(conn)
        .unwrap()
}

/// Adversarial keys (empty, braces only, `{`, `}}{`, tags at the end, empty tags before real
/// ones, non-UTF-8, 100 kB long): the temporary key a `LoadChunk` export creates (seen while the
/// first data chunk is held) is in the key's slot as the server computes it
/// (`CLUSTER KEYSLOT`), and whole exports, both `LoadChunk` modes, succeed on a cluster node,
/// which refuses `RENAME` across slots.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn temporary_keys_of_adversarial_keys_share_the_slot_on_a_cluster_node() {
    let server = one_node_cluster("temporary_keys_of_adversarial_keys");
    let mut admin = server.conn();
    let filter = RedisCuckooFilter::reserve(1000).unwrap();
    filter.insert("x").unwrap();
    let mut long_tag_at_end = vec![b'k'; 100_000];
    long_tag_at_end.extend_from_slice(b"{tag}");
    let mut long_plain = vec![b'}'; 50_000];
    long_plain.extend(std::iter::repeat_n(b'{', 50_000));
    let keys: Vec<Vec<u8>> = [
        &b""[..],
        b"{",
        b"}",
        b"{}",
        b"}{",
        b"}}{",
        b"{{}}",
        b"{}}",
        b"a{",
        b"a{}",
        b"{}{x}",
        b"abc{xyz}",
        b"abc{xyz",
        b"\xff{\xfe}",
        b"\xff}\xfe{",
        b"{\x00}",
        b"\x00",
    ]
    .iter()
    .map(|k| k.to_vec())
    .chain([long_tag_at_end, long_plain])
    .collect();
    for key in &keys {
        let shown = String::from_utf8_lossy(&key[..key.len().min(40)]).into_owned();
        let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
        let proxy = CuttingProxy::start(server.port);
        let mut conn = proxied(&proxy);
        // The first data chunk held: the transaction that created the temporary key has run.
        proxy.on_command("CF.LOADCHUNK", 2, Trigger::HoldRequest);
        let e = filter
            .export_to(&mut conn, key, ExportMode::LoadChunk)
            .unwrap_err();
        assert!(matches!(e, BridgeError::Connection(_)), "{shown:?}: {e:?}");
        let left: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
        proxy.release();
        drop(conn);
        wait_until_alone(&mut admin);
        assert_eq!(left.len(), 1, "{shown:?}: the temporary key");
        let tmp = &left[0];
        assert_eq!(
            keyslot(&mut admin, tmp),
            keyslot(&mut admin, key),
            "{shown:?} -> {:?}",
            String::from_utf8_lossy(&tmp[..tmp.len().min(80)])
        );
        for mode in [ExportMode::LoadChunk, ExportMode::LoadChunkReplace] {
            let () = redis::cmd("FLUSHALL").query(&mut admin).unwrap();
            filter
                .export_to(&mut admin, key, mode)
                .unwrap_or_else(|e| panic!("{shown:?} {mode:?}: {e:?}"));
            let there: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
            assert_eq!(there, std::slice::from_ref(key), "{shown:?} {mode:?}");
        }
    }
}
