//! Replays the reference vectors recorded from a live Redis 7.0.15 + RedisBloom 2.8.2
//! (`tests/data/redisbloom/` at the repository root, see its README) without a server: every
//! reply, every CF.INFO and every SCANDUMP byte of `RedisCuckooFilter` must equal the server's.
//! They need no server (`cargo test -p redis-tests`); they live here because they read JSON,
//! and this package's JSON parser stays out of the library's build.

use atomic_cuckoo::redisbloom::{RedisCuckooFilter, RedisInfo, RedisInsertError};
use serde_json::{json, Value};

fn load(file: &str) -> Value {
    let path = format!(
        "{}/../tests/data/redisbloom/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn int(n: i64) -> Value {
    json!({ "int": n })
}

fn err(e: RedisInsertError) -> Value {
    json!({ "err": e.to_string() })
}

fn info_json(i: RedisInfo) -> Value {
    json!({
        "Size": i.size, "Number of buckets": i.buckets, "Number of filters": i.filters,
        "Number of items inserted": i.items, "Number of items deleted": i.deletes,
        "Bucket size": i.bucket_size, "Expansion rate": i.expansion,
        "Max iterations": i.max_iterations,
    })
}

/// The full SCANDUMP sequence as recorded: `[iterator, hex]` pairs, then `[0, null]`.
fn scandump_json(f: &RedisCuckooFilter) -> Value {
    let mut out: Vec<Value> = f
        .scandump()
        .into_iter()
        .map(|(it, chunk)| json!([it, hex(&chunk)]))
        .collect();
    out.push(json!([0, null]));
    Value::Array(out)
}

/// A case's filter: reserved, or auto-created by its first CF.ADD / CF.INSERT.
struct Replay {
    filter: Option<RedisCuckooFilter>,
    max_expansions: u64,
}

impl Replay {
    fn create(&mut self, capacity: u64, bucket_size: u64, max_iterations: u64, expansion: u64) {
        self.filter = Some(
            RedisCuckooFilter::builder()
                .capacity(capacity)
                .bucket_size(bucket_size)
                .max_iterations(max_iterations)
                .expansion(expansion)
                .max_expansions(self.max_expansions)
                .build()
                .unwrap(),
        );
    }

    fn filter(&mut self, create_capacity: u64) -> &RedisCuckooFilter {
        if self.filter.is_none() {
            self.create(create_capacity, 2, 20, 1);
        }
        self.filter.as_ref().unwrap()
    }

    /// Applies one recorded op and returns our reply, or `None` for an op this replay does
    /// not model (it must then leave the filter unchanged).
    fn apply(&mut self, case: &Value, op: &Value) -> Option<Value> {
        let items: Vec<Vec<u8>> = op["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| unhex(i.as_str().unwrap()))
            .collect();
        let args: Vec<String> = op["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| String::from_utf8_lossy(&unhex(a.as_str().unwrap())).to_lowercase())
            .collect();
        let reply = match op["cmd"].as_str().unwrap() {
            "CF.RESERVE" => {
                let r = &case["reserve"];
                let n = |k: &str| r[k].as_u64().unwrap();
                self.create(
                    n("capacity"),
                    n("bucket_size"),
                    n("max_iterations"),
                    n("expansion"),
                );
                json!({ "simple": "OK" })
            }
            "CF.ADD" => match self.filter(1024).insert(&items[0]) {
                Ok(()) => int(1),
                Err(e) => err(e),
            },
            "CF.ADDNX" => match self.filter(1024).insert_unique(&items[0]) {
                Ok(added) => int(added as i64),
                Err(e) => err(e),
            },
            cmd @ ("CF.INSERT" | "CF.INSERTNX") => {
                if args.iter().any(|a| a == "nocreate") && self.filter.is_none() {
                    return Some(json!({ "err": "ERR not found" }));
                }
                let capacity = args
                    .iter()
                    .position(|a| a == "capacity")
                    .map_or(1024, |i| args[i + 1].parse().unwrap());
                let f = self.filter(capacity);
                let replies: Result<Vec<Value>, _> = if cmd == "CF.INSERT" {
                    f.insert_many(&items).map(|r| {
                        r.into_iter()
                            .map(|ok| int(if ok { 1 } else { -1 }))
                            .collect()
                    })
                } else {
                    f.insert_many_unique(&items).map(|r| {
                        r.into_iter()
                            .map(|a| int(a.map_or(-1, |added| added as i64)))
                            .collect()
                    })
                };
                match replies {
                    Ok(r) => json!({ "array": r }),
                    Err(e) => err(e),
                }
            }
            "CF.EXISTS" => int(self.filter.as_ref().is_some_and(|f| f.contains(&items[0])) as i64),
            "CF.MEXISTS" => {
                let f = self.filter.as_ref()?;
                let mut found = Vec::new();
                f.contains_many(&items, &mut found);
                json!({ "array": found.into_iter().map(|b| int(b as i64)).collect::<Vec<_>>() })
            }
            "CF.COUNT" => int(self.filter.as_ref().map_or(0, |f| f.count(&items[0])) as i64),
            "CF.DEL" => match &self.filter {
                Some(f) => int(f.remove(&items[0]) as i64),
                None => json!({ "err": "Not found" }),
            },
            "CF.COMPACT" => {
                self.filter.as_ref()?.compact();
                json!({ "simple": "OK" })
            }
            _ => return None, // CF.INFO / CF.DEBUG / a mid-filter CF.SCANDUMP: read-only
        };
        Some(reply)
    }
}

#[test]
fn every_recorded_sequence_replays_byte_for_byte() {
    let file = load("sequences.json");
    let mut compared = (0, 0, 0); // replies, checkpoints, dumps
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let max_expansions = match case["server"].as_str().unwrap() {
            "default" => 32,
            "max_expansions_4" => 4,
            other => panic!("{name}: unknown server {other}"),
        };
        let mut replay = Replay {
            filter: None,
            max_expansions,
        };
        let checkpoints = case["checkpoints"].as_array().unwrap();
        let check = |replay: &Replay, done: usize, compared: &mut (usize, usize, usize)| {
            for cp in checkpoints.iter().filter(|c| c["after_op"] == done) {
                let f = replay.filter.as_ref();
                if !cp["info"].is_null() {
                    let f = f.unwrap_or_else(|| panic!("{name}: no filter at op {done}"));
                    assert_eq!(
                        info_json(f.info()),
                        cp["info"],
                        "{name}: CF.INFO after {done}"
                    );
                }
                if !cp["scandump"].is_null() {
                    let f = f.unwrap();
                    assert_eq!(
                        scandump_json(f),
                        cp["scandump"],
                        "{name}: SCANDUMP after {done}"
                    );
                }
                compared.1 += 1;
            }
        };
        check(&replay, 0, &mut compared);
        for (n, op) in case["ops"].as_array().unwrap().iter().enumerate() {
            if let Some(reply) = replay.apply(case, op) {
                assert_eq!(reply, op["reply"], "{name}: op {n} {}", op["cmd"]);
                compared.0 += 1;
            }
            check(&replay, n + 1, &mut compared);
        }
        if let (Some(f), Some(dump)) = (&replay.filter, case["dump"].as_str()) {
            // Redis's own DUMP (LZF and integer-encoded strings) loads to the same filter.
            let g = RedisCuckooFilter::from_dump_payload(&unhex(dump))
                .unwrap_or_else(|e| panic!("{name}: Redis's DUMP refused: {e}"));
            assert_eq!(g.scandump(), f.scandump(), "{name}: DUMP contents");
            if let Some(raw) = case["dump_uncompressed"].as_str() {
                assert_eq!(hex(&f.dump_payload(10)), raw, "{name}: generated payload");
            }
            compared.2 += 1;
        }
    }
    println!(
        "compared {} replies, {} checkpoints, {} dumps",
        compared.0, compared.1, compared.2
    );
    assert!(
        compared.0 > 9_000 && compared.1 > 40 && compared.2 > 40,
        "{compared:?}"
    );
}

#[test]
fn from_chunks_refuses_every_chunk_list_redis_refused_and_loads_its_round_trips() {
    let file = load("loadchunk.json");
    let (mut refused, mut loaded) = (0, 0);
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let loads: Vec<(&Value, (i64, Vec<u8>))> = case["ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|op| op["cmd"] == "CF.LOADCHUNK")
            .filter_map(|op| {
                let args = op["args"].as_array().unwrap();
                let it = String::from_utf8(unhex(args[1].as_str().unwrap())).ok()?;
                Some((
                    &op["reply"],
                    (it.parse().ok()?, unhex(args[2].as_str().unwrap())),
                ))
            })
            .collect();
        if loads.is_empty() {
            continue;
        }
        // Negative iterators cannot be expressed as u64: Redis refuses them too.
        let chunks: Vec<(u64, &[u8])> = loads
            .iter()
            .filter(|(_, (it, _))| *it >= 0)
            .map(|(_, (it, data))| (*it as u64, &data[..]))
            .collect();
        let ours = RedisCuckooFilter::from_chunks(chunks.iter().copied());
        if loads.iter().any(|(reply, _)| reply.get("err").is_some()) {
            assert!(ours.is_err(), "{name}: Redis refused a chunk, we loaded it");
            refused += 1;
        } else if let Ok(f) = ours {
            // What we accept behaves as Redis did after the same chunks: the commands that
            // followed get the same replies and leave the same bytes.
            let mut replay = Replay {
                filter: Some(f),
                max_expansions: 32,
            };
            let ops = case["ops"].as_array().unwrap();
            let after = ops
                .iter()
                .rposition(|op| op["cmd"] == "CF.LOADCHUNK")
                .unwrap();
            for op in &ops[after + 1..] {
                if let Some(reply) = replay.apply(case, op) {
                    assert_eq!(reply, op["reply"], "{name}: {}", op["cmd"]);
                }
            }
            let last = case["checkpoints"].as_array().unwrap().last().unwrap();
            let f = replay.filter.as_ref().unwrap();
            assert_eq!(scandump_json(f), last["scandump"], "{name}");
            loaded += 1;
        }
    }
    println!("refused {refused} chunk lists as Redis did, loaded {loaded} identically");
    assert!(refused >= 15 && loaded >= 2, "{refused} {loaded}");
}
