//! A cache-penetration guard in front of Redis: a cuckoo filter of the keys that exist, checked
//! before the cache, so that requests for keys that exist nowhere stop in process.
//!
//! Cache penetration: a request for a key that is in neither the cache nor the database misses
//! the cache and goes on to the database, every time. An attacker who sends random keys drives
//! every request to the database, and caching the misses does not help, since each random key is
//! new. A filter of the keys that exist answers "no such key" for all but a false-positive share
//! of them without touching Redis or the database; a cuckoo filter, unlike a Bloom filter, also
//! forgets deleted keys, so requests for them stop too.
//!
//! The parts, each a function or type below that `redis-tests/tests/bridge/penetration_guard.rs`
//! drives too:
//! - the store ([`Store`]): a table of users, `user:<id>`, in its own Redis database (DB 1 by
//!   default), standing in for the database that the cache protects. The store's queries are
//!   counted on the client, by one atomic counter that every connection shares;
//! - the cache ([`Cache`]): the URL's database (DB 0 by default) of the same server, filled
//!   cache-aside with a TTL;
//! - the guard ([`Handler`], one per request thread, all sharing one `Arc<CuckooFilter>`): reads
//!   ask the filter first; writes keep the filter a superset of the store at every moment: a
//!   create inserts into the filter before the store, a delete removes from the store and the
//!   cache before the filter;
//! - the filter's life ([`open_filter`], [`save_snapshot`]): built from the store's keys at start
//!   (`SCAN`, then `insert_many`), or restored from `--snapshot PATH` (`read_from`) when that file
//!   exists and the store has not changed since it was written (every write changes a version
//!   key in the same transaction, and the snapshot keeps the version it was saved at); saved
//!   there at shutdown (`write_to`). A service that restores skips the `SCAN`; this example
//!   lists the users anyway, since its load generator must know them;
//! - a load generator ([`run_load`]): threads send a mix of requests for existing keys, for
//!   deleted keys and for random missing keys (the attack), plus a few creates and deletes, with
//!   a progress bar on stderr. It runs twice, with the filter and without it, and prints
//!   requests per second, how many missing-key requests reached Redis and the store, and the
//!   store's query count in both runs.
//!
//! It writes `user:*` keys to the store's and the cache's databases (and `guard:version` to the
//! store's): point it at a scratch server, such as
//!
//! ```sh
//! redis-server --port 6390 --save "" --appendonly no --daemonize yes
//! cargo run --release --features redis --example penetration_guard -- \
//!     --url redis://127.0.0.1:6390/ --snapshot /tmp/guard.snapshot
//! redis-cli -p 6390 shutdown nosave
//! ```
//!
//! A second run with the same `--snapshot` restores the filter instead of building it.

mod common;

use std::collections::hash_map::RandomState;
use std::fmt;
use std::fs::File;
use std::hash::BuildHasher;
use std::io::{self, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use atomic_cuckoo::{BuildError, CuckooFilter, InsertError, PersistError};
use common::{Long, Rng, Short, ValueExt};
use redis::{Connection, ConnectionInfo, IntoConnectionInfo, RedisError};

const USAGE: &str = "\
Usage: penetration_guard [--url URL] [--store-db N] [--users N] [--reset] [--requests N]
                         [--threads N] [--missing SHARE] [--deleted SHARE] [--writes SHARE]
                         [--ttl SECONDS] [--fingerprint-bits B] [--snapshot PATH] [--seed N]

A cache-penetration guard: a cuckoo filter of the store's keys, checked before a Redis cache
that sits in front of the store (a table of users in a second database of the same server).
Sends a mix of requests for existing, deleted and random missing keys from several threads,
once with the filter and once without, and prints what reached Redis and the store.

It writes user:* keys to both databases: use a scratch server.

Options:
  --url URL               the server; its database is the cache (default redis://127.0.0.1:6379/)
  --store-db N            the store's database (default 1)
  --users N               users to create when the store has none (default 100000)
  --reset                 delete the store's and the cache's user:* keys first, then create
                          --users users
  --requests N            requests per run (default 400000)
  --threads N             request threads (default 4)
  --missing SHARE         share of reads for random missing keys, the attack (default 0.5)
  --deleted SHARE         share of reads for keys deleted earlier (default 0.05)
  --writes SHARE          share of requests that create or delete a user (default 0.01)
  --ttl SECONDS           the cache's TTL (default 300)
  --fingerprint-bits B    fingerprint width of a new filter, 4 to 32 (default 12)
  --snapshot PATH         restore the filter from PATH if it is current; save it there at exit
  --seed N                the load's random seed (default: from the clock; printed)
  -h, --help              print this help

Run it with `cargo run --release --features redis --example penetration_guard -- [OPTIONS]`.";

/// The store's table: `user:<id>`.
const USER_PREFIX: &str = "user:";
/// Changed (to a fresh random value) by every write to the store, in the same transaction: a
/// snapshot of the filter is current only while this still holds the value it was saved with.
/// Every writer of the store must change it, or a snapshot restored after its write would
/// refuse a user it created.
const VERSION_KEY: &str = "guard:version";
/// Ids of real users stay below this; the attack's random ids are drawn above it, so that a
/// "missing" key is missing by construction.
const ATTACK_BASE: u64 = 1 << 40;
/// Keys per `SCAN` step, and per `MSET` or `UNLINK` when filling or clearing.
const BATCH: usize = 1000;

// ---- errors ---------------------------------------------------------------------------------

/// Why the guard stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum GuardError {
    /// A Redis command failed (the cache or the store).
    Redis(RedisError),
    /// The filter could not be built with the given parameters.
    Build(BuildError),
    /// The filter refused a key: it is full (sized for the store at start and a quarter more:
    /// see [`new_filter`]), or see `InsertError`.
    Insert(InsertError),
    /// The snapshot file could not be written.
    Snapshot {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: io::Error,
    },
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardError::Redis(e) => write!(f, "redis: {e}"),
            GuardError::Build(e) => write!(f, "cannot build the filter: {e}"),
            GuardError::Insert(e) => write!(f, "cannot insert into the filter: {e}"),
            GuardError::Snapshot { path, error } => {
                write!(f, "cannot save the snapshot {}: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for GuardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GuardError::Redis(e) => Some(e),
            GuardError::Build(e) => Some(e),
            GuardError::Insert(e) => Some(e),
            GuardError::Snapshot { error, .. } => Some(error),
        }
    }
}

impl From<RedisError> for GuardError {
    fn from(e: RedisError) -> Self {
        GuardError::Redis(e)
    }
}

impl From<InsertError> for GuardError {
    fn from(e: InsertError) -> Self {
        GuardError::Insert(e)
    }
}

// ---- where the data lives -------------------------------------------------------------------

/// The server's two databases: the cache's (the URL's) and the store's.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The cache's connection details.
    pub cache: ConnectionInfo,
    /// The store's: the same server, another database.
    pub store: ConnectionInfo,
    /// Seconds a cached user lives.
    pub ttl: u64,
}

impl Setup {
    /// The cache at `url`, the store in database `store_db` of the same server.
    pub fn new(url: &str, store_db: i64, ttl: u64) -> Result<Setup, String> {
        let cache = url
            .into_connection_info()
            .map_err(|e| format!("bad value {url:?} for --url: {e}"))?;
        if cache.redis_settings().db() == store_db {
            return Err(format!(
                "the store (--store-db {store_db}) must be another database than the cache's \
                 (the URL's, {store_db})"
            ));
        }
        let settings = cache.redis_settings().clone().set_db(store_db);
        let store = cache.clone().set_redis_settings(settings);
        Ok(Setup { cache, store, ttl })
    }
}

/// `user:<id>`.
pub fn user_key(id: u64) -> String {
    format!("{USER_PREFIX}{id}")
}

/// The stored value of user `id`.
fn user_value(id: u64) -> String {
    format!("{{\"id\":{id},\"name\":\"user {id}\"}}")
}

/// A fresh random value for [`VERSION_KEY`]: from the process's own random keys, not from
/// `--seed`, so that two runs with one seed never write the same versions (and a stale snapshot
/// could never match). Never 0, which stands for "no version" in a snapshot.
fn fresh_version() -> u64 {
    RandomState::new().hash_one(Instant::now()) | 1
}

/// Every key matching `user:*` in the database of `conn`, by `SCAN` (which, unlike `KEYS`,
/// does not block the server while it walks a large database). Returns the keys and the
/// number of `SCAN` calls.
fn scan_users(conn: &mut Connection) -> Result<(Vec<String>, u64), RedisError> {
    let (mut keys, mut calls, mut cursor) = (Vec::new(), 0, 0u64);
    loop {
        let (next, page): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{USER_PREFIX}*"))
            .arg("COUNT")
            .arg(BATCH)
            .query(conn)?;
        calls += 1;
        keys.extend(page);
        if next == 0 {
            return Ok((keys, calls));
        }
        cursor = next;
    }
}

/// Deletes `keys` in batches (`UNLINK`: the server frees them in the background).
fn unlink_all(conn: &mut Connection, keys: &[String]) -> Result<(), RedisError> {
    for batch in keys.chunks(BATCH) {
        redis::cmd("UNLINK").arg(batch).exec(conn)?;
    }
    Ok(())
}

/// The store: a table of users in its own database. Counts every command it sends in
/// `queries`, an atomic counter that all connections share (a client-side count: the server
/// keeps no per-database command count, and the cache shares it).
pub struct Store {
    conn: Connection,
    queries: Arc<AtomicU64>,
}

impl Store {
    /// A connection to the store, counting into `queries`.
    pub fn connect(setup: &Setup, queries: Arc<AtomicU64>) -> Result<Store, RedisError> {
        let conn = redis::Client::open(setup.store.clone())?.get_connection()?;
        Ok(Store { conn, queries })
    }

    /// Counts one command; `Relaxed`: the count is read only after the threads are joined.
    fn counted(&mut self) -> &mut Connection {
        self.queries.fetch_add(1, Ordering::Relaxed);
        &mut self.conn
    }

    /// The user at `key`.
    pub fn get(&mut self, key: &str) -> Result<Option<String>, RedisError> {
        redis::cmd("GET").arg(key).query(self.counted())
    }

    /// Creates `key` unless it exists (`SET NX`), changing the version in the same
    /// transaction; returns whether it was created.
    pub fn create(&mut self, key: &str, value: &str) -> Result<bool, RedisError> {
        let (set,): (Option<String>,) = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(key)
            .arg(value)
            .arg("NX")
            .cmd("SET")
            .arg(VERSION_KEY)
            .arg(fresh_version())
            .ignore()
            .query(self.counted())?;
        Ok(set.is_some())
    }

    /// Deletes `key`, changing the version in the same transaction; returns whether it was
    /// there.
    pub fn delete(&mut self, key: &str) -> Result<bool, RedisError> {
        let (deleted,): (u64,) = redis::pipe()
            .atomic()
            .cmd("DEL")
            .arg(key)
            .cmd("SET")
            .arg(VERSION_KEY)
            .arg(fresh_version())
            .ignore()
            .query(self.counted())?;
        Ok(deleted == 1)
    }

    /// The store's version: changes with every write (`None` before the first).
    pub fn version(&mut self) -> Result<Option<u64>, RedisError> {
        redis::cmd("GET").arg(VERSION_KEY).query(&mut self.conn)
    }

    /// Every user key, and how many `SCAN` calls that took (not counted as queries: the
    /// count is of requests).
    pub fn keys(&mut self) -> Result<(Vec<String>, u64), RedisError> {
        scan_users(&mut self.conn)
    }

    /// Replaces the table with users `0..users` (`MSET`s of [`BATCH`]), and changes the
    /// version. (Setup, not requests: not counted.)
    pub fn fill(&mut self, users: u64) -> Result<(), RedisError> {
        let (old, _) = scan_users(&mut self.conn)?;
        unlink_all(&mut self.conn, &old)?;
        for first in (0..users).step_by(BATCH) {
            let mut mset = redis::cmd("MSET");
            for id in first..users.min(first + BATCH as u64) {
                mset.arg(user_key(id)).arg(user_value(id));
            }
            mset.exec(&mut self.conn)?;
        }
        redis::cmd("SET")
            .arg(VERSION_KEY)
            .arg(fresh_version())
            .exec(&mut self.conn)
    }
}

/// The cache: cache-aside (a reader fills it after a miss), every entry with a TTL. The TTL
/// also bounds how long a stale entry can live after a delete races with a reader that loaded
/// the user just before it.
pub struct Cache {
    conn: Connection,
    ttl: u64,
}

impl Cache {
    /// A connection to the cache.
    pub fn connect(setup: &Setup) -> Result<Cache, RedisError> {
        let conn = redis::Client::open(setup.cache.clone())?.get_connection()?;
        Ok(Cache {
            conn,
            ttl: setup.ttl.max(1),
        })
    }

    fn get(&mut self, key: &str) -> Result<Option<String>, RedisError> {
        redis::cmd("GET").arg(key).query(&mut self.conn)
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), RedisError> {
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .arg("EX")
            .arg(self.ttl)
            .exec(&mut self.conn)
    }

    fn invalidate(&mut self, key: &str) -> Result<(), RedisError> {
        redis::cmd("DEL").arg(key).exec(&mut self.conn)
    }

    /// Drops every cached user, so that a run starts cold.
    pub fn clear(&mut self) -> Result<(), RedisError> {
        let (keys, _) = scan_users(&mut self.conn)?;
        unlink_all(&mut self.conn, &keys)
    }
}

// ---- the filter's life ----------------------------------------------------------------------

/// A new filter for a store of `keys` keys: room for a quarter more (and 1,024), with
/// `bits`-wide fingerprints (12 bits: about 0.2 % false positives at the load this sizing
/// gives). A fixed table, not a growable one: a growable filter chooses its own fingerprint
/// width from a target rate, and `--fingerprint-bits` picks the width here. The room is for
/// the creates of a run; once the store holds more keys than the filter was built for, a
/// create that finds no room is refused ([`GuardError::Insert`]) rather than stored unseen by
/// the filter. A filter built at a later start (no snapshot, or a stale one) is sized for the
/// store as it then is.
pub fn new_filter(keys: usize, bits: u32) -> Result<CuckooFilter, BuildError> {
    CuckooFilter::builder()
        .capacity(keys + keys / 4 + 1024)
        .fingerprint_bits(bits)
        .build()
}

/// How [`open_filter`] got its filter, for the report.
#[derive(Debug)]
pub enum Origin {
    /// Read from the snapshot file.
    Restored,
    /// Built from the store's keys; the string says why no snapshot was used.
    Built(String),
}

/// The filter for a store whose keys are `keys`: restored from `snapshot` when that file holds
/// one saved at the store's current version (see [`save_snapshot`]), else built from `keys`
/// with `insert_many`.
///
/// A snapshot from an older version would miss the users created since and refuse their
/// requests, and one that cannot be read is no use: both are rebuilt, not fatal.
pub fn open_filter(
    store: &mut Store,
    keys: &[String],
    snapshot: Option<&Path>,
    bits: u32,
) -> Result<(CuckooFilter, Origin), GuardError> {
    let why = match snapshot {
        None => "no --snapshot".to_owned(),
        Some(path) => match read_snapshot(path) {
            Ok((saved, filter)) => match store.version()? {
                Some(current) if current == saved => return Ok((filter, Origin::Restored)),
                _ => format!(
                    "{} is stale: the store changed after it was saved",
                    path.display()
                ),
            },
            Err(SnapshotError::Missing) => format!("no snapshot at {} yet", path.display()),
            Err(e) => format!("{} is unusable: {e}", path.display()),
        },
    };
    let filter = new_filter(keys.len(), bits).map_err(GuardError::Build)?;
    filter
        .insert_many(keys)
        .map_err(|e| GuardError::Insert(e.error))?;
    Ok((filter, Origin::Built(why)))
}

/// Why a snapshot could not be read.
#[derive(Debug)]
enum SnapshotError {
    Missing,
    Io(io::Error),
    Filter(PersistError),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Missing => f.write_str("no such file"),
            SnapshotError::Io(e) => e.fmt(f),
            SnapshotError::Filter(e) => e.fmt(f),
        }
    }
}

/// A snapshot file: the store's version (8 bytes, little-endian) and the filter (`read_from`,
/// which checks the filter's own format and checksum).
fn read_snapshot(path: &Path) -> Result<(u64, CuckooFilter), SnapshotError> {
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => SnapshotError::Missing,
        _ => SnapshotError::Io(e),
    })?;
    let mut reader = BufReader::new(file);
    let mut version = [0u8; 8];
    reader.read_exact(&mut version).map_err(SnapshotError::Io)?;
    let filter = CuckooFilter::read_from(reader).map_err(SnapshotError::Filter)?;
    Ok((u64::from_le_bytes(version), filter))
}

/// Saves `filter` with the store's version to `path`, through a temporary file renamed over
/// it, so that a crash mid-save leaves the old snapshot (which the version then marks stale)
/// rather than half a new one. Returns the bytes written.
///
/// Safe while writers run: the version is read before the filter is copied, and every create
/// that this version includes had inserted into the filter before it wrote the store, so the
/// snapshot holds every key of the store at that version (perhaps also a key deleted since,
/// which only lets its requests through).
pub fn save_snapshot(
    filter: &CuckooFilter,
    store: &mut Store,
    path: &Path,
) -> Result<u64, GuardError> {
    let version = store.version()?.unwrap_or(0);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<u64> {
        let mut out = BufWriter::new(File::create(&tmp)?);
        out.write_all(&version.to_le_bytes())?;
        filter.write_to(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(std::fs::metadata(path)?.len())
    };
    write().map_err(|error| GuardError::Snapshot {
        path: path.to_owned(),
        error,
    })
}

// ---- the guard ------------------------------------------------------------------------------

/// What a read answered, and how far it went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The filter said the key does not exist: neither Redis nor the store was asked.
    Refused,
    /// Found in the cache.
    Cached(String),
    /// Missed the cache, found in the store (and now cached).
    Loaded(String),
    /// Missed the cache and the store.
    NotFound,
}

/// One request thread's guard: its own connections to the cache and the store, and the filter
/// that all threads share.
pub struct Handler {
    filter: Arc<CuckooFilter>,
    /// Whether reads ask the filter (off for the comparison run; writes keep it current
    /// either way, so that it is right when reads ask it again).
    use_filter: bool,
    cache: Cache,
    store: Store,
}

impl Handler {
    /// A handler with its own connections.
    pub fn connect(
        setup: &Setup,
        filter: Arc<CuckooFilter>,
        use_filter: bool,
        store_queries: Arc<AtomicU64>,
    ) -> Result<Handler, RedisError> {
        Ok(Handler {
            filter,
            use_filter,
            cache: Cache::connect(setup)?,
            store: Store::connect(setup, store_queries)?,
        })
    }

    /// Reads the user at `key`: the filter, then the cache, then the store.
    pub fn read(&mut self, key: &str) -> Result<Answer, GuardError> {
        if self.use_filter && !self.filter.contains(key) {
            return Ok(Answer::Refused);
        }
        if let Some(value) = self.cache.get(key)? {
            return Ok(Answer::Cached(value));
        }
        // Misses are not cached: against random keys each one is new, so a cached miss would
        // only cost cache memory. The filter is what stops them.
        match self.store.get(key)? {
            Some(value) => {
                self.cache.put(key, &value)?;
                Ok(Answer::Loaded(value))
            }
            None => Ok(Answer::NotFound),
        }
    }

    /// Creates the user at `key`; returns whether it was new.
    ///
    /// The filter first, then the store: the filter must hold every key the store holds at
    /// every moment, or a reader between the two writes would be refused a user that exists.
    /// (A reader that passes the filter before the store write only misses, as it would have
    /// a moment earlier.)
    pub fn create(&mut self, key: &str, value: &str) -> Result<bool, GuardError> {
        // `insert`, not `insert_unique`: each stored key needs a copy of its own, or deleting
        // another key whose fingerprint it shares would take this key's away.
        self.filter.insert(key)?;
        // On an error the copy stays: the key may have been stored, and a spare copy only
        // costs a slot, while a missing one would refuse a stored key.
        let created = self.store.create(key, value)?;
        if !created {
            // It existed, with its own copy in the filter: take back the one added above (safe:
            // it was inserted).
            self.filter.remove(key);
        }
        Ok(created)
    }

    /// Deletes the user at `key`; returns whether it existed.
    ///
    /// The store, then the cache, then the filter: the filter lets the key through until it
    /// is gone from both, so that no reader is refused a user that still exists; a reader in
    /// between just misses. The filter's `remove` is safe only for keys that were inserted
    /// (removing another key would take away the copy of whichever stored key shares its
    /// fingerprint and buckets, and that key would then be refused), so it runs only when the
    /// store had the key: every stored key was inserted, by [`Handler::create`] or at start.
    pub fn delete(&mut self, key: &str) -> Result<bool, GuardError> {
        let existed = self.store.delete(key)?;
        self.cache.invalidate(key)?;
        if existed {
            self.filter.remove(key);
        }
        Ok(existed)
    }
}

// ---- the load generator ---------------------------------------------------------------------

/// What to send.
#[derive(Clone, Debug)]
pub struct Load {
    /// Request threads.
    pub threads: usize,
    /// Requests per run, all threads together.
    pub requests: u64,
    /// Share of reads for random missing keys (the attack).
    pub missing: f64,
    /// Share of reads for keys deleted earlier.
    pub deleted: f64,
    /// Share of requests that create a user or delete one.
    pub writes: f64,
    /// The seed of the keys and the mix.
    pub seed: u64,
}

/// The users the clients know of: which exist, which were deleted, and the next new id.
#[derive(Clone, Debug, Default)]
pub struct Population {
    /// Ids in the store.
    pub live: Vec<u64>,
    /// Ids deleted (in earlier runs or this one).
    pub deleted: Vec<u64>,
    /// The id of the next created user.
    pub next_id: u64,
}

impl Population {
    /// The users behind the store's `keys`, sorted (`SCAN` returns them in hash order), so
    /// that a seed picks the same users from the same store. Keys that are not `user:<id>` with
    /// an id below the attack's range are not requested.
    pub fn from_keys(keys: &[String]) -> Population {
        let mut live: Vec<u64> = keys
            .iter()
            .filter_map(|k| k.strip_prefix(USER_PREFIX)?.parse().ok())
            .filter(|&id| id < ATTACK_BASE)
            .collect();
        live.sort_unstable();
        let next_id = live.last().map_or(0, |&id| id + 1);
        Population {
            live,
            deleted: Vec::new(),
            next_id,
        }
    }
}

/// Requests of one kind: how many, and how far they went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests sent.
    pub requests: u64,
    /// Refused by the filter.
    pub refused: u64,
    /// Reached Redis (the cache).
    pub reached_redis: u64,
    /// Reached the store.
    pub reached_store: u64,
    /// Answered with a user.
    pub found: u64,
}

impl Tally {
    fn count(&mut self, answer: &Answer) {
        self.requests += 1;
        match answer {
            Answer::Refused => self.refused += 1,
            Answer::Cached(_) => {
                self.reached_redis += 1;
                self.found += 1;
            }
            Answer::Loaded(_) => {
                self.reached_redis += 1;
                self.reached_store += 1;
                self.found += 1;
            }
            Answer::NotFound => {
                self.reached_redis += 1;
                self.reached_store += 1;
            }
        }
    }

    fn add(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.refused += other.refused;
        self.reached_redis += other.reached_redis;
        self.reached_store += other.reached_store;
        self.found += other.found;
    }
}

/// One run's results.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Whether reads asked the filter.
    pub used_filter: bool,
    /// Reads of users that exist.
    pub existing: Tally,
    /// Reads of users deleted earlier.
    pub deleted: Tally,
    /// Reads of random ids that never existed (the attack).
    pub missing: Tally,
    /// Users created.
    pub creates: u64,
    /// Users deleted.
    pub deletes: u64,
    /// Commands sent to the store during the run (client-side count), reads and writes.
    pub store_queries: u64,
    /// Wall time of the requests.
    pub elapsed: Duration,
    /// The filter's predicted false-positive rate at the end of the run.
    pub predicted_rate: f64,
}

impl Report {
    /// Requests per second, writes included.
    pub fn requests_per_second(&self) -> f64 {
        let requests = self.existing.requests
            + self.deleted.requests
            + self.missing.requests
            + self.creates
            + self.deletes;
        requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs `load` against a cold cache: its threads share `filter` (asked by reads only when
/// `use_filter`), and pick their keys from `population`, which is updated with the creates and
/// deletes. With `progress`, draws a progress bar on stderr.
pub fn run_load(
    setup: &Setup,
    filter: &Arc<CuckooFilter>,
    use_filter: bool,
    load: &Load,
    population: &mut Population,
    progress: bool,
) -> Result<Report, GuardError> {
    Cache::connect(setup)?.clear()?;
    let store_queries = Arc::new(AtomicU64::new(0));
    let next_id = Arc::new(AtomicU64::new(population.next_id));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads = load.threads.max(1);

    // Connect every thread before the clock starts; each owns every `threads`-th user, so
    // that no other thread deletes a user it reads as existing.
    let mut workers = Vec::with_capacity(threads);
    for t in 0..threads {
        let handler =
            Handler::connect(setup, Arc::clone(filter), use_filter, store_queries.clone())?;
        let owned = |ids: &[u64]| ids.iter().skip(t).step_by(threads).copied().collect();
        workers.push(Worker {
            handler,
            rng: Rng::new(load.seed ^ (t as u64).wrapping_mul(0xA076_1D64_78BD_642F)),
            live: owned(&population.live),
            deleted: owned(&population.deleted),
            requests: load.requests / threads as u64
                + u64::from((t as u64) < load.requests % threads as u64),
            next_id: Arc::clone(&next_id),
            done: Arc::clone(&done),
            stop: Arc::clone(&stop),
            outcome: Outcome::default(),
        });
    }

    let start = Instant::now();
    let handles: Vec<_> = workers
        .into_iter()
        .map(|mut worker| {
            let load = load.clone();
            thread::spawn(move || {
                let result = worker.run(&load);
                if result.is_err() {
                    // The others stop too: one failure ends the run.
                    worker.stop.store(true, Ordering::Relaxed);
                }
                result.map(|()| worker.outcome)
            })
        })
        .collect();
    let label = if use_filter {
        "with filter   "
    } else {
        "without filter"
    };
    while progress && !handles.iter().all(|h| h.is_finished()) {
        draw_progress(label, done.load(Ordering::Relaxed), load.requests, start);
        thread::sleep(Duration::from_millis(100));
    }
    let mut report = Report {
        used_filter: use_filter,
        ..Report::default()
    };
    let (mut live, mut deleted, mut failure) = (Vec::new(), Vec::new(), None);
    for handle in handles {
        match handle.join() {
            Ok(Ok(outcome)) => {
                report.existing.add(&outcome.existing);
                report.deleted.add(&outcome.deleted);
                report.missing.add(&outcome.missing);
                report.creates += outcome.creates;
                report.deletes += outcome.deletes;
                live.extend(outcome.live);
                deleted.extend(outcome.deleted_ids);
            }
            Ok(Err(e)) => failure = failure.or(Some(e)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    report.elapsed = start.elapsed();
    if progress {
        draw_progress(label, done.load(Ordering::Relaxed), load.requests, start);
        eprintln!();
    }
    if let Some(e) = failure {
        return Err(e);
    }
    report.store_queries = store_queries.load(Ordering::Relaxed);
    report.predicted_rate = filter.false_positive_rate();
    live.sort_unstable();
    deleted.sort_unstable();
    *population = Population {
        live,
        deleted,
        next_id: next_id.load(Ordering::Relaxed),
    };
    Ok(report)
}

/// One request thread.
struct Worker {
    handler: Handler,
    rng: Rng,
    /// The users this thread owns: only it reads them as existing, and only it deletes them.
    live: Vec<u64>,
    /// The users this thread deleted (or owned when they were deleted earlier).
    deleted: Vec<u64>,
    requests: u64,
    next_id: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    outcome: Outcome,
}

/// What one thread did.
#[derive(Default)]
struct Outcome {
    existing: Tally,
    deleted: Tally,
    missing: Tally,
    creates: u64,
    deletes: u64,
    live: Vec<u64>,
    deleted_ids: Vec<u64>,
}

/// Requests between updates of the shared progress count (one contended atomic add per
/// request would cost more than a refused read).
const PROGRESS_STEP: u64 = 256;

impl Worker {
    fn run(&mut self, load: &Load) -> Result<(), GuardError> {
        for i in 0..self.requests {
            if i % PROGRESS_STEP == PROGRESS_STEP - 1 {
                self.done.fetch_add(PROGRESS_STEP, Ordering::Relaxed);
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            self.request(load)?;
        }
        self.done
            .fetch_add(self.requests % PROGRESS_STEP, Ordering::Relaxed);
        self.outcome.live = std::mem::take(&mut self.live);
        self.outcome.deleted_ids = std::mem::take(&mut self.deleted);
        Ok(())
    }

    /// One request, drawn from the mix.
    fn request(&mut self, load: &Load) -> Result<(), GuardError> {
        if self.chance(load.writes) {
            return self.write();
        }
        if self.chance(load.missing) {
            let id = ATTACK_BASE + self.rng.below(u64::MAX - ATTACK_BASE);
            let answer = self.handler.read(&user_key(id))?;
            self.outcome.missing.count(&answer);
        } else if !self.deleted.is_empty() && self.chance(load.deleted / (1.0 - load.missing)) {
            let id = self.deleted[self.rng.below(self.deleted.len() as u64) as usize];
            let answer = self.handler.read(&user_key(id))?;
            self.outcome.deleted.count(&answer);
        } else if !self.live.is_empty() {
            let id = self.live[self.rng.below(self.live.len() as u64) as usize];
            let answer = self.handler.read(&user_key(id))?;
            self.outcome.existing.count(&answer);
        } else {
            return self.write();
        }
        Ok(())
    }

    /// Creates a user or deletes one of this thread's, half and half (always a create while
    /// it owns fewer than two).
    fn write(&mut self) -> Result<(), GuardError> {
        if self.live.len() < 2 || self.rng.below(2) == 0 {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            if self.handler.create(&user_key(id), &user_value(id))? {
                self.live.push(id);
                self.outcome.creates += 1;
            }
        } else {
            let index = self.rng.below(self.live.len() as u64) as usize;
            let id = self.live.swap_remove(index);
            if self.handler.delete(&user_key(id))? {
                self.deleted.push(id);
                self.outcome.deletes += 1;
            }
        }
        Ok(())
    }

    /// True with probability `share` (clamped to 0..=1).
    fn chance(&mut self, share: f64) -> bool {
        (self.rng.below(1 << 53) as f64) < share.clamp(0.0, 1.0) * (1u64 << 53) as f64
    }
}

/// `\r` and a bar: `label [#####-----]  50% 1000/2000 requests, 1234/s`.
fn draw_progress(label: &str, done: u64, total: u64, start: Instant) {
    const WIDTH: u64 = 30;
    let done = done.min(total);
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH) as usize;
    let rate = done as f64 / start.elapsed().as_secs_f64().max(1e-9);
    eprint!(
        "\r{label} [{}{}] {:>3}% {done}/{total} requests, {rate:.0}/s ",
        "#".repeat(filled),
        "-".repeat(WIDTH as usize - filled),
        (done * 100).checked_div(total).unwrap_or(100),
    );
    let _ = io::stderr().flush();
}

// ---- the program ----------------------------------------------------------------------------

struct Args {
    url: String,
    store_db: i64,
    users: u64,
    reset: bool,
    ttl: u64,
    bits: u32,
    snapshot: Option<PathBuf>,
    load: Load,
}

fn main() {
    let args = common::parse(USAGE, read_args);
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn read_args(p: &mut common::Parser) -> Result<Option<Args>, common::Error> {
    let mut args = Args {
        url: "redis://127.0.0.1:6379/".to_owned(),
        store_db: 1,
        users: 100_000,
        reset: false,
        ttl: 300,
        bits: 12,
        snapshot: None,
        load: Load {
            threads: 4,
            requests: 400_000,
            missing: 0.5,
            deleted: 0.05,
            writes: 0.01,
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x5eed, |d| d.as_nanos() as u64),
        },
    };
    while let Some(arg) = p.next()? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Long("url") => args.url = p.value()?.string()?,
            Long("store-db") => args.store_db = common::number(p.value()?, "--store-db")?,
            Long("users") => args.users = common::number(p.value()?, "--users")?,
            Long("reset") => args.reset = true,
            Long("requests") => args.load.requests = common::number(p.value()?, "--requests")?,
            Long("threads") => args.load.threads = common::number(p.value()?, "--threads")?,
            Long("missing") => args.load.missing = share(p.value()?, "--missing")?,
            Long("deleted") => args.load.deleted = share(p.value()?, "--deleted")?,
            Long("writes") => args.load.writes = share(p.value()?, "--writes")?,
            Long("ttl") => args.ttl = common::number(p.value()?, "--ttl")?,
            Long("fingerprint-bits") => {
                args.bits = common::number(p.value()?, "--fingerprint-bits")?;
            }
            Long("snapshot") => args.snapshot = Some(p.value()?.into()),
            Long("seed") => args.load.seed = common::number(p.value()?, "--seed")?,
            _ => return Err(arg.unexpected()),
        }
    }
    let check = |ok: bool, message: &str| if ok { Ok(()) } else { Err(message.to_owned()) };
    check(
        (1..=1024).contains(&args.load.threads),
        "--threads must be 1 to 1024",
    )?;
    check(args.load.requests > 0, "--requests must be at least 1")?;
    check(args.users < ATTACK_BASE, "--users must be below 2^40")?;
    check(args.ttl > 0, "--ttl must be at least 1")?;
    check(
        (4..=32).contains(&args.bits),
        "--fingerprint-bits must be 4 to 32",
    )?;
    check(
        args.load.missing + args.load.deleted <= 1.0,
        "--missing and --deleted add up to more than 1",
    )?;
    check(args.store_db >= 0, "--store-db must be 0 or more")?;
    Setup::new(&args.url, args.store_db, args.ttl)?;
    Ok(Some(args))
}

/// A share, `0` to `1`.
fn share(value: std::ffi::OsString, name: &str) -> Result<f64, common::Error> {
    let share: f64 = common::number(value, name)?;
    if (0.0..=1.0).contains(&share) {
        Ok(share)
    } else {
        Err(format!("bad value {share} for {name}: a share is 0 to 1").into())
    }
}

fn run(args: &Args) -> Result<(), GuardError> {
    let setup = Setup::new(&args.url, args.store_db, args.ttl).unwrap_or_else(|e| common::fail(e)); // checked by read_args already
    let queries = Arc::new(AtomicU64::new(0));
    let mut store = Store::connect(&setup, queries).unwrap_or_else(|e| {
        eprintln!("error: cannot connect to {}: {e}", args.url);
        std::process::exit(1)
    });

    let (mut keys, calls) = store.keys()?;
    if args.reset || keys.is_empty() {
        store.fill(args.users)?;
        Cache::connect(&setup)?.clear()?;
        keys = (0..args.users).map(user_key).collect();
        println!(
            "store: filled DB {} with {} users",
            args.store_db, args.users
        );
    } else {
        println!(
            "store: DB {} holds {} users ({calls} SCAN calls)",
            args.store_db,
            keys.len()
        );
    }

    let start = Instant::now();
    let (filter, origin) = open_filter(&mut store, &keys, args.snapshot.as_deref(), args.bits)?;
    let took = start.elapsed().as_secs_f64() * 1e3;
    match origin {
        Origin::Restored => println!("filter: restored from the snapshot in {took:.1} ms"),
        Origin::Built(why) => println!(
            "filter: built from the store's {} keys with insert_many in {took:.1} ms ({why})",
            keys.len()
        ),
    }
    let filter = Arc::new(filter);
    println!(
        "filter: {} keys, {}-bit fingerprints, {} KiB, load {:.1} %, predicted false-positive \
         rate {:.3} %",
        filter.len(),
        filter.fingerprint_bits(),
        filter.memory_usage() / 1024,
        filter.load_factor() * 100.0,
        filter.false_positive_rate() * 100.0
    );

    let load = &args.load;
    println!(
        "load: {} requests per run, {} threads; reads {:.0} % missing (random ids), {:.0} % \
         deleted, the rest existing; {:.0} % writes; cache TTL {} s; seed {}",
        load.requests,
        load.threads,
        load.missing * 100.0,
        load.deleted * 100.0,
        load.writes * 100.0,
        args.ttl,
        load.seed
    );
    let progress = io::stderr().is_terminal();
    let mut population = Population::from_keys(&keys);
    let guarded = run_load(&setup, &filter, true, load, &mut population, progress)?;
    let unguarded = run_load(&setup, &filter, false, load, &mut population, progress)?;
    print_report(&guarded, &unguarded);

    if let Some(path) = &args.snapshot {
        let bytes = save_snapshot(&filter, &mut store, path)?;
        println!("snapshot: saved {bytes} bytes to {}", path.display());
    }
    Ok(())
}

/// The two runs side by side.
fn print_report(with: &Report, without: &Report) {
    let pct = |part: u64, whole: u64| format!("{:.3} %", part as f64 * 100.0 / whole.max(1) as f64);
    let row = |name: &str, a: String, b: String| println!("{name:<40}{a:>16}{b:>16}");
    println!();
    row("", "with filter".into(), "without filter".into());
    row(
        "requests per second",
        format!("{:.0}", with.requests_per_second()),
        format!("{:.0}", without.requests_per_second()),
    );
    for (name, a, b) in [
        ("missing-key requests", &with.missing, &without.missing),
        ("deleted-key requests", &with.deleted, &without.deleted),
        ("existing-key requests", &with.existing, &without.existing),
    ] {
        row(name, a.requests.to_string(), b.requests.to_string());
        row(
            "  reached Redis",
            pct(a.reached_redis, a.requests),
            pct(b.reached_redis, b.requests),
        );
        row(
            "  reached the store",
            pct(a.reached_store, a.requests),
            pct(b.reached_store, b.requests),
        );
        row(
            "  refused by the filter",
            a.refused.to_string(),
            b.refused.to_string(),
        );
    }
    row(
        "creates / deletes",
        format!("{} / {}", with.creates, with.deletes),
        format!("{} / {}", without.creates, without.deletes),
    );
    row(
        "store queries (client-side count)",
        with.store_queries.to_string(),
        without.store_queries.to_string(),
    );
    println!(
        "filter's predicted false-positive rate: {:.3} % (at the end of the run with it)",
        with.predicted_rate * 100.0
    );
}
