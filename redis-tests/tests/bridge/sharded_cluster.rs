//! `ShardedFilter::export_to` / `import_from` and `ClusterFilter` against real Redis Clusters
//! of three masters (one per test, `redis_tests::Cluster`): shards byte for byte on the nodes
//! their slots name, queries through the cluster, a client in another language that follows
//! `docs/SHARDED.md`, and failures (a node without the module, a node down, a refused shard, a
//! refused manifest, a name holding something else, a manifest naming a missing shard) that
//! leave the previous generation visible and no key without an expiry.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use atomic_cuckoo::redisbloom::{
    BridgeError, ClusterError, ClusterExport, ClusterFilter, ShardedFilter,
};
use redis::{Connection, ConnectionLike};
use redis_tests::{server_scandump, Cluster, Server};

fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// Every key of every running node, with its time to live (`-1`: none).
fn keys_and_ttls(cluster: &Cluster) -> Vec<(String, i64)> {
    let mut all = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        if node.is_none() {
            continue;
        }
        let mut conn = cluster.node_conn(i);
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        for key in keys {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
            all.push((key, ttl));
        }
    }
    all.sort();
    all
}

/// Every key without an expiry is the manifest `name`, its ledger, or a shard key the manifest
/// names, and the ledger owes nothing (as after an export that did not fail); returns the keys
/// with an expiry.
fn only_published_keys_are_permanent(
    cluster: &Cluster,
    conn: &mut dyn ConnectionLike,
    name: &str,
) -> Vec<String> {
    let named: Vec<String> = match ClusterFilter::open(conn, name) {
        Ok(filter) => filter.keys().to_vec(),
        Err(ClusterError::NoFilter { .. }) => Vec::new(),
        Err(e) => panic!("{e}"),
    };
    let ledger = format!("{{{name}}}:ledger");
    let owed: Vec<String> = redis::cmd("GET")
        .arg(&ledger)
        .query::<Option<String>>(conn)
        .unwrap()
        .map_or_else(Vec::new, |text| {
            text.lines().skip(2).map(str::to_owned).collect()
        });
    assert!(
        owed.is_empty(),
        "after a settled export the ledger owes {owed:?}"
    );
    let mut expiring = Vec::new();
    for (key, ttl) in keys_and_ttls(cluster) {
        if ttl == -1 {
            assert!(
                key == name || key == ledger || named.contains(&key),
                "{key} has no expiry and no manifest names it"
            );
        } else {
            assert!(ttl > 0, "{key}: ttl {ttl}");
            expiring.push(key);
        }
    }
    for key in &named {
        let ttl: i64 = redis::cmd("PTTL").arg(key).query(conn).unwrap();
        assert_eq!(ttl, -1, "the published shard {key} must be permanent");
    }
    expiring
}

/// The first of `prefix0`, `prefix1`, ... whose hash slot is in `slots` (the server says).
fn name_in_slots(cluster: &Cluster, prefix: &str, slots: std::ops::Range<i64>) -> String {
    let mut conn = cluster.node_conn(0);
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .find(|name| {
            let slot: i64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(name)
                .query(&mut conn)
                .unwrap();
            slots.contains(&slot)
        })
        .expect("a name in those slots")
}

/// The node (index into `cluster.nodes`) that holds `key` (its own keys, `KEYS *`, list it).
fn node_holding(cluster: &Cluster, key: &str) -> Option<usize> {
    (0..cluster.nodes.len()).find(|&i| {
        cluster.nodes[i].is_some() && {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query(&mut cluster.node_conn(i))
                .unwrap();
            keys.iter().any(|k| k == key)
        }
    })
}

/// Three shards on three masters: each shard key on its own master, each holding its shard's
/// bytes; the filter read back through the cluster equals the original byte for byte; every
/// item is found through `ClusterFilter`, and items inserted there are found by an import.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn shards_travel_byte_for_byte_to_their_own_masters() {
    let cluster = Cluster::start("shards_travel_byte_for_byte_to_their_own_masters", 3);
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(60_000, 3).unwrap();
    let inserted = items("id-", 40_000);
    filter.insert_many(&inserted).unwrap();

    let summary = filter
        .export_to(&mut conn, "ids", &ClusterExport::default())
        .unwrap();
    println!("{summary:?}");
    assert_eq!(summary.generation, 1);
    assert!(summary.unretired.is_empty());
    let mut homes = Vec::new();
    for (shard, key) in summary.keys.iter().enumerate() {
        let home = node_holding(&cluster, key).expect("the shard key exists");
        homes.push(home);
        assert_eq!(
            server_scandump(&mut cluster.node_conn(home), key),
            filter.shards()[shard].scandump(),
            "{key}"
        );
    }
    homes.sort();
    assert_eq!(homes, [0, 1, 2], "one shard per master");
    assert!(only_published_keys_are_permanent(&cluster, &mut conn, "ids").is_empty());

    let back = ShardedFilter::import_from(&mut conn, "ids").unwrap();
    for (a, b) in back.shards().iter().zip(filter.shards()) {
        assert_eq!(a.scandump(), b.scandump());
    }
    let remote = ClusterFilter::open(&mut conn, "ids").unwrap();
    assert_eq!(remote.keys(), summary.keys.as_slice());
    let mut found = Vec::new();
    remote
        .contains_many(&mut conn, &inserted, &mut found)
        .unwrap();
    assert!(
        found.iter().all(|&f| f),
        "every item found through the cluster"
    );
    let absent = items("absent-", 20_000);
    remote
        .contains_many(&mut conn, &absent, &mut found)
        .unwrap();
    let mut local = Vec::new();
    filter.contains_many(&absent, &mut local);
    assert_eq!(found, local, "the cluster answers as the local filter does");

    let more = items("more-", 3_000);
    assert!(remote
        .insert_many(&mut conn, &more)
        .unwrap()
        .iter()
        .all(|&s| s));
    filter.insert_many(&more).unwrap();
    let again = ShardedFilter::import_from(&mut conn, "ids").unwrap();
    for (a, b) in again.shards().iter().zip(filter.shards()) {
        assert_eq!(
            a.scandump(),
            b.scandump(),
            "the same inserts, the same bytes"
        );
    }
    assert!(remote.contains(&mut conn, "more-7").unwrap());
}

/// A second export publishes generation 2 and gives generation 1's keys their grace expiry; a
/// handle still on generation 1 then fails with the missing key, and opening again works.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_new_generation_retires_the_old_one() {
    let cluster = Cluster::start("a_new_generation_retires_the_old_one", 3);
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(10_000, 4).unwrap();
    filter.insert_many(items("a-", 5_000)).unwrap();
    let first = filter
        .export_to(&mut conn, "gen", &ClusterExport::default())
        .unwrap();
    let old = ClusterFilter::open(&mut conn, "gen").unwrap();
    filter.insert_many(items("b-", 1_000)).unwrap();
    let options = ClusterExport::default().grace(Duration::from_millis(300));
    let second = filter.export_to(&mut conn, "gen", &options).unwrap();
    assert_eq!(second.generation, first.generation + 1);
    let expiring = only_published_keys_are_permanent(&cluster, &mut conn, "gen");
    let mut retired = first.keys.clone();
    retired.sort();
    assert_eq!(expiring, retired, "exactly generation 1 expires");
    assert!(old.contains(&mut conn, "a-1").unwrap(), "within the grace");
    std::thread::sleep(Duration::from_millis(600));
    match old.contains(&mut conn, "a-1") {
        Err(ClusterError::Shard {
            error: BridgeError::MissingKey { .. },
            key,
            ..
        }) => assert!(first.keys.contains(&key)),
        other => panic!("a retired generation: {other:?}"),
    }
    let new = ClusterFilter::open(&mut conn, "gen").unwrap();
    assert_eq!(new.generation(), 2);
    assert!(new.contains(&mut conn, "b-1").unwrap());
}

/// A shard refused mid-export (its node's `proto-max-bulk-len` is too small for it, so the node
/// answers with an error or drops the connection): the error names the shard, key, slot and
/// node; the manifest still names generation 1, whose shards are whole; what the failed export
/// wrote is deleted.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_refused_shard_leaves_the_previous_generation() {
    let cluster = Cluster::start("a_refused_shard_leaves_the_previous_generation", 3);
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(3_000_000, 3).unwrap();
    filter.insert_many(items("x-", 10_000)).unwrap();
    filter
        .export_to(&mut conn, "refused", &ClusterExport::default())
        .unwrap();
    let before = ShardedFilter::import_from(&mut conn, "refused").unwrap();
    // The last shard's master takes no bulk string of a shard's size.
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1mb")
        .query::<()>(&mut cluster.node_conn(2))
        .unwrap();
    filter.insert_many(items("y-", 1_000)).unwrap();
    let error = filter
        .export_to(&mut conn, "refused", &ClusterExport::default())
        .unwrap_err();
    println!("{error}");
    match &error {
        ClusterError::Shard {
            shard: 2,
            key,
            slot,
            node: Some(node),
            error,
        } => {
            // The node answers a bulk string over its limit with a protocol error and closes
            // the connection while the client may still be sending: the client reads either
            // that error or the reset first.
            assert!(
                matches!(
                    error,
                    BridgeError::Refused {
                        command: "RESTORE",
                        ..
                    } | BridgeError::Connection(_)
                ),
                "{error:?}"
            );
            assert!(key.starts_with("refused:2:2:{"), "{key}");
            assert!(*slot > 10_922, "{slot}");
            let port = cluster.nodes[2].as_ref().unwrap().port;
            assert_eq!(&**node, format!("127.0.0.1:{port}"));
        }
        other => panic!("{other:?}"),
    }
    let now = ClusterFilter::open(&mut conn, "refused").unwrap();
    assert_eq!(now.generation(), 1);
    let after = ShardedFilter::import_from(&mut conn, "refused").unwrap();
    for (a, b) in after.shards().iter().zip(before.shards()) {
        assert_eq!(a.scandump(), b.scandump(), "generation 1 untouched");
    }
    assert!(
        only_published_keys_are_permanent(&cluster, &mut conn, "refused").is_empty(),
        "the written shards of generation 2 are deleted"
    );
}

/// The manifest's node refuses the write (`maxmemory` reached): nothing is published and the
/// new shards are deleted. The manifest key's slot is on the middle master, which holds no
/// shard of a two-shard filter.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_refused_manifest_publishes_nothing() {
    let cluster = Cluster::start("a_refused_manifest_publishes_nothing", 3);
    let mut conn = cluster.conn();
    // A name whose slot is in the middle master's range.
    let name = name_in_slots(&cluster, "m", 5_500..10_900);
    let mut middle = cluster.node_conn(1);
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1")
        .query::<()>(&mut middle)
        .unwrap();
    let filter = ShardedFilter::reserve(10_000, 2).unwrap();
    filter.insert_many(items("z-", 2_000)).unwrap();
    let error = filter
        .export_to(&mut conn, &name, &ClusterExport::default())
        .unwrap_err();
    println!("{error}");
    match &error {
        ClusterError::Manifest {
            key,
            error: BridgeError::Refused { message, .. },
        } => {
            assert_eq!(key, &name);
            assert!(message.starts_with("OOM"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ClusterFilter::open(&mut conn, &name),
        Err(ClusterError::NoFilter { .. })
    ));
    assert!(
        keys_and_ttls(&cluster).is_empty(),
        "the new shards are deleted"
    );
}

/// A master without the RedisBloom module: the export fails before it writes anything, and
/// the error names that master's shard, key and node.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_master_without_the_module_is_named_before_anything_is_written() {
    let cluster = Cluster::start_with_modules(
        "a_master_without_the_module_is_named_before_anything_is_written",
        &[true, false, true],
    );
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(10_000, 3).unwrap();
    filter.insert("a").unwrap();
    let error = filter
        .export_to(&mut conn, "nomodule", &ClusterExport::default())
        .unwrap_err();
    println!("{error}");
    let port = cluster.nodes[1].as_ref().unwrap().port;
    match &error {
        ClusterError::Shard {
            shard: 1,
            node: Some(node),
            error: BridgeError::ModuleMissing { .. },
            ..
        } => assert_eq!(&**node, format!("127.0.0.1:{port}")),
        other => panic!("{other:?}"),
    }
    assert!(keys_and_ttls(&cluster).is_empty());
}

/// A master down: the export fails before it writes anything (and the connection is used
/// again afterwards); queries of the shard on it fail naming it; the other shards answer.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_master_down_fails_the_export_before_any_write() {
    let mut cluster = Cluster::start("a_master_down_fails_the_export_before_any_write", 3);
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(30_000, 3).unwrap();
    filter.insert_many(items("d-", 9_000)).unwrap();
    filter
        .export_to(&mut conn, "down", &ClusterExport::default())
        .unwrap();
    let remote = ClusterFilter::open(&mut conn, "down").unwrap();
    cluster.kill(1);
    let error = filter
        .export_to(&mut conn, "down", &ClusterExport::default())
        .unwrap_err();
    println!("{error}");
    assert!(
        matches!(error, ClusterError::Shard { shard: 1, .. }),
        "{error:?}"
    );
    let mut found = Vec::new();
    let query = remote.contains_many(&mut conn, items("d-", 100), &mut found);
    assert!(
        matches!(query, Err(ClusterError::Shard { shard: 1, .. })),
        "{query:?}"
    );
    let on_0 = (0..)
        .map(|i| format!("d-{i}"))
        .find(|x| remote.shard_of(x) == 0)
        .unwrap();
    assert!(remote.contains(&mut conn, &on_0).unwrap());
    // Nothing of generation 2 was written on the masters still up.
    for (key, _) in keys_and_ttls(&cluster) {
        assert!(!key.starts_with("down:2:"), "{key}");
    }
}

/// Bad input: a bad name, a name holding a list (left alone), a manifest naming a shard that
/// is missing (import and queries name it).
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn bad_names_foreign_keys_and_missing_shards_are_typed_errors() {
    let cluster = Cluster::start(
        "bad_names_foreign_keys_and_missing_shards_are_typed_errors",
        3,
    );
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(10_000, 3).unwrap();
    filter.insert("q").unwrap();
    for name in ["", "a b", "{ids}", "é"] {
        assert!(
            matches!(
                filter.export_to(&mut conn, name, &ClusterExport::default()),
                Err(ClusterError::BadName { .. })
            ),
            "{name:?}"
        );
    }
    let _: () = redis::cmd("RPUSH")
        .arg("taken")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let error = filter
        .export_to(&mut conn, "taken", &ClusterExport::default())
        .unwrap_err();
    assert!(
        matches!(error, ClusterError::NotAManifest { .. }),
        "{error:?}"
    );
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("hello")
        .query(&mut conn)
        .unwrap();
    assert!(matches!(
        ShardedFilter::import_from(&mut conn, "text"),
        Err(ClusterError::NotAManifest { .. })
    ));
    let len: i64 = redis::cmd("LLEN").arg("taken").query(&mut conn).unwrap();
    assert_eq!(len, 1, "left alone");
    assert!(matches!(
        ShardedFilter::import_from(&mut conn, "nothing"),
        Err(ClusterError::NoFilter { .. })
    ));

    let summary = filter
        .export_to(&mut conn, "holes", &ClusterExport::default())
        .unwrap();
    let _: () = redis::cmd("DEL")
        .arg(&summary.keys[1])
        .query(&mut conn)
        .unwrap();
    match ShardedFilter::import_from(&mut conn, "holes") {
        Err(ClusterError::Shard {
            shard: 1,
            key,
            error: BridgeError::MissingKey { .. },
            ..
        }) => assert_eq!(key, summary.keys[1]),
        other => panic!("{other:?}"),
    }
    let remote = ClusterFilter::open(&mut conn, "holes").unwrap();
    let on_1 = (0..)
        .map(|i| format!("h{i}"))
        .find(|x| remote.shard_of(x) == 1)
        .unwrap();
    assert!(matches!(
        remote.contains(&mut conn, &on_1),
        Err(ClusterError::Shard { shard: 1, .. })
    ));
    assert!(matches!(
        remote.insert_many(&mut conn, [&on_1]),
        Err(ClusterError::Shard {
            shard: 1,
            error: BridgeError::MissingKey { .. },
            ..
        })
    ));
    // The connection still works.
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
}

/// One server without cluster mode: every shard on it, through a plain connection.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_single_server_holds_every_shard() {
    let server = Server::start("a_single_server_holds_every_shard");
    let mut conn = server.conn();
    let filter = ShardedFilter::reserve(20_000, 5).unwrap();
    let inserted = items("s-", 8_000);
    filter.insert_many(&inserted).unwrap();
    filter
        .export_to(&mut conn, "single", &ClusterExport::default())
        .unwrap();
    let back = ShardedFilter::import_from(&mut conn, "single").unwrap();
    for (a, b) in back.shards().iter().zip(filter.shards()) {
        assert_eq!(a.scandump(), b.scandump());
    }
    let remote = ClusterFilter::open(&mut conn, "single").unwrap();
    let mut found = Vec::new();
    remote
        .contains_many(&mut conn, &inserted, &mut found)
        .unwrap();
    assert!(found.iter().all(|&f| f));

    // A shard longer than the server's proto-max-bulk-len is refused before it is sent (the
    // server would close the connection), and nothing is published.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1mb")
        .query(&mut conn)
        .unwrap();
    let large = ShardedFilter::reserve(3_000_000, 2).unwrap();
    match large.export_to(&mut conn, "single", &ClusterExport::default()) {
        Err(ClusterError::Shard {
            shard: 0,
            error: BridgeError::Refused { message, .. },
            ..
        }) => assert!(message.contains("proto-max-bulk-len"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(ClusterFilter::open(&mut conn, "single").unwrap(), remote);
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
}

/// A client in another language, written from `docs/SHARDED.md` alone
/// (`scripts/sharded_client.py`, with redis-py's cluster client), finds every inserted item
/// and answers every probe as this crate does.
#[test]
#[ignore = "needs a Redis server with RedisBloom and redis-py: scripts/install-redis.sh"]
fn a_python_client_following_the_docs_finds_every_item() {
    let cluster = Cluster::start("a_python_client_following_the_docs_finds_every_item", 3);
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(40_000, 3).unwrap();
    let inserted = items("py-", 20_000);
    filter.insert_many(&inserted).unwrap();
    filter
        .export_to(&mut conn, "pyids", &ClusterExport::default())
        .unwrap();
    let probes: Vec<Vec<u8>> = inserted
        .iter()
        .cloned()
        .chain(items("never-", 20_000))
        .collect();
    let mut want = Vec::new();
    filter.contains_many(&probes, &mut want);

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("sharded-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("probes.txt");
    let text: Vec<String> = probes
        .iter()
        .map(|p| String::from_utf8(p.clone()).unwrap())
        .collect();
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let port = cluster.nodes[0].as_ref().unwrap().port;
    let output = Command::new("python3")
        .arg(root.join("scripts/sharded_client.py"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--name", "pyids"])
        .arg("--items")
        .arg(&input)
        .env("PYTHONPATH", root.join(".redis-stack/python"))
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client failed:\n{stderr}"
    );
    let answers: Vec<bool> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| match line {
            "1" => true,
            "0" => false,
            other => panic!("the Python client printed {other:?}"),
        })
        .collect();
    assert_eq!(answers.len(), probes.len());
    assert!(
        answers[..inserted.len()].iter().all(|&a| a),
        "every inserted item"
    );
    assert_eq!(answers, want, "the same answers as this crate");
}

fn node_id(conn: &mut Connection) -> String {
    redis::cmd("CLUSTER").arg("MYID").query(conn).unwrap()
}

/// What `ClusterFilter` and `import_from` do while a shard key's slot moves between masters:
/// before the key moves, after it moved but before the slot did (the old master answers
/// `ASK`), and after the slot moved (`MOVED`).
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn queries_follow_a_shard_key_migrating_between_masters() {
    let cluster = Cluster::start("queries_follow_a_shard_key_migrating_between_masters", 3);
    let mut conn = cluster.conn();
    let filter = ShardedFilter::reserve(30_000, 3).unwrap();
    let inserted = items("m-", 9_000);
    filter.insert_many(&inserted).unwrap();
    filter
        .export_to(&mut conn, "mig", &ClusterExport::default())
        .unwrap();
    let remote = ClusterFilter::open(&mut conn, "mig").unwrap();
    let key = remote.keys()[0].clone();
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(&key)
        .query(&mut cluster.node_conn(0))
        .unwrap();
    let (mut from, mut to) = (cluster.node_conn(0), cluster.node_conn(1));
    let (from_id, to_id) = (node_id(&mut from), node_id(&mut to));
    let to_port = cluster.nodes[1].as_ref().unwrap().port;
    let check = |conn: &mut redis::cluster::ClusterConnection, phase: &str| {
        let mut found = Vec::new();
        let looked = remote.contains_many(conn, &inserted, &mut found);
        println!(
            "{phase}: contains_many {:?}",
            looked
                .as_ref()
                .map(|_| found.iter().filter(|&&f| f).count())
        );
        let more = remote.insert_many(conn, [format!("{phase}-new")]);
        println!("{phase}: insert_many {more:?}");
        let back = ShardedFilter::import_from(conn, "mig");
        println!("{phase}: import_from {:?}", back.as_ref().map(|f| f.len()));
        (
            looked.is_ok() && found.iter().all(|&f| f),
            more.is_ok(),
            back.is_ok(),
        )
    };
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("IMPORTING")
        .arg(&from_id)
        .query(&mut to)
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("MIGRATING")
        .arg(&to_id)
        .query(&mut from)
        .unwrap();
    let before = check(&mut conn, "migrating");
    let _: () = redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(to_port)
        .arg(&key)
        .arg(0)
        .arg(5000)
        .query(&mut from)
        .unwrap();
    let asking = check(&mut conn, "ask");
    for node in 0..3 {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(&to_id)
            .query(&mut cluster.node_conn(node))
            .unwrap();
    }
    let moved = check(&mut conn, "moved");
    println!("{before:?} {asking:?} {moved:?}");
    assert_eq!(before, (true, true, true));
    assert_eq!(moved, (true, true, true));
    assert_eq!(asking, (true, true, true));
}

/// A master killed in the middle of an export, after the shard on another master was written
/// and before its own: the export fails naming that master's shard; the manifest still names
/// generation 1; of generation 2, nothing without an expiry is left on the masters still up.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_master_killed_during_an_export_leaves_the_previous_generation() {
    let mut cluster = Cluster::start(
        "a_master_killed_during_an_export_leaves_the_previous_generation",
        3,
    );
    let mut conn = cluster.conn();
    // A name whose manifest lives on the first master.
    let name = name_in_slots(&cluster, "k", 0..5_000);
    // Shards of a few MB each, so that writing one takes a while.
    let filter = ShardedFilter::reserve(12_000_000, 3).unwrap();
    filter.insert_many(items("k-", 100_000)).unwrap();
    filter
        .export_to(&mut conn, &name, &ClusterExport::default())
        .unwrap();
    let victim = cluster.nodes[2].take().expect("running");
    let mut watch = cluster.node_conn(1);
    let prefix = format!("{name}:2:1:");
    let killer = std::thread::spawn(move || {
        // Once generation 2's shard 1 is on the middle master, kill the last one (which holds
        // shard 2, written after it).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut watch).unwrap();
            if keys.iter().any(|k| k.starts_with(&prefix)) {
                drop(victim);
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        false
    });
    filter.insert_many(items("l-", 1_000)).unwrap();
    let result = filter.export_to(&mut conn, &name, &ClusterExport::default());
    assert!(killer.join().unwrap(), "the shard 1 key never appeared");
    let error = result.expect_err("the export must fail");
    println!("{error}");
    assert!(
        matches!(error, ClusterError::Shard { shard: 2, .. }),
        "{error:?}"
    );
    let manifest: String = redis::cmd("GET")
        .arg(&name)
        .query(&mut cluster.node_conn(0))
        .unwrap();
    assert!(manifest.contains("generation 1\n"), "{manifest}");
    for (key, ttl) in keys_and_ttls(&cluster) {
        assert!(
            !key.starts_with(&format!("{name}:2:")) || ttl > 0,
            "{key} of the failed generation has no expiry"
        );
    }
}
