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
use super::manifest::{valid_name, Manifest, MAX_NAME_LEN};
use super::sharded::{shard_of_hash, ShardedFilter};

/// Items per `CF.MEXISTS` or `CF.INSERT` command of [`ClusterFilter`]'s batch calls.
const ITEMS_PER_COMMAND: usize = 1_000;

/// Commands of one shard per round trip (a pipeline: they share the key's slot, so a cluster
/// connection sends them to its node together).
const COMMANDS_PER_FLUSH: usize = 100;

/// Times [`ShardedFilter::import_from`] reads the manifest again when a shard it names is gone
/// (a newer export retired it meanwhile).
const IMPORT_ATTEMPTS: u32 = 3;

/// How [`ShardedFilter::export_to`] publishes a filter.
///
/// ```
/// use std::time::Duration;
///
/// use atomic_cuckoo::redisbloom::ClusterExport;
///
/// let options = ClusterExport::default().grace(Duration::from_secs(300));
/// assert_eq!(options, ClusterExport::default().grace(Duration::from_secs(300)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct ClusterExport {
    staging_ttl: Duration,
    grace: Duration,
}

impl Default for ClusterExport {
    /// Shards expire one hour after they are written unless the export publishes them; the
    /// generation an export replaces expires one minute after.
    fn default() -> Self {
        ClusterExport {
            staging_ttl: Duration::from_secs(3600),
            grace: Duration::from_secs(60),
        }
    }
}

impl ClusterExport {
    /// How long the new shard keys live unless the export publishes them: what a failed
    /// export leaves behind is gone after this (at least 1 ms; rounded to milliseconds).
    pub fn staging_ttl(mut self, ttl: Duration) -> Self {
        self.staging_ttl = ttl;
        self
    }

    /// How long the shard keys of the generation an export replaces live after the new one is
    /// published: long enough for queries that read the old manifest to finish (at least 1 ms;
    /// rounded to milliseconds).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

/// Milliseconds of `d`, at least 1 (an expiry of 0 would delete the key at once or, for
/// `RESTORE`, mean none).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
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
    /// Keys of the replaced generation that could not be given their expiry (their node did
    /// not answer): delete them once it is back. Empty when every one got it.
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
    /// The name's key holds something other than a manifest (another type, or text that is
    /// not one). An export never overwrites it.
    NotAManifest {
        /// The manifest key (the name).
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Reading or writing the manifest failed. During an export, nothing was published: the
    /// new shards expire (see [`ClusterExport::staging_ttl`]), unless the error is a
    /// [`BridgeError::Connection`] after the manifest was sent and read back, when the outcome
    /// is unknown: read the manifest again ([`ClusterFilter::open`]).
    Manifest {
        /// The manifest key.
        key: String,
        /// What failed.
        error: BridgeError,
    },
    /// A shard's key failed: a node without the RedisBloom module, a refusal (`OOM`,
    /// `proto-max-bulk-len`), a lost connection, a key of another type, or (import, queries)
    /// a key that is missing. During an export, nothing was published.
    Shard {
        /// The shard's index.
        shard: usize,
        /// Its key.
        key: String,
        /// The key's hash slot.
        slot: u16,
        /// The node that serves the slot (`host:port`), where the cluster said.
        node: Option<String>,
        /// What failed.
        error: BridgeError,
    },
    /// An export wrote the manifest but could not make every new shard permanent, and could
    /// not put the previous manifest back either: the manifest may name shards that expire.
    /// Export again.
    Unsettled {
        /// The manifest key.
        key: String,
        /// The shard that could not be made permanent.
        shard: usize,
        /// Why.
        error: Box<BridgeError>,
        /// Why the previous manifest could not be put back.
        rollback: Box<BridgeError>,
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
            ClusterError::NotAManifest { key, problem } => {
                write!(
                    f,
                    "key {key:?} holds no sharded filter's manifest: {problem}"
                )
            }
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
            ClusterError::Unsettled {
                key,
                shard,
                error,
                rollback,
            } => write!(
                f,
                "manifest {key:?} names shards that may expire: shard {shard} could not be made \
                 permanent ({error}), and the previous manifest could not be restored \
                 ({rollback})"
            ),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Manifest { error, .. } | ClusterError::Shard { error, .. } => Some(error),
            ClusterError::Unsettled { error, .. } => Some(&**error),
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

/// The error of shard `shard` (key `key`), with its slot and, where the cluster says, its node.
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
        node: node_of_slot(conn, slot),
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

/// The manifest at `name`: `None` if the key does not exist.
fn read_manifest(
    conn: &mut dyn ConnectionLike,
    name: &str,
) -> Result<Option<Manifest>, ClusterError> {
    let mut session = Session::new(conn, name.as_bytes());
    let reply = session
        .raw("GET", redis::cmd("GET").arg(name))
        .map_err(|error| manifest_error(name, error))?;
    match reply {
        Ok(Value::Nil) => Ok(None),
        Ok(Value::BulkString(text)) => {
            Manifest::parse(&text)
                .map(Some)
                .map_err(|problem| ClusterError::NotAManifest {
                    key: name.to_owned(),
                    problem,
                })
        }
        Ok(other) => Err(ClusterError::NotAManifest {
            key: name.to_owned(),
            problem: format!("GET answered {other:?}"),
        }),
        Err(message) if message.starts_with("WRONGTYPE") => Err(ClusterError::NotAManifest {
            key: name.to_owned(),
            problem: message,
        }),
        Err(message) => Err(manifest_error(
            name,
            refusal("GET", name.as_bytes(), message),
        )),
    }
}

fn manifest_error(name: &str, error: BridgeError) -> ClusterError {
    ClusterError::Manifest {
        key: name.to_owned(),
        error,
    }
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

/// Whether the node of `key` has the RedisBloom module: `CF.EXISTS key` of an item, routed to
/// the key's node, answers there (a node without the module: `unknown command`).
fn check_module_at(session: &mut Session<'_>, key: &str) -> Result<(), BridgeError> {
    let probe = redis::cmd("CF.EXISTS").arg(key).arg("probe").to_owned();
    let reply = session.call("CF.EXISTS", &probe)?;
    expect_int(session, "CF.EXISTS", reply).map(drop)
}

impl ShardedFilter {
    /// Publishes the filter as `name` in Redis: each shard in one `RESTORE` to its own key
    /// (replicas and the AOF get it whole), then the manifest at `name`, which readers use
    /// to find the shards. Readers see the previous generation until the manifest is written,
    /// and this one after: never a mix of both, never a shard missing.
    ///
    /// The steps, and what a failure at each leaves:
    ///
    /// 1. Reads the manifest at `name` (the previous generation, if any); checks that every
    ///    shard's node has the RedisBloom module. A failure leaves Redis as it was.
    /// 2. Writes the shards of the next generation, each with an expiry of
    ///    [`staging_ttl`](ClusterExport::staging_ttl). A failure deletes the shards written
    ///    (what cannot be reached expires): the previous generation stays visible.
    /// 3. Writes the manifest (the moment of publishing); a refusal is handled as in step 2.
    /// 4. Makes the new shards permanent (`PERSIST`). A failure puts the previous manifest
    ///    back, then deletes the new shards; if that fails too,
    ///    [`ClusterError::Unsettled`].
    /// 5. Gives the previous generation's shards an expiry of
    ///    [`grace`](ClusterExport::grace); those whose node does not answer are listed in
    ///    [`ClusterExportSummary::unretired`].
    ///
    /// Each shard is copied at its own moment (writers of that shard wait while it is
    /// copied): to publish one moment of the whole filter, let no writer run during the
    /// export. One export of a name at a time: two at once can publish the same generation.
    ///
    /// # Errors
    ///
    /// [`ClusterError::BadName`]; [`ClusterError::NotAManifest`] if `name` holds something
    /// else (it is left alone); [`ClusterError::Shard`] with the shard, its key, slot and node
    /// for a node without the module, a refused `RESTORE` (`OOM`, a payload over
    /// `proto-max-bulk-len`), a lost connection; [`ClusterError::Manifest`];
    /// [`ClusterError::Unsettled`].
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
        let mut tally = Tally::default();
        let previous = read_manifest(conn, name)?;
        tally.commands += 1;
        tally.round_trips += 1;
        let generation = previous.as_ref().map_or(1, |m| m.generation + 1);
        let manifest = Manifest::new(name, generation, self.shards().len());
        for (shard, key) in manifest.keys.iter().enumerate() {
            let mut session = Session::new(conn, key.as_bytes());
            let checked = check_module_at(&mut session, key);
            tally.add(&session);
            checked.map_err(|error| shard_error(conn, &manifest, shard, error))?;
        }
        let ttl_ms = millis(options.staging_ttl);
        let max_bulk = single_server_max_bulk(conn, name, &mut tally)?;
        let mut bytes = 0;
        for (shard, filter) in self.shards().iter().enumerate() {
            let key = manifest.keys[shard].as_bytes();
            let mut session = Session::new(conn, key);
            let written = write_shard(&mut session, filter, ttl_ms, max_bulk);
            tally.add(&session);
            match written {
                Ok(sent) => bytes += sent,
                Err(error) => {
                    delete_quietly(conn, &manifest.keys[..=shard], &mut tally);
                    return Err(shard_error(conn, &manifest, shard, error));
                }
            }
        }
        let mut session = Session::new(conn, name.as_bytes());
        let set = redis::cmd("SET")
            .arg(name)
            .arg(manifest.to_text())
            .to_owned();
        let published = session
            .call("SET", &set)
            .and_then(|reply| expect_ok(&session, "SET", reply));
        tally.add(&session);
        if let Err(error) = published {
            if !matches!(error, BridgeError::Connection(_)) {
                delete_quietly(conn, &manifest.keys, &mut tally);
            }
            return Err(manifest_error(name, error));
        }
        for (shard, key) in manifest.keys.iter().enumerate() {
            let mut session = Session::new(conn, key.as_bytes());
            let persisted = persist(&mut session, key);
            tally.add(&session);
            if let Err(error) = persisted {
                return Err(unpublish(
                    conn,
                    name,
                    previous.as_ref(),
                    &manifest,
                    shard,
                    error,
                    &mut tally,
                ));
            }
        }
        let grace = millis(options.grace).to_string();
        let mut unretired = Vec::new();
        for key in previous.iter().flat_map(|m| &m.keys) {
            let mut session = Session::new(conn, key.as_bytes());
            let expire = redis::cmd("PEXPIRE").arg(key).arg(&grace).to_owned();
            if session.call("PEXPIRE", &expire).is_err() {
                unretired.push(key.clone());
            }
            tally.add(&session);
        }
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
        let mut attempt = 0;
        'manifest: loop {
            attempt += 1;
            let manifest = read_manifest(conn, name)?.ok_or_else(|| ClusterError::NoFilter {
                key: name.to_owned(),
            })?;
            let mut shards = Vec::with_capacity(manifest.keys.len());
            for (shard, key) in manifest.keys.iter().enumerate() {
                match import_shard(conn, key) {
                    Ok(filter) => shards.push(filter),
                    Err(BridgeError::MissingKey { .. })
                        if attempt < IMPORT_ATTEMPTS
                            && read_manifest(conn, name)?
                                .is_some_and(|now| now.generation != manifest.generation) =>
                    {
                        continue 'manifest
                    }
                    Err(error) => return Err(shard_error(conn, &manifest, shard, error)),
                }
            }
            // A manifest names 1 to MAX_SHARDS shards.
            return ShardedFilter::from_shards(shards).map_err(|e| ClusterError::NotAManifest {
                key: name.to_owned(),
                problem: e.to_string(),
            });
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

/// Writes one shard's `RESTORE` with an expiry of `ttl_ms` (refused here if longer than
/// `max_bulk`); the payload bytes sent.
fn write_shard(
    session: &mut Session<'_>,
    filter: &RedisCuckooFilter,
    ttl_ms: u64,
    max_bulk: Option<u64>,
) -> Result<u64, BridgeError> {
    let (header, data) = filter.snapshot();
    check_exportable(&header, &data).map_err(|error| BridgeError::Inconsistent {
        key: show(session.key),
        error,
    })?;
    restore(session, &header, &data, true, ttl_ms, max_bulk).map(|(bytes, _)| bytes)
}

/// `PERSIST key`, which must find the key with its expiry (0 means it is gone).
fn persist(session: &mut Session<'_>, key: &str) -> Result<(), BridgeError> {
    let reply = session.call("PERSIST", redis::cmd("PERSIST").arg(key))?;
    match expect_int(session, "PERSIST", reply)? {
        1 => Ok(()),
        _ => Err(BridgeError::MissingKey {
            key: key.to_owned(),
            message: "PERSIST found no key with an expiry".to_owned(),
        }),
    }
}

/// Best effort, after a failure: deletes `keys` (those it cannot reach expire).
fn delete_quietly(conn: &mut dyn ConnectionLike, keys: &[String], tally: &mut Tally) {
    for key in keys {
        let mut session = Session::new(conn, key.as_bytes());
        session.quietly(redis::cmd("DEL").arg(key));
        tally.add(&session);
    }
}

/// After shard `shard` of a published manifest could not be made permanent: puts the previous
/// manifest back (or deletes it), then deletes the new shards; the error to report.
fn unpublish(
    conn: &mut dyn ConnectionLike,
    name: &str,
    previous: Option<&Manifest>,
    manifest: &Manifest,
    shard: usize,
    error: BridgeError,
    tally: &mut Tally,
) -> ClusterError {
    let mut session = Session::new(conn, name.as_bytes());
    let restored = match previous {
        Some(old) => {
            let set = redis::cmd("SET").arg(name).arg(old.to_text()).to_owned();
            session
                .call("SET", &set)
                .and_then(|reply| expect_ok(&session, "SET", reply))
        }
        None => session.call("DEL", redis::cmd("DEL").arg(name)).map(drop),
    };
    tally.add(&session);
    match restored {
        Ok(()) => {
            delete_quietly(conn, &manifest.keys, tally);
            shard_error(conn, manifest, shard, error)
        }
        Err(rollback) => ClusterError::Unsettled {
            key: name.to_owned(),
            shard,
            error: Box::new(error),
            rollback: Box::new(rollback),
        },
    }
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
        let manifest = read_manifest(conn, name)?.ok_or_else(|| ClusterError::NoFilter {
            key: name.to_owned(),
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
    /// of its items, a pipeline of `EXISTS key` (a retired generation's key is gone, and
    /// `CF.MEXISTS` would answer 0 for everything) and `CF.MEXISTS key items…` of 1,000 items
    /// each.
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
    /// failing shard may have some of its own.
    ///
    /// # Errors
    ///
    /// As [`contains_many`](ClusterFilter::contains_many); a shard that refuses
    /// (`Maximum expansions reached`) is [`BridgeError::Refused`].
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
        let shards = self.manifest.keys.len();
        let mut groups: Vec<Vec<(usize, Vec<u8>)>> = vec![Vec::new(); shards];
        let mut n = 0;
        for (i, item) in items.into_iter().enumerate() {
            let bytes = item.as_ref();
            groups[shard_of_hash(ItemHash::of(bytes).h1, shards)].push((i, bytes.to_vec()));
            n = i + 1;
        }
        results.resize(n, false);
        for (shard, group) in groups.iter().enumerate() {
            for chunk in group.chunks(ITEMS_PER_COMMAND * COMMANDS_PER_FLUSH) {
                let key = &self.manifest.keys[shard];
                let mut session = Session::new(conn, key.as_bytes());
                let answers = send_flush(&mut session, key, chunk, insert, &answer);
                match answers {
                    Ok(answers) => {
                        for ((i, _), found) in chunk.iter().zip(answers) {
                            results[*i] = found;
                        }
                    }
                    Err(error) => return Err(shard_error(conn, &self.manifest, shard, error)),
                }
            }
        }
        Ok(())
    }
}

/// One round trip of a shard's items: a pipeline of `CF.INSERT key NOCREATE ITEMS …`
/// (`insert`), or of `CF.MEXISTS key …` then `EXISTS key`, `ITEMS_PER_COMMAND` items per
/// command; their answers, in order.
///
/// `EXISTS` comes after the lookups: a key that exists after them existed during them (keys
/// are only ever created before their manifest names them), while a retired key that is gone
/// makes `CF.MEXISTS` answer 0 for everything. A node that answers `ASK` (the key's slot is
/// migrating and the key has moved) gets the commands one by one, which the cluster
/// connection redirects.
fn send_flush(
    session: &mut Session<'_>,
    key: &str,
    flush: &[(usize, Vec<u8>)],
    insert: bool,
    answer: &impl Fn(Value) -> Option<bool>,
) -> Result<Vec<bool>, BridgeError> {
    let command = if insert { "CF.INSERT" } else { "CF.MEXISTS" };
    let mut commands: Vec<redis::Cmd> = flush
        .chunks(ITEMS_PER_COMMAND)
        .map(|chunk| {
            let mut cmd = redis::cmd(command);
            cmd.arg(key);
            if insert {
                cmd.arg("NOCREATE").arg("ITEMS");
            }
            for (_, item) in chunk {
                cmd.arg(item.as_slice());
            }
            cmd
        })
        .collect();
    if !insert {
        commands.push(redis::cmd("EXISTS").arg(key).to_owned());
    }
    let mut pipe = redis::pipe();
    for cmd in &commands {
        pipe.add_command(cmd.clone());
    }
    let mut replies = match session.pipeline(command, &mut pipe) {
        Ok(replies) => replies.unwrap_or_default(),
        Err(BridgeError::Refused { message, .. }) if message.starts_with("ASK ") => commands
            .iter()
            .map(|cmd| match session.raw(command, cmd)? {
                Ok(reply) => Ok(reply),
                Err(message) => Err(refusal(command, key.as_bytes(), message)),
            })
            .collect::<Result<_, _>>()?,
        Err(e) => return Err(e),
    };
    if !insert {
        let exists = replies.pop().unwrap_or(Value::Nil);
        if expect_int(session, "EXISTS", exists)? != 1 {
            return Err(BridgeError::MissingKey {
                key: key.to_owned(),
                message: "EXISTS answered 0".to_owned(),
            });
        }
    }
    let mut answers = Vec::with_capacity(flush.len());
    for (chunk, reply) in flush.chunks(ITEMS_PER_COMMAND).zip(replies) {
        let replies = match reply {
            Value::Array(replies) if replies.len() == chunk.len() => replies,
            Value::ServerError(e) => return Err(refusal(command, key.as_bytes(), server_text(&e))),
            other => {
                return Err(BridgeError::UnexpectedReply {
                    command,
                    reply: format!("{other:?}"),
                })
            }
        };
        for reply in replies {
            answers.push(match reply {
                Value::ServerError(e) => {
                    return Err(refusal(command, key.as_bytes(), server_text(&e)))
                }
                reply => answer(reply.clone()).ok_or_else(|| BridgeError::UnexpectedReply {
                    command,
                    reply: format!("{reply:?}"),
                })?,
            });
        }
    }
    if answers.len() != flush.len() {
        return Err(BridgeError::UnexpectedReply {
            command,
            reply: format!("{} answers for {} items", answers.len(), flush.len()),
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
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn errors_name_the_shard_key_slot_and_node() {
        let error = ClusterError::Shard {
            shard: 2,
            key: "ids:3:2:{9}".to_owned(),
            slot: 13_653,
            node: Some("127.0.0.1:7003".to_owned()),
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
