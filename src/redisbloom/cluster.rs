//! A [`ShardedFilter`] in Redis: its export (every shard in one `RESTORE`, then the manifest
//! that makes the new generation visible at once), its import, and [`ClusterFilter`], which
//! queries the shards in place. Works through a plain connection (every shard on one server)
//! or the `redis` crate's cluster connection, which sends each command to its key's node.
//!
//! `docs/SHARDED.md` describes the names, the manifest and the rule for clients in other
//! languages.

use std::fmt;
use std::time::Duration;

use redis::{ConnectionLike, Value};

use super::bridge::{
    check_exportable, expect_int, expect_ok, import_by_dump, max_bulk_len, refusal, restore,
    server_text, show, BridgeError, Session,
};
use super::filter::RedisCuckooFilter;
use super::hash::ItemHash;
use super::manifest::{ledger_key, valid_name, Ledger, Manifest, MAX_NAME_LEN};
use super::sharded::{shard_of_hash, ShardedFilter};

/// Items per `CF.MEXISTS` or `CF.INSERT` command of [`ClusterFilter`]'s batch calls.
const ITEMS_PER_COMMAND: usize = 1_000;

/// Commands of one shard per round trip (a pipeline: they share the key's slot, so a cluster
/// connection sends them to its node together).
const COMMANDS_PER_FLUSH: usize = 100;

/// Generations an export skips whose shard names are taken by keys it did not write, before
/// it gives up (`ClusterError::Shard` with `BridgeError::KeyExists`).
const SKIPPED_GENERATIONS: u32 = 8;

/// Times [`ShardedFilter::import_from`] reads the manifest again when a shard it names is gone
/// (a newer export retired it meanwhile).
const IMPORT_ATTEMPTS: u32 = 3;

/// The longest expiry given, in milliseconds (about 31,700 years): Redis refuses one whose
/// deadline overflows.
const MAX_EXPIRY_MS: u64 = 1_000_000_000_000_000;

/// RedisBloom's type name for a cuckoo filter, as `TYPE` answers it.
const CUCKOO_TYPE: &str = "MBbloomCF";

/// How [`ShardedFilter::export_to`] publishes a filter.
///
/// ```
/// use std::time::Duration;
///
/// use atomic_cuckoo::redisbloom::ClusterExport;
///
/// let options = ClusterExport::default().grace(Duration::from_secs(300));
/// assert_eq!(options.grace_period(), Duration::from_secs(300));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct ClusterExport {
    grace: Duration,
}

impl Default for ClusterExport {
    /// The generation an export replaces expires one minute after the switch.
    fn default() -> Self {
        ClusterExport {
            grace: Duration::from_secs(60),
        }
    }
}

impl ClusterExport {
    /// How long the shard keys of the generation an export replaces live after the new one is
    /// published: long enough for queries that read the old manifest to finish. Rounded to
    /// milliseconds, at least 1 ms and at most about 31,700 years.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The grace period set.
    pub fn grace_period(&self) -> Duration {
        self.grace
    }
}

/// Milliseconds of `d`, from 1 (an expiry of 0 deletes the key at once) to `MAX_EXPIRY_MS`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, MAX_EXPIRY_MS)
}

/// What [`ShardedFilter::export_to`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct ClusterExportSummary {
    /// The generation published.
    pub generation: u64,
    /// Its shard keys, in shard order.
    pub keys: Vec<String>,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Commands sent.
    pub commands: u64,
    /// Round trips.
    pub round_trips: u64,
    /// Keys of replaced or failed generations that could not be given their expiry (their
    /// node did not answer). The filter's ledger keeps them, and the next export tries again.
    pub unretired: Vec<String>,
}

/// Why an operation on a sharded filter in Redis failed. Each error names the key (and for a
/// shard, its index, slot and, where the cluster said, its node).
#[derive(Debug)]
#[non_exhaustive]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub enum ClusterError {
    /// The filter's name is not 1 to 200 bytes of printable ASCII without `{` and `}`.
    BadName {
        /// The name given.
        name: String,
    },
    /// No filter has this name: its manifest key does not exist.
    NoFilter {
        /// The manifest key (the name).
        key: String,
    },
    /// The name's key, or its ledger's, holds something other than this crate wrote there
    /// (another type, or text that is not a manifest or a ledger, or a manifest whose keys
    /// are not the rule's). An export never overwrites it.
    NotAManifest {
        /// The key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Reading or writing the manifest (or the ledger beside it) failed. During an export,
    /// nothing was published, unless the error is a [`BridgeError::Connection`] on the switch
    /// itself and reading the manifest back failed too: then the manifest names either
    /// generation, each whole (read it again with [`ClusterFilter::open`]).
    Manifest {
        /// The manifest key.
        key: String,
        /// What failed.
        error: BridgeError,
    },
    /// A shard's key failed: a node without the RedisBloom module, a refusal (`OOM`,
    /// `proto-max-bulk-len`), a lost connection, a key of another type, a key that exists
    /// already (export), or a key that is missing (import, queries). During an export,
    /// nothing was published.
    Shard {
        /// The shard's index.
        shard: usize,
        /// Its key.
        key: String,
        /// The key's hash slot.
        slot: u16,
        /// The node that serves the slot (`host:port`), where the cluster said (boxed, to keep
        /// the error small).
        node: Option<Box<str>>,
        /// What failed.
        error: BridgeError,
    },
    /// [`ClusterFilter::insert_many`] wrote into a generation that a newer export has
    /// replaced: its items are in keys that expire. Open the filter again and insert them
    /// there.
    Retired {
        /// The filter's name.
        name: String,
        /// The generation written.
        generation: u64,
        /// A key of it that has an expiry.
        key: String,
    },
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::BadName { name } => write!(
                f,
                "{name:?} cannot name a sharded filter: 1 to {MAX_NAME_LEN} bytes of printable \
                 ASCII without braces"
            ),
            ClusterError::NoFilter { key } => write!(f, "no sharded filter at {key:?}"),
            ClusterError::NotAManifest { key, problem } => write!(
                f,
                "key {key:?} holds no sharded filter's manifest or ledger: {problem}"
            ),
            ClusterError::Manifest { key, error } => write!(f, "manifest {key:?}: {error}"),
            ClusterError::Shard {
                shard,
                key,
                slot,
                node,
                error,
            } => {
                write!(f, "shard {shard} ({key:?}, slot {slot}")?;
                if let Some(node) = node {
                    write!(f, ", node {node}")?;
                }
                write!(f, "): {error}")
            }
            ClusterError::Retired {
                name,
                generation,
                key,
            } => write!(
                f,
                "generation {generation} of {name:?} was replaced ({key:?} expires): open the \
                 filter again and insert into the new generation"
            ),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Manifest { error, .. } | ClusterError::Shard { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Counts of commands and round trips over several sessions.
#[derive(Default)]
struct Tally {
    commands: u64,
    round_trips: u64,
}

impl Tally {
    fn add(&mut self, session: &Session<'_>) {
        self.commands += session.commands;
        self.round_trips += session.round_trips;
    }
}

/// The error of shard `shard` of `manifest`, with its slot and, where the cluster says, its
/// node.
fn shard_error(
    conn: &mut dyn ConnectionLike,
    manifest: &Manifest,
    shard: usize,
    error: BridgeError,
) -> ClusterError {
    let slot = manifest.slot(shard);
    ClusterError::Shard {
        shard,
        key: manifest.keys[shard].clone(),
        slot,
        node: node_of_slot(conn, slot).map(String::into_boxed_str),
        error,
    }
}

/// The `host:port` of the master that serves `slot`, from `CLUSTER SLOTS`; `None` on a server
/// without cluster mode, or where the reply says nothing clear.
fn node_of_slot(conn: &mut dyn ConnectionLike, slot: u16) -> Option<String> {
    let Ok(Value::Array(ranges)) = conn.req_command(redis::cmd("CLUSTER").arg("SLOTS")) else {
        return None;
    };
    ranges.into_iter().find_map(|range| {
        let Value::Array(fields) = range else {
            return None;
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return None;
        };
        if !(*start..=*end).contains(&i64::from(slot)) {
            return None;
        }
        match (master.first(), master.get(1)) {
            (Some(Value::BulkString(host)), Some(Value::Int(port))) => {
                Some(format!("{}:{port}", String::from_utf8_lossy(host)))
            }
            _ => None,
        }
    })
}

fn manifest_error(name: &str, error: BridgeError) -> ClusterError {
    ClusterError::Manifest {
        key: name.to_owned(),
        error,
    }
}

fn not_ours(key: &str, problem: String) -> ClusterError {
    ClusterError::NotAManifest {
        key: key.to_owned(),
        problem,
    }
}

/// `GET key`: its text, or `None` if the key does not exist.
fn get_text(
    conn: &mut dyn ConnectionLike,
    name: &str,
    key: &str,
    tally: &mut Tally,
) -> Result<Option<Vec<u8>>, ClusterError> {
    let mut session = Session::new(conn, key.as_bytes());
    let reply = session.raw("GET", redis::cmd("GET").arg(key));
    tally.add(&session);
    match reply.map_err(|error| manifest_error(name, error))? {
        Ok(Value::Nil) => Ok(None),
        Ok(Value::BulkString(text)) => Ok(Some(text)),
        Ok(other) => Err(not_ours(key, format!("GET answered {other:?}"))),
        Err(message) if message.starts_with("WRONGTYPE") => Err(not_ours(key, message)),
        Err(message) => Err(manifest_error(
            name,
            refusal("GET", key.as_bytes(), message),
        )),
    }
}

/// The manifest at `name`: `None` if the key does not exist.
fn read_manifest(
    conn: &mut dyn ConnectionLike,
    name: &str,
    tally: &mut Tally,
) -> Result<Option<Manifest>, ClusterError> {
    get_text(conn, name, name, tally)?
        .map(|text| Manifest::parse(&text, name).map_err(|problem| not_ours(name, problem)))
        .transpose()
}

/// The ledger of `name` (empty if there is none).
fn read_ledger(
    conn: &mut dyn ConnectionLike,
    name: &str,
    tally: &mut Tally,
) -> Result<Ledger, ClusterError> {
    let key = ledger_key(name);
    Ok(match get_text(conn, name, &key, tally)? {
        Some(text) => Ledger::parse(&text, name).map_err(|problem| not_ours(&key, problem))?,
        None => Ledger::default(),
    })
}

fn check_name(name: &str) -> Result<(), ClusterError> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(ClusterError::BadName {
            name: name.to_owned(),
        })
    }
}

/// Before a new shard key is written: its node has the RedisBloom module (`CF.EXISTS` of an
/// item answers there; a node without it: `unknown command`), and the key does not exist
/// (`EXISTS`: an export never overwrites a key).
fn check_new_key(session: &mut Session<'_>, key: &str) -> Result<(), BridgeError> {
    let probe = redis::cmd("CF.EXISTS").arg(key).arg("probe").to_owned();
    let reply = session.call("CF.EXISTS", &probe)?;
    expect_int(session, "CF.EXISTS", reply)?;
    let reply = session.call("EXISTS", redis::cmd("EXISTS").arg(key))?;
    match expect_int(session, "EXISTS", reply)? {
        0 => Ok(()),
        _ => Err(BridgeError::KeyExists {
            key: key.to_owned(),
            message: None,
        }),
    }
}

/// `check_new_key` of every key of `manifest`; the first shard that fails, and why.
fn check_new_keys(
    conn: &mut dyn ConnectionLike,
    manifest: &Manifest,
    tally: &mut Tally,
) -> Result<(), (usize, BridgeError)> {
    for (shard, key) in manifest.keys.iter().enumerate() {
        let mut session = Session::new(conn, key.as_bytes());
        let checked = check_new_key(&mut session, key);
        tally.add(&session);
        checked.map_err(|error| (shard, error))?;
    }
    Ok(())
}

/// Whether `key` holds a cuckoo filter without an expiry: after a `RESTORE` that answered
/// `BUSYKEY`, the key this export wrote, whose first `RESTORE` ran before its reply was lost
/// and which the client sent again (the key was checked free before the ledger named it, so
/// another writer would have had to put a cuckoo filter exactly there in between).
fn holds_our_filter(session: &mut Session<'_>, key: &str) -> bool {
    let kind = session.call("TYPE", redis::cmd("TYPE").arg(key));
    let ttl = session.call("PTTL", redis::cmd("PTTL").arg(key));
    let is_filter = match kind {
        Ok(Value::SimpleString(kind)) => kind == CUCKOO_TYPE,
        Ok(Value::BulkString(kind)) => kind == CUCKOO_TYPE.as_bytes(),
        _ => false,
    };
    is_filter && matches!(ttl, Ok(Value::Int(-1)))
}

/// `PEXPIRE key ms` of each key; the keys whose node did not take it.
fn expire_all<'k>(
    conn: &mut dyn ConnectionLike,
    keys: impl IntoIterator<Item = &'k String>,
    ms: u64,
    tally: &mut Tally,
) -> Vec<String> {
    let ms = ms.to_string();
    on_each_key(
        conn,
        keys,
        "PEXPIRE",
        |key| redis::cmd("PEXPIRE").arg(key).arg(&ms).to_owned(),
        tally,
    )
}

/// `command` (as `cmd` writes it) on each key, one at a time; the keys it failed on.
fn on_each_key<'k>(
    conn: &mut dyn ConnectionLike,
    keys: impl IntoIterator<Item = &'k String>,
    command: &'static str,
    cmd: impl Fn(&str) -> redis::Cmd,
    tally: &mut Tally,
) -> Vec<String> {
    let mut failed = Vec::new();
    for key in keys {
        let mut session = Session::new(conn, key.as_bytes());
        if session.call(command, &cmd(key)).is_err() {
            failed.push(key.clone());
        }
        tally.add(&session);
    }
    failed
}

/// `SET` of the ledger alone.
fn write_ledger(
    conn: &mut dyn ConnectionLike,
    name: &str,
    ledger: &Ledger,
    tally: &mut Tally,
) -> Result<(), BridgeError> {
    let key = ledger_key(name);
    let mut session = Session::new(conn, key.as_bytes());
    let set = redis::cmd("SET").arg(&key).arg(ledger.to_text()).to_owned();
    let written = session
        .call("SET", &set)
        .and_then(|reply| expect_ok(&session, "SET", reply));
    tally.add(&session);
    written
}

/// The switch: the manifest and the ledger in one transaction (they share a hash slot).
fn write_manifest_and_ledger(
    conn: &mut dyn ConnectionLike,
    name: &str,
    manifest: &Manifest,
    ledger: &Ledger,
    tally: &mut Tally,
) -> Result<(), BridgeError> {
    let mut session = Session::new(conn, name.as_bytes());
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("SET")
        .arg(name)
        .arg(manifest.to_text())
        .cmd("SET")
        .arg(ledger_key(name))
        .arg(ledger.to_text());
    let replies = session.pipeline("SET", &mut pipe);
    tally.add(&session);
    for reply in replies?.unwrap_or_default() {
        expect_ok(&session, "SET", reply)?;
    }
    Ok(())
}

impl ShardedFilter {
    /// Publishes the filter as `name` in Redis: each shard in one `RESTORE` to a key of its
    /// own (replicas and the AOF get it whole), then the manifest at `name`, which readers use
    /// to find the shards. Readers see the previous generation until the manifest is written,
    /// and this one after: never a mix of both, never a shard missing.
    ///
    /// Besides the manifest, the filter has a **ledger** (`{name}:ledger`, in the manifest's
    /// hash slot), which names every shard key that an export wrote or replaced and that may
    /// still have no expiry. The steps, and what a failure at each leaves:
    ///
    /// 1. Reads the manifest and the ledger; gives the keys the ledger holds from earlier
    ///    failed exports an expiry of [`grace`](ClusterExport::grace); checks that every new
    ///    shard key's node has the RedisBloom module and that the key does not exist.
    /// 2. Writes the ledger, naming the new generation's keys, before writing any. The
    ///    generation is one more than any started before (the ledger keeps that number), and
    ///    one whose names are taken by keys this export did not write is skipped.
    /// 3. Writes each shard with `RESTORE` (no expiry). A failure deletes the shards written;
    ///    the previous generation stays visible, and what cannot be deleted stays in the
    ///    ledger for the next export.
    /// 4. Writes the manifest of the new generation and the ledger, now naming the previous
    ///    generation's keys, in one transaction: the moment of publishing. If its reply is
    ///    lost, the manifest is read back to learn which generation it names.
    /// 5. Gives the previous generation's keys an expiry of [`grace`](ClusterExport::grace),
    ///    then writes the ledger without them.
    ///
    /// So every key without an expiry is named by the manifest or the ledger, whatever fails
    /// when. Each shard is copied at its own moment (writers of that shard wait while it is
    /// copied): to publish one moment of the whole filter, let no writer run during the
    /// export. One export of a name at a time.
    ///
    /// # Errors
    ///
    /// [`ClusterError::BadName`]; [`ClusterError::NotAManifest`] if `name` or its ledger key
    /// holds something else (it is left alone); [`ClusterError::Shard`] with the shard, its
    /// key, slot and node for a node without the module, a key that exists already, a refused
    /// `RESTORE` (`OOM`, a payload over `proto-max-bulk-len`), a lost connection;
    /// [`ClusterError::Manifest`].
    ///
    /// ```no_run
    /// use atomic_cuckoo::redisbloom::{ClusterExport, ClusterFilter, ShardedFilter};
    ///
    /// let filter = ShardedFilter::reserve(10_000_000, 3)?;
    /// filter.insert_many((0..1_000u32).map(|i| i.to_string()))?;
    /// // A cluster connection (the `redis` crate's `cluster` feature) routes each shard to its
    /// // node: `redis::cluster::ClusterClient::new(nodes)?.get_connection()?`. Here, one server.
    /// let mut conn = redis::Client::open("redis://127.0.0.1:6379/")?.get_connection()?;
    /// let summary = filter.export_to(&mut conn, "ids", &ClusterExport::default())?;
    /// println!("generation {} in {:?}", summary.generation, summary.keys);
    /// let remote = ClusterFilter::open(&mut conn, "ids")?;
    /// assert!(remote.contains(&mut conn, "7")?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn export_to(
        &self,
        conn: &mut dyn ConnectionLike,
        name: &str,
        options: &ClusterExport,
    ) -> Result<ClusterExportSummary, ClusterError> {
        check_name(name)?;
        let grace = millis(options.grace);
        let mut tally = Tally::default();
        let previous = read_manifest(conn, name, &mut tally)?;
        let ledger = read_ledger(conn, name, &mut tally)?;
        let current: &[String] = previous.as_ref().map_or(&[], |m| &m.keys);
        // 1. Leftovers of failed exports get their expiry.
        let leftovers = ledger.keys.iter().filter(|key| !current.contains(key));
        let owed = expire_all(conn, leftovers, grace, &mut tally);
        let started = ledger
            .started
            .max(previous.as_ref().map_or(0, |m| m.generation));
        let next = |generation: u64| {
            generation.checked_add(1).ok_or_else(|| {
                not_ours(name, format!("generation {generation} cannot be followed"))
            })
        };
        // A generation whose names are taken (keys this export did not write) is skipped.
        let mut generation = next(started)?;
        let mut skipped = 0;
        let manifest = loop {
            let manifest = Manifest::new(name, generation, self.shards().len());
            match check_new_keys(conn, &manifest, &mut tally) {
                Ok(()) => break manifest,
                Err((_, BridgeError::KeyExists { .. })) if skipped < SKIPPED_GENERATIONS => {
                    skipped += 1;
                    generation = next(generation)?;
                }
                Err((shard, error)) => return Err(shard_error(conn, &manifest, shard, error)),
            }
        };
        // 2. The ledger names the new keys before any is written.
        let mut pending = Ledger {
            started: generation,
            keys: owed.iter().chain(&manifest.keys).cloned().collect(),
        };
        write_ledger(conn, name, &pending, &mut tally).map_err(|e| manifest_error(name, e))?;
        // 3. The shards.
        let max_bulk = single_server_max_bulk(conn, name, &mut tally)?;
        let mut bytes = 0;
        for (shard, filter) in self.shards().iter().enumerate() {
            let key = manifest.keys[shard].as_bytes();
            let mut session = Session::new(conn, key);
            let written = match write_shard(&mut session, filter, max_bulk) {
                Err(BridgeError::KeyExists { .. })
                    if holds_our_filter(&mut session, &manifest.keys[shard]) =>
                {
                    Ok(0)
                }
                written => written,
            };
            tally.add(&session);
            match written {
                Ok(sent) => bytes += sent,
                Err(error) => {
                    // The failed shard's key too (its RESTORE may have run before a lost
                    // reply), unless another writer's key took its name.
                    let ours = if matches!(error, BridgeError::KeyExists { .. }) {
                        shard
                    } else {
                        shard + 1
                    };
                    let failed = shard_error(conn, &manifest, shard, error);
                    let kept = delete_all(conn, &manifest.keys[..ours], &mut tally);
                    settle_ledger(conn, name, generation, owed, kept, &mut tally);
                    return Err(failed);
                }
            }
        }
        // 4. The switch.
        pending.keys = owed.iter().chain(current).cloned().collect();
        if let Err(error) = write_manifest_and_ledger(conn, name, &manifest, &pending, &mut tally) {
            // A lost reply: read back which generation the manifest names (if that fails too,
            // either is whole, and the ledger names the other's keys).
            let switched = matches!(error, BridgeError::Connection(_))
                && match read_manifest(conn, name, &mut tally) {
                    Ok(now) => now.is_some_and(|m| m.generation == generation),
                    Err(_) => return Err(manifest_error(name, error)),
                };
            if !switched {
                let kept = delete_all(conn, &manifest.keys, &mut tally);
                settle_ledger(conn, name, generation, owed, kept, &mut tally);
                return Err(manifest_error(name, error));
            }
        }
        // 5. The previous generation expires.
        let unretired = expire_all(conn, &pending.keys, grace, &mut tally);
        pending.keys = unretired.clone();
        // Best effort: a ledger that still names retired keys only has them expired again.
        let _ = write_ledger(conn, name, &pending, &mut tally);
        Ok(ClusterExportSummary {
            generation,
            keys: manifest.keys,
            bytes,
            commands: tally.commands,
            round_trips: tally.round_trips,
            unretired,
        })
    }

    /// Reads the sharded filter `name` from Redis: the manifest, then each shard it names (as
    /// [`RedisCuckooFilter::import_from`] reads one key). If a shard is gone because a newer
    /// export replaced the generation meanwhile, it starts again from the new manifest.
    ///
    /// # Errors
    ///
    /// [`ClusterError::BadName`], [`ClusterError::NoFilter`],
    /// [`ClusterError::NotAManifest`], [`ClusterError::Manifest`]; [`ClusterError::Shard`]
    /// for a shard that is missing (the manifest names a key that is not there) or cannot be
    /// read.
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn import_from(
        conn: &mut dyn ConnectionLike,
        name: &str,
    ) -> Result<ShardedFilter, ClusterError> {
        check_name(name)?;
        let mut tally = Tally::default();
        let mut attempt = 0;
        'manifest: loop {
            attempt += 1;
            let manifest =
                read_manifest(conn, name, &mut tally)?.ok_or_else(|| ClusterError::NoFilter {
                    key: name.to_owned(),
                })?;
            let mut shards = Vec::with_capacity(manifest.keys.len());
            for (shard, key) in manifest.keys.iter().enumerate() {
                match import_shard(conn, key) {
                    Ok(filter) => shards.push(filter),
                    Err(BridgeError::MissingKey { .. })
                        if attempt < IMPORT_ATTEMPTS
                            && read_manifest(conn, name, &mut tally)?
                                .is_some_and(|now| now.generation != manifest.generation) =>
                    {
                        continue 'manifest
                    }
                    Err(error) => return Err(shard_error(conn, &manifest, shard, error)),
                }
            }
            // A manifest names 1 to MAX_SHARDS shards.
            return ShardedFilter::from_shards(shards).map_err(|e| not_ours(name, e.to_string()));
        }
    }
}

/// The `proto-max-bulk-len` of a server without cluster mode, which holds every shard, so that
/// a shard too long for it is refused before it is sent (the server would close the
/// connection). `None` in a cluster: `CONFIG GET` goes to one node, not to each shard's (there,
/// the node refuses the shard with `Protocol error: invalid bulk length` and closes the
/// connection, which a cluster connection opens again).
fn single_server_max_bulk(
    conn: &mut dyn ConnectionLike,
    name: &str,
    tally: &mut Tally,
) -> Result<Option<u64>, ClusterError> {
    let mut session = Session::new(conn, name.as_bytes());
    let cluster = session
        .raw("CLUSTER", redis::cmd("CLUSTER").arg("INFO"))
        .map_err(|error| manifest_error(name, error))?
        .is_ok();
    let max_bulk = if cluster {
        None
    } else {
        max_bulk_len(&mut session).map_err(|error| manifest_error(name, error))?
    };
    tally.add(&session);
    Ok(max_bulk)
}

/// One shard, as [`RedisCuckooFilter::import_from`] reads a key; where the key's slot is
/// migrating and the key has moved, its node answers `ASK` to the `WATCH`ed transaction, which
/// a cluster connection does not redirect: then one `DUMP`, which it does.
fn import_shard(
    conn: &mut dyn ConnectionLike,
    key: &str,
) -> Result<RedisCuckooFilter, BridgeError> {
    match RedisCuckooFilter::import_from(conn, key) {
        Err(BridgeError::Refused { message, .. })
            if message.starts_with("ASK ") || message.contains("error: Ask") =>
        {
            import_by_dump(&mut Session::new(conn, key.as_bytes()))
        }
        other => other,
    }
}

/// Writes one shard's `RESTORE` (without `REPLACE`: the key was checked to be free), refused
/// here if longer than `max_bulk`; the payload bytes sent.
fn write_shard(
    session: &mut Session<'_>,
    filter: &RedisCuckooFilter,
    max_bulk: Option<u64>,
) -> Result<u64, BridgeError> {
    let (header, data) = filter.snapshot();
    check_exportable(&header, &data).map_err(|error| BridgeError::Inconsistent {
        key: show(session.key),
        error,
    })?;
    restore(session, &header, &data, false, 0, max_bulk).map(|(bytes, _)| bytes)
}

/// After a failure: deletes `keys`; those it could not delete.
fn delete_all(conn: &mut dyn ConnectionLike, keys: &[String], tally: &mut Tally) -> Vec<String> {
    on_each_key(
        conn,
        keys,
        "DEL",
        |key| redis::cmd("DEL").arg(key).to_owned(),
        tally,
    )
}

/// After a failed export: the ledger keeps the generation started (its names are never used
/// again), the earlier debts and the keys that could not be deleted. Best effort: a ledger
/// left naming more keys only has them expired by the next export.
fn settle_ledger(
    conn: &mut dyn ConnectionLike,
    name: &str,
    started: u64,
    owed: Vec<String>,
    kept: Vec<String>,
    tally: &mut Tally,
) {
    let keys = owed.into_iter().chain(kept).collect();
    let _ = write_ledger(conn, name, &Ledger { started, keys }, tally);
}

/// A sharded filter in Redis, queried in place: the generation its manifest named when it was
/// opened, and the rule that sends each item to its shard's key.
///
/// Queries of a generation that a newer export has retired fail with
/// [`ClusterError::Shard`] (a missing key) once its keys expire: open the filter again.
///
/// ```no_run
/// use atomic_cuckoo::redisbloom::ClusterFilter;
///
/// // Or a cluster connection: `redis::cluster::ClusterClient::new(nodes)?.get_connection()?`.
/// let mut conn = redis::Client::open("redis://127.0.0.1:6379/")?.get_connection()?;
/// let ids = ClusterFilter::open(&mut conn, "ids")?;
/// let mut found = Vec::new();
/// ids.contains_many(&mut conn, ["7", "8"], &mut found)?;
/// println!("{found:?} in generation {}", ids.generation());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct ClusterFilter {
    name: String,
    manifest: Manifest,
}

impl ClusterFilter {
    /// Reads the manifest of the sharded filter `name`.
    ///
    /// # Errors
    ///
    /// [`ClusterError::BadName`], [`ClusterError::NoFilter`],
    /// [`ClusterError::NotAManifest`], [`ClusterError::Manifest`].
    pub fn open(conn: &mut dyn ConnectionLike, name: &str) -> Result<Self, ClusterError> {
        check_name(name)?;
        let manifest = read_manifest(conn, name, &mut Tally::default())?.ok_or_else(|| {
            ClusterError::NoFilter {
                key: name.to_owned(),
            }
        })?;
        Ok(ClusterFilter {
            name: name.to_owned(),
            manifest,
        })
    }

    /// The filter's name (its manifest key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The generation the manifest named.
    pub fn generation(&self) -> u64 {
        self.manifest.generation
    }

    /// The shard keys, in shard order.
    pub fn keys(&self) -> &[String] {
        &self.manifest.keys
    }

    /// The shard that holds `item` (see [`ShardedFilter::shard_of`]).
    pub fn shard_of(&self, item: impl AsRef<[u8]>) -> usize {
        shard_of_hash(ItemHash::of(item.as_ref()).h1, self.manifest.keys.len())
    }

    /// `CF.EXISTS` on the item's shard key.
    ///
    /// # Errors
    ///
    /// As [`contains_many`](ClusterFilter::contains_many).
    pub fn contains(
        &self,
        conn: &mut dyn ConnectionLike,
        item: impl AsRef<[u8]>,
    ) -> Result<bool, ClusterError> {
        let mut found = Vec::with_capacity(1);
        self.contains_many(conn, [item], &mut found)?;
        Ok(found[0])
    }

    /// Whether each item may be in the filter: `results` is cleared and receives the answers
    /// in order. The items are grouped by shard; each shard gets one round trip per 100,000
    /// of its items, a pipeline of `CF.MEXISTS key items…` of 1,000 items each, then
    /// `TYPE key`: `CF.MEXISTS` answers 0 for every item of a key that is gone (a replaced
    /// generation's, once it expired) or holds another type, and a key that is a cuckoo filter
    /// after the lookups was one during them.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Shard`] naming the shard, its key, slot and node: a missing key
    /// ([`BridgeError::MissingKey`]: open the filter again), a node without the module, a
    /// lost connection.
    pub fn contains_many<I>(
        &self,
        conn: &mut dyn ConnectionLike,
        items: I,
        results: &mut Vec<bool>,
    ) -> Result<(), ClusterError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        results.clear();
        self.per_shard(conn, items, results, false, |reply| match reply {
            Value::Int(n) => Some(n == 1),
            Value::Boolean(b) => Some(b),
            _ => None,
        })
    }

    /// `CF.INSERT key NOCREATE ITEMS …` of each item on its shard key: `true` if it was
    /// stored, `false` if its shard had no room (Redis's `-1`). Grouped and pipelined as
    /// [`contains_many`](ClusterFilter::contains_many) sends them; the shards are written
    /// one after the other, so after an error the earlier shards have their items, and the
    /// failing shard may have some of its own. Each round trip ends with `PTTL key`: a shard
    /// key with an expiry belongs to a generation that a newer export replaced, whose items
    /// readers no longer see.
    ///
    /// An export of the same name publishes the exporting filter, not what was inserted here:
    /// items inserted while an export runs may be in neither.
    ///
    /// # Errors
    ///
    /// As [`contains_many`](ClusterFilter::contains_many); [`ClusterError::Retired`] when the
    /// generation was replaced (open the filter again and insert the items again); a shard that
    /// refuses (`Maximum expansions reached`) is [`BridgeError::Refused`].
    pub fn insert_many<I>(
        &self,
        conn: &mut dyn ConnectionLike,
        items: I,
    ) -> Result<Vec<bool>, ClusterError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let mut results = Vec::new();
        self.per_shard(conn, items, &mut results, true, |reply| match reply {
            Value::Int(n) => Some(n == 1),
            // RESP3 answers with booleans.
            Value::Boolean(b) => Some(b),
            _ => None,
        })?;
        Ok(results)
    }

    /// Sends the items to their shards, `CF.INSERT … NOCREATE ITEMS` (`insert`) or
    /// `CF.MEXISTS` with an `EXISTS` check, and puts each item's answer (`answer` of its
    /// reply) at its place in `results`.
    fn per_shard<I>(
        &self,
        conn: &mut dyn ConnectionLike,
        items: I,
        results: &mut Vec<bool>,
        insert: bool,
        answer: impl Fn(Value) -> Option<bool>,
    ) -> Result<(), ClusterError>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let items: Vec<I::Item> = items.into_iter().collect();
        let shards = self.manifest.keys.len();
        // Each shard's items, as indexes into `items` (which keeps their bytes).
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); shards];
        for (i, item) in items.iter().enumerate() {
            groups[shard_of_hash(ItemHash::of(item.as_ref()).h1, shards)].push(i);
        }
        results.clear();
        results.resize(items.len(), false);
        for (shard, group) in groups.iter().enumerate() {
            for chunk in group.chunks(ITEMS_PER_COMMAND * COMMANDS_PER_FLUSH) {
                let key = &self.manifest.keys[shard];
                let mut session = Session::new(conn, key.as_bytes());
                let answers = send_flush(&mut session, key, &items, chunk, insert, &answer);
                match answers {
                    Ok(Flushed::Answers(answers)) => {
                        for (&i, found) in chunk.iter().zip(answers) {
                            results[i] = found;
                        }
                    }
                    Ok(Flushed::Retired) => {
                        return Err(ClusterError::Retired {
                            name: self.name.clone(),
                            generation: self.manifest.generation,
                            key: key.clone(),
                        })
                    }
                    Err(error) => return Err(shard_error(conn, &self.manifest, shard, error)),
                }
            }
        }
        Ok(())
    }
}

/// What one round trip of a shard's items gave.
enum Flushed {
    /// The items' answers, in order.
    Answers(Vec<bool>),
    /// The inserts went into a key that has an expiry: a replaced generation's.
    Retired,
}

/// One round trip of a shard's items: a pipeline of `CF.INSERT key NOCREATE ITEMS …` then
/// `PTTL key` (`insert`), or of `CF.MEXISTS key …` then `TYPE key`, `ITEMS_PER_COMMAND` items
/// per command.
///
/// The check comes after the commands, since a key that exists after them existed during them
/// (keys are only ever created before a manifest names them). `CF.MEXISTS` answers 0 for every
/// item of a key that is gone (a replaced generation's, once expired) or holds another type,
/// so `TYPE` must say a cuckoo filter; `CF.INSERT` refuses those, but writes into a replaced
/// generation's key until it expires, so `PTTL` must say it has no expiry. A node that answers
/// `ASK` (the key's slot is migrating and the key has moved) gets the commands one by one,
/// which the cluster connection redirects.
fn send_flush<T: AsRef<[u8]>>(
    session: &mut Session<'_>,
    key: &str,
    items: &[T],
    flush: &[usize],
    insert: bool,
    answer: &impl Fn(Value) -> Option<bool>,
) -> Result<Flushed, BridgeError> {
    let command = if insert { "CF.INSERT" } else { "CF.MEXISTS" };
    let commands = || {
        let check = redis::cmd(if insert { "PTTL" } else { "TYPE" })
            .arg(key)
            .to_owned();
        flush
            .chunks(ITEMS_PER_COMMAND)
            .map(|chunk| {
                let mut cmd = redis::cmd(command);
                cmd.arg(key);
                if insert {
                    cmd.arg("NOCREATE").arg("ITEMS");
                }
                for &i in chunk {
                    cmd.arg(items[i].as_ref());
                }
                cmd
            })
            .chain(std::iter::once(check))
    };
    let mut pipe = redis::pipe();
    for cmd in commands() {
        pipe.add_command(cmd);
    }
    let mut replies = match session.pipeline(command, &mut pipe) {
        Ok(replies) => replies.unwrap_or_default(),
        Err(BridgeError::Refused { message, .. }) if message.starts_with("ASK ") => commands()
            .map(|cmd| match session.raw(command, &cmd)? {
                Ok(reply) => Ok(reply),
                Err(message) => Err(refusal(command, key.as_bytes(), message)),
            })
            .collect::<Result<_, _>>()?,
        Err(e) => return Err(e),
    };
    let check = replies.pop().unwrap_or(Value::Nil);
    let answers = answers_of(key, command, flush.len(), replies, answer)?;
    if insert {
        return Ok(match expect_int(session, "PTTL", check)? {
            -1 => Flushed::Answers(answers),
            -2 => return Err(missing(key, "PTTL answered -2")),
            _ => Flushed::Retired,
        });
    }
    let kind = match check {
        Value::SimpleString(kind) => kind,
        Value::BulkString(kind) => String::from_utf8_lossy(&kind).into_owned(),
        other => {
            return Err(BridgeError::UnexpectedReply {
                command: "TYPE",
                reply: format!("{other:?}"),
            })
        }
    };
    match kind.as_str() {
        CUCKOO_TYPE => Ok(Flushed::Answers(answers)),
        "none" => Err(missing(key, "TYPE answered none")),
        other => Err(BridgeError::WrongType {
            key: key.to_owned(),
            message: format!("TYPE answered {other}"),
        }),
    }
}

fn missing(key: &str, message: &str) -> BridgeError {
    BridgeError::MissingKey {
        key: key.to_owned(),
        message: message.to_owned(),
    }
}

/// The answers of `n` items in the replies to their commands (`ITEMS_PER_COMMAND` items each).
fn answers_of(
    key: &str,
    command: &'static str,
    n: usize,
    replies: Vec<Value>,
    answer: &impl Fn(Value) -> Option<bool>,
) -> Result<Vec<bool>, BridgeError> {
    let refused = |e: &redis::ServerError| refusal(command, key.as_bytes(), server_text(e));
    let unexpected = |reply: &Value| BridgeError::UnexpectedReply {
        command,
        reply: format!("{reply:?}"),
    };
    let mut answers = Vec::with_capacity(n);
    for reply in replies {
        let expected = (n - answers.len()).min(ITEMS_PER_COMMAND);
        let replies = match reply {
            Value::Array(replies) if replies.len() == expected => replies,
            Value::ServerError(e) => return Err(refused(&e)),
            other => return Err(unexpected(&other)),
        };
        for reply in replies {
            answers.push(match reply {
                Value::ServerError(e) => return Err(refused(&e)),
                reply => answer(reply.clone()).ok_or_else(|| unexpected(&reply))?,
            });
        }
    }
    if answers.len() != n {
        return Err(BridgeError::UnexpectedReply {
            command,
            reply: format!("{} answers for {n} items", answers.len()),
        });
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_whole_milliseconds_of_at_least_one() {
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::from_micros(1500)), 1);
        assert_eq!(millis(Duration::from_secs(60)), 60_000);
        assert_eq!(millis(Duration::MAX), MAX_EXPIRY_MS);
    }

    #[test]
    fn errors_name_the_shard_key_slot_and_node() {
        let error = ClusterError::Shard {
            shard: 2,
            key: "ids:3:2:{9}".to_owned(),
            slot: 13_653,
            node: Some("127.0.0.1:7003".into()),
            error: BridgeError::ModuleMissing {
                message: "ERR unknown command 'CF.EXISTS'".to_owned(),
            },
        };
        assert_eq!(
            error.to_string(),
            "shard 2 (\"ids:3:2:{9}\", slot 13653, node 127.0.0.1:7003): the server has no \
             RedisBloom module (ERR unknown command 'CF.EXISTS')"
        );
        assert!(std::error::Error::source(&error).is_some());
        let bad = ClusterError::BadName {
            name: "a b".to_owned(),
        };
        assert!(bad
            .to_string()
            .starts_with("\"a b\" cannot name a sharded filter"));
    }
}
