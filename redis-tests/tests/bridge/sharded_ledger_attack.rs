//! Attacks on the ledger protocol of `ShardedFilter::export_to` (docs/SHARDED.md section 3):
//! a single fault and pairs of faults at every command of an export, the invariant checked
//! before every command and after each export, retried commands, reused generations, filters
//! whose names are prefixes of others, future-generation keys.

use std::cell::RefCell;
use std::rc::Rc;

use atomic_cuckoo::redisbloom::{ClusterError, ClusterExport, ClusterFilter, ShardedFilter};
use redis::ConnectionLike;

use super::sharded_faults::{
    items, keys_and_ttls_of, ledger_keys, ledger_started, ledger_text, Fault, Faulty,
};
use redis_tests::{Cluster, Server};

/// The documented invariant for the filters `names`: every key without an expiry is one of
/// the manifests, ledgers, keys a manifest names or keys a ledger holds; published keys have no
/// expiry. Keys in `foreign` are the test's own.
fn invariant_violations(
    keys: &[(String, i64)],
    conn: &mut dyn ConnectionLike,
    names: &[&str],
    foreign: &[String],
) -> Vec<String> {
    let mut allowed: Vec<String> = Vec::new();
    let mut named: Vec<String> = Vec::new();
    for name in names {
        match ClusterFilter::open(conn, name) {
            Ok(filter) => named.extend(filter.keys().iter().cloned()),
            Err(ClusterError::NoFilter { .. }) => {}
            Err(e) => return vec![format!("the manifest of {name} cannot be read: {e}")],
        }
        allowed.push(name.to_string());
        allowed.push(format!("{{{name}}}:ledger"));
        allowed.extend(ledger_keys(conn, name));
    }
    let mut bad = Vec::new();
    for (key, ttl) in keys {
        if foreign.contains(key) {
            continue;
        }
        if *ttl == -1 && !allowed.contains(key) && !named.contains(key) {
            bad.push(format!(
                "{key} has no expiry and neither manifest nor ledger names it"
            ));
        }
        if *ttl != -1 && (named.contains(key) || names.contains(&key.as_str())) {
            bad.push(format!("{key} is published but expires in {ttl} ms"));
        }
    }
    bad
}

/// xorshift64*, seeded and printed.
struct Rng(u64);
impl Rng {
    fn seeded() -> Rng {
        let seed = std::env::var("ATTACK_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        println!("seed {seed} (ATTACK_SEED={seed} repeats it)");
        Rng(seed)
    }
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Where the attacked exports run: a single server or a three-master cluster.
enum Target {
    One(Server),
    Three(Cluster),
}

impl Target {
    fn conn(&self) -> Box<dyn ConnectionLike> {
        match self {
            Target::One(s) => Box::new(s.conn()),
            Target::Three(c) => Box::new(c.conn()),
        }
    }
    fn node_conns(&self) -> Vec<redis::Connection> {
        match self {
            Target::One(s) => vec![s.conn()],
            Target::Three(c) => (0..3).map(|i| c.node_conn(i)).collect(),
        }
    }
    fn flush(&self) {
        for mut c in self.node_conns() {
            let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        }
    }
}

fn all_found(
    filter: &ClusterFilter,
    conn: &mut dyn ConnectionLike,
    items: &[Vec<u8>],
) -> Result<bool, String> {
    let mut found = Vec::new();
    filter
        .contains_many(conn, items, &mut found)
        .map_err(|e| e.to_string())?;
    Ok(found.iter().all(|&f| f))
}

/// One case: (with a published generation 1 when `previous`) an export of a filter holding
/// `first` and `second` through a connection that faults at `faults`, the invariant checked
/// before every command and after; the published generation whole; then a clean export: a
/// new generation number, the invariant with an empty ledger. Returns the violations and the
/// faulty export's command log.
fn run_case(
    target: &Target,
    name: &str,
    previous: bool,
    faults: &[(String, usize, Fault)],
) -> (Vec<String>, Vec<String>) {
    target.flush();
    let options = ClusterExport::default();
    let first = items("first-", 300);
    let second = items("second-", 300);
    let mut admin = target.conn();
    let old = ShardedFilter::reserve(3_000, 3).unwrap();
    old.insert_many(&first).unwrap();
    if previous {
        old.export_to(&mut *admin, name, &options).unwrap();
    }
    let new = ShardedFilter::reserve(3_000, 3).unwrap();
    new.insert_many(&first).unwrap();
    new.insert_many(&second).unwrap();

    let moments: Rc<RefCell<Vec<String>>> = Rc::default();
    let max_started = Rc::new(RefCell::new(0u64));
    let mut bad = Vec::new();
    let mut conn = target.conn();
    let (result, log) = {
        let mut checker = target.conn();
        let mut nodes = target.node_conns();
        let (m, s) = (moments.clone(), max_started.clone());
        let names = [name];
        let mut faulty = Faulty::new(&mut *conn);
        faulty.before_each = Some(Box::new(move || {
            let keys = keys_and_ttls_of(&mut nodes);
            for v in invariant_violations(&keys, &mut *checker, &names, &[]) {
                m.borrow_mut().push(format!("mid-export: {v}"));
            }
            if let Some(st) = ledger_started(&mut *checker, names[0]) {
                let mut s = s.borrow_mut();
                *s = (*s).max(st);
            }
        }));
        for (c, n, f) in faults {
            faulty = faulty.at(c, *n, *f);
        }
        let result = new.export_to(&mut faulty, name, &options);
        (result, faulty.log.clone())
    };
    drop(conn);
    bad.extend(moments.borrow().iter().cloned());
    let keys = keys_and_ttls_of(&mut target.node_conns());
    for v in invariant_violations(&keys, &mut *admin, &[name], &[]) {
        bad.push(format!("after the faulty export ({result:?}): {v}"));
    }
    if let Some(st) = ledger_started(&mut *admin, name) {
        let mut s = max_started.borrow_mut();
        *s = (*s).max(st);
    }
    // The published generation is whole.
    let published = match ClusterFilter::open(&mut *admin, name) {
        Ok(reader) => Some(reader),
        Err(ClusterError::NoFilter { .. }) => None,
        Err(e) => {
            bad.push(format!("manifest unreadable: {e}"));
            None
        }
    };
    if let Some(reader) = &published {
        let want: Vec<Vec<u8>> = if previous && reader.generation() == 1 {
            first.clone()
        } else {
            first.iter().chain(&second).cloned().collect()
        };
        match all_found(reader, &mut *admin, &want) {
            Ok(true) => {}
            Ok(false) => bad.push(format!("generation {} misses items", reader.generation())),
            Err(e) => bad.push(format!(
                "generation {} unreadable: {e}",
                reader.generation()
            )),
        }
    }
    // (An injected fault at PEXPIRE legitimately leaves `unretired` non-empty.)
    // A clean export afterwards settles everything and uses a fresh generation.
    let reached_restore = log.iter().any(|l| l.starts_with("RESTORE#"));
    match new.export_to(&mut *admin, name, &options) {
        Ok(summary) => {
            let started = *max_started.borrow();
            if summary.generation <= started {
                bad.push(format!(
                    "the clean export used generation {}, but an export had started {started}",
                    summary.generation
                ));
            }
            if reached_restore && summary.generation == 1 + u64::from(previous) {
                bad.push(format!(
                    "generation {} reused: the faulty export already wrote (RESTORE) its keys",
                    summary.generation
                ));
            }
            let keys = keys_and_ttls_of(&mut target.node_conns());
            for v in invariant_violations(&keys, &mut *admin, &[name], &[]) {
                bad.push(format!("after the clean export: {v}"));
            }
            let owed = ledger_keys(&mut *admin, name);
            if !owed.is_empty() {
                bad.push(format!("after the clean export the ledger holds {owed:?}"));
            }
            let reader = ClusterFilter::open(&mut *admin, name).unwrap();
            let all: Vec<Vec<u8>> = first.iter().chain(&second).cloned().collect();
            if all_found(&reader, &mut *admin, &all) != Ok(true) {
                bad.push("the clean export's generation misses items".into());
            }
        }
        Err(e) => bad.push(format!("the clean export failed: {e}")),
    }
    (bad, log)
}

/// The commands (name, nth) a healthy export sends.
fn commands_of_an_export(target: &Target, name: &str, previous: bool) -> Vec<(String, usize)> {
    let (bad, log) = run_case(target, name, previous, &[]);
    assert!(bad.is_empty(), "a healthy export: {bad:#?}");
    log.iter()
        .filter_map(|l| l.split_once('#'))
        .map(|(c, n)| (c.to_owned(), n.parse().unwrap()))
        .collect()
}

fn single_faults(target: &Target, name: &str) {
    let mut failures = Vec::new();
    let mut cases = 0;
    for previous in [true, false] {
        let commands = commands_of_an_export(target, name, previous);
        println!(
            "previous {previous}: {} commands: {commands:?}",
            commands.len()
        );
        for (command, nth) in &commands {
            for fault in [Fault::FailBefore, Fault::FailAfter] {
                cases += 1;
                let (bad, log) =
                    run_case(target, name, previous, &[(command.clone(), *nth, fault)]);
                if !bad.is_empty() {
                    failures.push(format!("previous {previous}, {fault:?} at {command}#{nth}: {bad:#?}\n  log {log:?}"));
                }
            }
        }
    }
    println!("{cases} cases, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn every_single_fault_at_every_export_command_keeps_the_invariant_on_one_server() {
    let target = Target::One(Server::start("ledger_single_faults_one"));
    single_faults(&target, "lf");
}

#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn every_single_fault_at_every_export_command_keeps_the_invariant_in_a_cluster() {
    let target = Target::Three(Cluster::start("ledger_single_faults_cluster", 3));
    single_faults(&target, "lf");
}

/// Pairs of faults: the first anywhere, the second at a command the export sends after it
/// (its cleanup included), sampled with a printed seed.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn any_pair_of_faults_keeps_the_invariant_on_one_server() {
    let target = Target::One(Server::start("ledger_pair_faults_one"));
    let mut rng = Rng::seeded();
    let name = "pf";
    let faults = [Fault::FailBefore, Fault::FailAfter];
    let mut failures = Vec::new();
    let started = std::time::Instant::now();
    let mut cases = 0;
    while started.elapsed().as_secs() < 12 {
        let previous = rng.below(2) == 0;
        let commands = commands_of_an_export(&target, name, previous);
        let (c1, n1) = commands[rng.below(commands.len())].clone();
        let f1 = faults[rng.below(2)];
        let (_, log) = run_case(&target, name, previous, &[(c1.clone(), n1, f1)]);
        let after: Vec<(String, usize)> = log
            .iter()
            .skip_while(|l| **l != format!("{c1}#{n1}"))
            .skip(1)
            .filter_map(|l| l.split_once('#'))
            .map(|(c, n)| (c.to_owned(), n.parse().unwrap()))
            .collect();
        if after.is_empty() {
            continue;
        }
        let (c2, n2) = after[rng.below(after.len())].clone();
        let f2 = faults[rng.below(2)];
        cases += 1;
        let pair = [(c1.clone(), n1, f1), (c2.clone(), n2, f2)];
        let (bad, log) = run_case(&target, name, previous, &pair);
        if !bad.is_empty() {
            failures.push(format!(
                "previous {previous}, {pair:?}: {bad:#?}\n  log {log:?}"
            ));
        }
    }
    println!("{cases} pairs, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A `RESTORE` whose reply is lost and which is sent again (the `redis` crate's cluster
/// connection retries a single command after an I/O error on a dropped connection): the key
/// is the export's own, written by its first send. It must be deleted or stay in the ledger.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_restore_sent_again_after_a_lost_reply_leaves_no_orphan_key() {
    let target = Target::One(Server::start("ledger_restore_retry"));
    let mut failures = Vec::new();
    for previous in [true, false] {
        for nth in 1..=3 {
            let (bad, log) = run_case(
                &target,
                "rr",
                previous,
                &[("RESTORE".into(), nth, Fault::Retry)],
            );
            if !bad.is_empty() {
                failures.push(format!(
                    "previous {previous}, RESTORE#{nth} sent twice: {bad:#?}\n  log {log:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The doc: "the new generation is one more than any started before, so its names are never
/// used twice". A first export (no manifest yet) fails after writing a shard; the next export
/// of the name must not use that generation's names again.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_failed_first_export_never_reuses_its_generation() {
    let server = Server::start("ledger_first_export_reuse");
    let mut conn = server.conn();
    let filter = ShardedFilter::reserve(3_000, 3).unwrap();
    filter.insert_many(items("x-", 300)).unwrap();
    let mut seen_started = None;
    {
        let mut watcher = server.conn();
        let seen = Rc::new(RefCell::new(None));
        let s = seen.clone();
        let mut faulty = Faulty::new(&mut conn).at("RESTORE", 2, Fault::FailBefore);
        faulty.before_each = Some(Box::new(move || {
            if let Some(st) = ledger_started(&mut watcher, "fresh") {
                *s.borrow_mut() = Some(st);
            }
        }));
        let error = filter
            .export_to(&mut faulty, "fresh", &ClusterExport::default())
            .unwrap_err();
        println!("failed export: {error}\n{:?}", faulty.log);
        seen_started = seen_started.or(*seen.borrow());
    }
    let started = seen_started.expect("the failed export wrote its ledger");
    println!(
        "the failed export started generation {started}; ledger after: {:?}",
        ledger_text(&mut conn, "fresh")
    );
    let next = filter
        .export_to(&mut conn, "fresh", &ClusterExport::default())
        .unwrap();
    assert!(
        next.generation > started,
        "generation {} used again (the failed export started {started} and RESTOREd {:?})",
        next.generation,
        next.keys[0]
    );
}

/// Filters whose names are prefixes of each other ("a", "a:1", "a:1:0", "a:1:0:"): exports
/// with faults of one never give an expiry to, delete or overwrite the others' keys, and a
/// user key shaped like a future shard key of "a" is never touched.
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn exports_never_touch_keys_of_filters_whose_names_are_prefixes() {
    let server = Server::start("ledger_prefix_names");
    let mut conn = server.conn();
    let names = ["a", "a:1", "a:1:0", "a:1:0:", "a:"];
    let options = ClusterExport::default();
    let mut rng = Rng::seeded();
    let filters: Vec<ShardedFilter> = names
        .iter()
        .map(|n| {
            let f = ShardedFilter::reserve(2_000, 1 + n.len() % 3).unwrap();
            f.insert_many(items(n, 100)).unwrap();
            f
        })
        .collect();
    // A user's key, shaped like a shard key of "a" in a far generation with another tag.
    let user = "a:50:0:{beef}".to_owned();
    let _: () = redis::cmd("SET")
        .arg(&user)
        .arg("mine")
        .query(&mut conn)
        .unwrap();
    let kinds = [
        "GET",
        "SET",
        "EXISTS",
        "CF.EXISTS",
        "RESTORE",
        "EXEC",
        "PEXPIRE",
        "DEL",
    ];
    for round in 0..30 {
        let i = rng.below(names.len());
        let fault = [Fault::FailBefore, Fault::FailAfter][rng.below(2)];
        let (c, n) = (kinds[rng.below(kinds.len())], 1 + rng.below(3));
        let r = {
            let mut faulty = Faulty::new(&mut conn).at(c, n, fault);
            filters[i].export_to(&mut faulty, names[i], &options)
        };
        if round % 10 == 0 {
            println!(
                "round {round}: {} with {fault:?} at {c}#{n}: {:?}",
                names[i],
                r.as_ref().map(|s| s.generation)
            );
        }
        let keys = keys_and_ttls_of(&mut [server.conn()]);
        let bad = invariant_violations(&keys, &mut conn, &names, std::slice::from_ref(&user));
        assert!(
            bad.is_empty(),
            "round {round} ({} {fault:?} at {c}#{n}): {bad:#?}",
            names[i]
        );
        let ttl: i64 = redis::cmd("PTTL").arg(&user).query(&mut conn).unwrap();
        let text: String = redis::cmd("GET").arg(&user).query(&mut conn).unwrap();
        assert_eq!(
            (ttl, text.as_str()),
            (-1, "mine"),
            "round {round}: the user's key was touched"
        );
        for (j, name) in names.iter().enumerate() {
            if let Ok(reader) = ClusterFilter::open(&mut conn, name) {
                assert_eq!(
                    all_found(&reader, &mut conn, &items(name, 100)),
                    Ok(true),
                    "{name} after round {round}; {j}"
                );
            }
        }
    }
    // Clean exports of all: nothing owed, nothing else permanent.
    for (f, name) in filters.iter().zip(names) {
        f.export_to(&mut conn, name, &options).unwrap();
    }
    let keys = keys_and_ttls_of(&mut [server.conn()]);
    assert!(invariant_violations(&keys, &mut conn, &names, std::slice::from_ref(&user)).is_empty());
    for name in names {
        assert!(
            ledger_keys(&mut conn, name).is_empty(),
            "{name} owes {:?}",
            ledger_keys(&mut conn, name)
        );
    }
}

/// A key already at the name of the next generation's shard: the export refuses it naming the
/// key, never overwrites or expires it. (Whether any later export can get past it is printed.)
#[test]
#[ignore = "needs a Redis server with RedisBloom: scripts/install-redis.sh"]
fn a_key_at_a_future_shard_name_is_never_overwritten_or_expired() {
    let server = Server::start("ledger_future_key");
    let mut conn = server.conn();
    let filter = ShardedFilter::reserve(3_000, 3).unwrap();
    filter.insert_many(items("f-", 300)).unwrap();
    let first = filter
        .export_to(&mut conn, "fut", &ClusterExport::default())
        .unwrap();
    let future = first.keys[1].replace("fut:1:", "fut:2:");
    let _: () = redis::cmd("SET")
        .arg(&future)
        .arg("user data")
        .query(&mut conn)
        .unwrap();
    let mut errors = Vec::new();
    for _ in 0..3 {
        match filter.export_to(&mut conn, "fut", &ClusterExport::default()) {
            Ok(s) => {
                println!("an export got past it: generation {}", s.generation);
                break;
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    println!("errors: {errors:#?}");
    for e in &errors {
        assert!(e.contains(&future), "the error names the key: {e}");
    }
    let ttl: i64 = redis::cmd("PTTL").arg(&future).query(&mut conn).unwrap();
    let text: String = redis::cmd("GET").arg(&future).query(&mut conn).unwrap();
    assert_eq!((ttl, text.as_str()), (-1, "user data"));
    let reader = ClusterFilter::open(&mut conn, "fut").unwrap();
    assert_eq!(all_found(&reader, &mut conn, &items("f-", 300)), Ok(true));
    assert!(
        errors.len() < 3,
        "every export is refused forever: the generation never moves past the user's key"
    );
}
