//! The cache-penetration guard of `examples/penetration_guard.rs`, run short against a real
//! Redis (started here on a free port; see `redis-tests/src/lib.rs`): missing keys stop at the filter, no
//! existing key is refused, a deleted key is refused after its delete, and without the filter
//! every missing key reaches the store. Also: the filter's snapshot is restored only while the
//! store is unchanged.
//!
//! Each test is ignored unless asked for (it needs a server): see `redis-tests/src/lib.rs`.

// The example's `main` and argument parsing are not used here.
#[allow(dead_code)]
#[path = "../../../examples/penetration_guard.rs"]
mod guard;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use atomic_cuckoo::CuckooFilter;
use guard::{Answer, Handler, Load, Origin, Population, Setup, Store};
use redis_tests::Server;

use crate::common;

/// Users in the store at the start.
const USERS: u64 = 20_000;
/// The store's database; the cache is the URL's, 0.
const STORE_DB: i64 = 1;

/// A store of [`USERS`] users on `server`, and a filter built from it (12-bit fingerprints).
fn filled_store(server: &Server) -> (Setup, Store, Arc<CuckooFilter>, Population) {
    let setup = Setup::new(&server.url(), STORE_DB, 60).expect("setup");
    let mut store = Store::connect(&setup, Arc::new(AtomicU64::new(0))).expect("store");
    store.fill(USERS).expect("fill the store");
    let (keys, _) = store.keys().expect("scan the store");
    assert_eq!(keys.len() as u64, USERS);
    let (filter, origin) = guard::open_filter(&mut store, &keys, None, 12).expect("filter");
    assert!(matches!(origin, Origin::Built(_)), "{origin:?}");
    assert_eq!(filter.fingerprint_bits(), 12);
    (setup, store, Arc::new(filter), Population::from_keys(&keys))
}

/// An upper bound for the requests among `requests` for distinct absent keys that pass a filter
/// whose predicted false-positive rate is `rate`: twice the expected count.
///
/// Each random missing key is new (ids drawn from 2^63), so the count is binomial with mean
/// `mu = rate * requests`, and by the Chernoff bound `P(X >= (1 + d) mu) <= (e^d / (1 +
/// d)^(1 + d))^mu`. At `2 mu` (d = 1) that is `(e / 4)^mu = e^(-0.386 mu)`: below 1e-30 for
/// the missing keys here (about 119,000 requests at about 0.17 %, mu about 200), and below
/// 1e-8 even if the true rate were 20 % above the prediction (d = 0.67, mu about 240).
fn pass_bound(rate: f64, requests: u64) -> f64 {
    2.0 * rate * requests as f64
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn missing_keys_stop_at_the_filter_and_existing_keys_pass() {
    let server = Server::start("missing_keys_stop_at_the_filter_and_existing_keys_pass");
    let (setup, mut store, filter, mut population) = filled_store(&server);
    let seed = common::seed("missing_keys_stop_at_the_filter_and_existing_keys_pass");
    // Mostly the attack: missing keys cost no round trip with the filter, so 150,000 requests
    // (about 119,000 for missing keys) take a second or two; the rest need Redis.
    let load = Load {
        threads: 4,
        requests: 150_000,
        missing: 0.8,
        deleted: 0.1,
        writes: 0.01,
        seed,
    };
    let with = guard::run_load(&setup, &filter, true, &load, &mut population, false)
        .expect("the run with the filter");
    println!("with the filter: {with:#?}");
    let rate = with.predicted_rate;
    assert!(
        (0.0005..0.004).contains(&rate),
        "a 12-bit filter at this load should predict about 0.2 %, not {rate}"
    );

    // Missing keys: at most twice the predicted share reaches the store.
    assert!(with.missing.requests >= 100_000, "{:?}", with.missing);
    let bound = pass_bound(rate, with.missing.requests);
    assert!(
        with.missing.reached_store as f64 <= bound,
        "{} of {} missing-key requests reached the store, more than {bound:.0} (2 x the \
         predicted rate {rate})",
        with.missing.reached_store,
        with.missing.requests
    );
    assert_eq!(with.missing.found, 0, "a missing key was found");

    // Existing keys: never refused, always answered.
    assert!(with.existing.requests > 10_000, "{:?}", with.existing);
    assert_eq!(with.existing.refused, 0, "the filter refused existing keys");
    assert_eq!(with.existing.found, with.existing.requests);
    // ... and every key in the store, created ones included, passes the filter.
    let (keys, _) = store.keys().expect("scan the store");
    let refused: Vec<_> = keys.iter().filter(|k| !filter.contains(*k)).collect();
    assert!(
        refused.is_empty(),
        "stored keys the filter refuses: {refused:?}"
    );
    assert!(with.creates > 500 && with.deletes > 500, "{with:?}");

    // Deleted keys: never answered, and stopped like missing ones.
    assert!(with.deleted.requests > 5_000, "{:?}", with.deleted);
    assert_eq!(with.deleted.found, 0, "a deleted key was answered");
    // Deleted keys repeat (a few hundred keys, read many times each), so their requests pass
    // or not by key: about 0.17 % of the keys, 1 or 2 here, each taking a few percent of the
    // deleted-key reads at most (the first keys a thread deletes are read most). A quarter
    // would take several of the earliest keys to be false positives; without the filter's
    // `remove` it is all of them.
    assert!(
        with.deleted.reached_store * 4 <= with.deleted.requests,
        "{} of {} deleted-key requests reached the store",
        with.deleted.reached_store,
        with.deleted.requests
    );

    // Without the filter, the same mix (shorter: each missing key costs two round trips):
    // every missing or deleted key goes through the cache to the store.
    let short = Load {
        requests: 10_000,
        ..load
    };
    let without = guard::run_load(&setup, &filter, false, &short, &mut population, false)
        .expect("the run without the filter");
    println!("without the filter: {without:#?}");
    assert!(without.missing.requests > 5_000, "{:?}", without.missing);
    assert_eq!(without.missing.refused, 0);
    assert_eq!(without.missing.reached_redis, without.missing.requests);
    assert_eq!(without.missing.reached_store, without.missing.requests);
    assert_eq!(without.deleted.reached_store, without.deleted.requests);
    // The store's query count is the reads that reached it and one transaction per write.
    for report in [&with, &without] {
        let reads = report.existing.reached_store
            + report.deleted.reached_store
            + report.missing.reached_store;
        assert_eq!(
            report.store_queries,
            reads + report.creates + report.deletes,
            "{report:?}"
        );
    }
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_deleted_key_is_refused_after_its_delete() {
    let server = Server::start("a_deleted_key_is_refused_after_its_delete");
    let (setup, _store, filter, population) = filled_store(&server);
    let queries = Arc::new(AtomicU64::new(0));
    let mut handler =
        Handler::connect(&setup, Arc::clone(&filter), true, queries).expect("handler");
    // New users that the filter refuses before they exist (about 0.2 % of ids pass as false
    // positives: those are skipped, since no delete can make them refused). Once all are
    // deleted again, the filter holds what it held before, so each must be refused again.
    // (Not checked after each delete: two new keys may share a fingerprint and buckets, and
    // then the first stays until the second is deleted too.)
    let fresh: Vec<String> = (population.next_id..)
        .take(1_000)
        .map(guard::user_key)
        .filter(|key| !filter.contains(key))
        .collect();
    assert!(
        fresh.len() > 950,
        "{} of 1,000 new keys refused",
        fresh.len()
    );
    for key in &fresh {
        assert!(handler.create(key, "v").expect("create"), "{key} existed");
        assert!(filter.contains(key), "{key} refused after its create");
        assert!(matches!(handler.read(key), Ok(Answer::Loaded(_))));
    }
    for key in &fresh {
        assert!(handler.delete(key).expect("delete"), "{key} was not stored");
    }
    for key in &fresh {
        assert_eq!(
            handler.read(key).expect("read"),
            Answer::Refused,
            "{key} passes the filter after its delete"
        );
    }
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn the_snapshot_is_restored_only_while_the_store_is_unchanged() {
    let server = Server::start("the_snapshot_is_restored_only_while_the_store_is_unchanged");
    let (setup, mut store, filter, _) = filled_store(&server);
    let dir = std::env::temp_dir().join(format!("penetration-guard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("guard.snapshot");
    let (keys, _) = store.keys().expect("scan the store");

    guard::save_snapshot(&filter, &mut store, &path).expect("save");
    let (restored, origin) = guard::open_filter(&mut store, &keys, Some(&path), 12).expect("open");
    assert!(matches!(origin, Origin::Restored), "{origin:?}");
    assert_eq!(restored.to_bytes(), filter.to_bytes());

    // One write through the guard changes the store's version: the snapshot no longer holds.
    let queries = Arc::new(AtomicU64::new(0));
    let mut handler =
        Handler::connect(&setup, Arc::clone(&filter), true, queries).expect("handler");
    assert!(handler.delete(&guard::user_key(0)).expect("delete"));
    let (keys, _) = store.keys().expect("scan the store");
    let (rebuilt, origin) = guard::open_filter(&mut store, &keys, Some(&path), 12).expect("open");
    assert!(
        matches!(&origin, Origin::Built(why) if why.contains("stale")),
        "{origin:?}"
    );
    assert_eq!(rebuilt.len(), keys.len());

    // A corrupt file is rebuilt from the store too, not an error.
    std::fs::write(&path, b"not a snapshot").expect("write");
    let (_, origin) = guard::open_filter(&mut store, &keys, Some(&path), 12).expect("open");
    assert!(
        matches!(&origin, Origin::Built(why) if why.contains("unusable")),
        "{origin:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
