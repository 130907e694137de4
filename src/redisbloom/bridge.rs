//! The Redis bridge (cargo feature `redis`): [`RedisCuckooFilter::export_to`] puts a filter
//! into a live Redis with the RedisBloom module, [`RedisCuckooFilter::import_from`] takes one
//! out, over any [`redis::ConnectionLike`].
//!
//! Export checks the filter before it sends a byte: Redis accepts, and then crashes on or
//! misanswers from, images that no RedisBloom filter has (expansion 0 with several sub-filters,
//! sizes that are not powers of two, a `DUMP` payload whose lengths disagree with its header).
//! It checks the server too: that it has the module, and the longest argument it takes.
//! Import reads one consistent state of the key and validates it like
//! [`RedisCuckooFilter::from_chunks`].

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use redis::{Cmd, ConnectionLike, ErrorKind, Pipeline, RedisError, Value};

use super::chunks::{self, MAX_CHUNK};
use super::cluster_slot::{hash_tag, key_slot, tag_for_slot};
use super::error::LoadError;
use super::filter::RedisCuckooFilter;
use super::header::{Header, HEADER_LEN};
use super::params::Geometry;
use super::payload::{self, MAX_RDB_VERSION, MIN_RDB_VERSION};
use super::raw::occupied_slots;

/// Times [`RedisCuckooFilter::import_from`] tries its `WATCH`ed `MULTI`/`EXEC` snapshot before
/// it falls back to one `DUMP`.
const IMPORT_ATTEMPTS: u32 = 5;

/// Milliseconds the temporary key of a `LoadChunk` export lives after its last chunk: a client
/// that dies mid-export leaves nothing behind for longer than this.
const TEMP_KEY_TTL_MS: u64 = 60_000;

/// Bytes of chunk data sent in one pipeline (one round trip) of a `LoadChunk` export.
const PIPELINE_BYTES: usize = MAX_CHUNK;

/// The reply `RESTORE` gives to a payload whose RDB version is newer than the server's (or whose
/// checksum is wrong, which a generated payload's never is).
const BAD_VERSION_REPLY: &str = "DUMP payload version or checksum are wrong";

/// How [`RedisCuckooFilter::export_to`] writes the filter into Redis.
///
/// | mode | commands | replicated and in the AOF | key already there |
/// |---|---|---|---|
/// | `Restore { replace: false }` | `RESTORE key 0 payload` | yes | [`BridgeError::KeyExists`] |
/// | `Restore { replace: true }` | `RESTORE key 0 payload REPLACE` | yes | replaced |
/// | `LoadChunk` | `CF.LOADCHUNK` into a temporary key, `RENAMENX` | **header only** | [`BridgeError::KeyExists`] |
/// | `LoadChunkReplace` | `CF.LOADCHUNK` into a temporary key, `RENAME` | **header only** | replaced |
///
/// **Replication caveat.** Redis up to 8.6 (RedisBloom 2.x and 8.x) propagates only the header
/// chunk of `CF.LOADCHUNK` to replicas and to the AOF, not the data chunks: after a
/// `LoadChunk` export a replica, and a server restarted from the AOF, hold a filter with the
/// right counters and geometry but **all slots empty** (every lookup answers 0). Use `Restore`
/// where there are replicas or persistence; `LoadChunk` suits a standalone cache. `RESTORE`
/// sends the whole filter in one command, so it is bounded by the server's
/// `proto-max-bulk-len` (512 MiB by default: a larger payload is [`BridgeError::Refused`]
/// before it is sent); `LoadChunk` sends pieces of at most 16 MiB, or of the server's
/// `proto-max-bulk-len` where that is smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub enum ExportMode {
    /// `RESTORE` of a generated `DUMP` payload, with `REPLACE` if `replace` is set. The
    /// payload's RDB version is the newest the server accepts: see
    /// [`RedisCuckooFilter::export_to`].
    Restore {
        /// Overwrite a key that exists (whatever its type); otherwise refuse it.
        replace: bool,
    },
    /// `CF.LOADCHUNK` into a temporary key in the key's hash slot, then `RENAMENX` to the key:
    /// readers never see a half-loaded filter, and an existing key is left alone
    /// ([`BridgeError::KeyExists`]). See the replication caveat above.
    LoadChunk,
    /// As [`LoadChunk`](ExportMode::LoadChunk), but `RENAME` replaces an existing key
    /// atomically: readers see the old filter, then the new one.
    LoadChunkReplace,
}

/// What [`RedisCuckooFilter::export_to`] sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub struct ExportSummary {
    /// Filter bytes sent: the payload (once per `RESTORE` attempt), or the header and data
    /// chunks.
    pub bytes: u64,
    /// Commands sent, bookkeeping included (`INFO`, `EXISTS`, `PEXPIRE`, `MULTI`, ...).
    pub commands: u64,
    /// Round trips to the server.
    pub round_trips: u64,
    /// The RDB version of the payload the server took (`Restore` only).
    pub rdb_version: Option<u16>,
}

/// Why [`RedisCuckooFilter::export_to`] or [`RedisCuckooFilter::import_from`] failed.
///
/// Where the server answered with an error, its text is kept (`message`). Keys are shown with
/// invalid UTF-8 replaced.
///
/// ```
/// use atomic_cuckoo::redisbloom::BridgeError;
///
/// fn explain(error: &BridgeError) -> &'static str {
///     match error {
///         BridgeError::MissingKey { .. } => "no such filter",
///         BridgeError::WrongType { .. } => "the key holds something else",
///         BridgeError::KeyExists { .. } => "refused to overwrite",
///         _ => "failed",
///     }
/// }
/// # let _ = explain;
/// ```
#[derive(Debug)]
#[non_exhaustive]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub enum BridgeError {
    /// The client failed: I/O, a dropped connection, a timeout, a protocol error (the `redis`
    /// crate's error is the [`source`](std::error::Error::source)). After an export, the
    /// outcome is unknown: the key may or may not have been written (see
    /// [`RedisCuckooFilter::export_to`]'s errors for how to tell).
    Connection(RedisError),
    /// The key does not exist (import).
    MissingKey {
        /// The key.
        key: String,
        /// The server's reply, e.g. `ERR not found`.
        message: String,
    },
    /// The key holds a value that is not a cuckoo filter.
    WrongType {
        /// The key.
        key: String,
        /// The server's reply (`WRONGTYPE Operation against a key holding the wrong kind of
        /// value`).
        message: String,
    },
    /// The key exists, and the export mode does not replace it.
    KeyExists {
        /// The key.
        key: String,
        /// The server's reply where there is one (`BUSYKEY Target key name already exists.`);
        /// `None` when `EXISTS` or `RENAMENX` showed it.
        message: Option<String>,
    },
    /// The server has no RedisBloom module: it does not know the `CF.*` commands. An export
    /// finds this out before it sends the filter (see [`RedisCuckooFilter::export_to`]).
    ModuleMissing {
        /// What showed it: `COMMAND INFO`'s answer, or the server's reply to a `CF.*` command.
        message: String,
    },
    /// The server refused a command (for example, the filter is too large for
    /// `proto-max-bulk-len`).
    Refused {
        /// The command.
        command: &'static str,
        /// The server's reply.
        message: String,
    },
    /// The server's reply does not have the shape the command gives.
    UnexpectedReply {
        /// The command.
        command: &'static str,
        /// The reply, abridged.
        reply: String,
    },
    /// The filter read from the key (import), or the filter to be sent (export), is not a
    /// consistent RedisBloom filter (the [`LoadError`] is the source). An export never sends
    /// such a filter: Redis could crash on it.
    Inconsistent {
        /// The key.
        key: String,
        /// What is wrong.
        error: LoadError,
    },
    /// The key kept changing while it was read, and the `DUMP` fallback could not be read
    /// either (its RDB version is newer than this crate knows).
    Contended {
        /// The key.
        key: String,
        /// `MULTI`/`EXEC` snapshots tried.
        attempts: u32,
    },
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::Connection(e) => write!(f, "Redis connection failed: {e}"),
            BridgeError::MissingKey { key, message } => {
                write!(f, "key {key:?} does not exist (server: {message})")
            }
            BridgeError::WrongType { key, message } => write!(
                f,
                "key {key:?} does not hold a cuckoo filter (server: {message})"
            ),
            BridgeError::KeyExists { key, message } => {
                write!(f, "key {key:?} exists already")?;
                match message {
                    Some(message) => write!(f, " (server: {message})"),
                    None => Ok(()),
                }
            }
            BridgeError::ModuleMissing { message } => {
                write!(f, "the server has no RedisBloom module ({message})")
            }
            BridgeError::Refused { command, message } => {
                write!(f, "the server refused {command}: {message}")
            }
            BridgeError::UnexpectedReply { command, reply } => {
                write!(f, "unexpected reply to {command}: {reply}")
            }
            BridgeError::Inconsistent { key, error } => {
                write!(f, "the filter of key {key:?} is inconsistent: {error}")
            }
            BridgeError::Contended { key, attempts } => write!(
                f,
                "key {key:?} changed during each of {attempts} snapshot attempts"
            ),
        }
    }
}

impl std::error::Error for BridgeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BridgeError::Connection(e) => Some(e),
            BridgeError::Inconsistent { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// A key as text, for error messages.
pub(super) fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// A reply, abridged to a few hundred characters, for error messages.
fn abridged(reply: &Value) -> String {
    let mut text = format!("{reply:?}");
    if text.len() > 200 {
        let mut cut = 200;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// The full text of a server error reply, as the server sent it (`code detail`).
pub(super) fn server_text(error: &redis::ServerError) -> String {
    match error.details() {
        Some(detail) => format!("{} {detail}", error.code()),
        None => error.code().to_owned(),
    }
}

/// A server error reply to `command` on `key`, classified.
pub(super) fn refusal(command: &'static str, key: &[u8], message: String) -> BridgeError {
    if message.starts_with("WRONGTYPE") {
        BridgeError::WrongType {
            key: show(key),
            message,
        }
    } else if message.starts_with("BUSYKEY") {
        BridgeError::KeyExists {
            key: show(key),
            message: Some(message),
        }
    } else if command.starts_with("CF.") && message.starts_with("ERR unknown command") {
        BridgeError::ModuleMissing { message }
    } else if message == "ERR not found" || message == "ERR no such key" {
        BridgeError::MissingKey {
            key: show(key),
            message,
        }
    } else {
        BridgeError::Refused { command, message }
    }
}

/// A client-side error; server errors that the `redis` crate reports as errors (an aborted
/// transaction, a pipeline) keep their text.
fn client_error(command: &'static str, key: &[u8], error: RedisError) -> BridgeError {
    match server_error_text(&error) {
        Some(message) => refusal(command, key, message),
        None => BridgeError::Connection(error),
    }
}

/// The server's text when `error` is a server's error reply (a plain connection returns those
/// as values, a cluster connection as errors), else `None`.
fn server_error_text(error: &RedisError) -> Option<String> {
    match error.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => Some(match (error.code(), error.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            _ => error.to_string(),
        }),
        _ => None,
    }
}

/// Talks to one key: counts commands and round trips, and turns replies into typed errors.
pub(super) struct Session<'c> {
    conn: &'c mut dyn ConnectionLike,
    pub(super) key: &'c [u8],
    pub(super) commands: u64,
    pub(super) round_trips: u64,
}

impl<'c> Session<'c> {
    pub(super) fn new(conn: &'c mut dyn ConnectionLike, key: &'c [u8]) -> Self {
        Session {
            conn,
            key,
            commands: 0,
            round_trips: 0,
        }
    }

    /// Sends one command; a server error reply is `Ok(Err(text))`.
    pub(super) fn raw(
        &mut self,
        command: &'static str,
        cmd: &Cmd,
    ) -> Result<Result<Value, String>, BridgeError> {
        let result = self.conn.req_command(cmd);
        self.answer(command, result)
    }

    /// As [`raw`](Session::raw), for one command already in RESP form (sent as it is, without
    /// the copies a [`Cmd`] makes of its arguments).
    pub(super) fn raw_packed(
        &mut self,
        command: &'static str,
        packed: &[u8],
    ) -> Result<Result<Value, String>, BridgeError> {
        let result = self.conn.req_packed_command(packed);
        self.answer(command, result)
    }

    fn answer(
        &mut self,
        command: &'static str,
        result: redis::RedisResult<Value>,
    ) -> Result<Result<Value, String>, BridgeError> {
        self.commands += 1;
        self.round_trips += 1;
        match result {
            Ok(Value::ServerError(e)) => Ok(Err(server_text(&e))),
            Ok(value) => Ok(Ok(value)),
            // A cluster connection returns the server's error replies as errors.
            Err(e) => match server_error_text(&e) {
                Some(message) => Ok(Err(message)),
                None => Err(client_error(command, self.key, e)),
            },
        }
    }

    /// Sends one command; a server error reply is an error.
    pub(super) fn call(&mut self, command: &'static str, cmd: &Cmd) -> Result<Value, BridgeError> {
        self.raw(command, cmd)?
            .map_err(|message| refusal(command, self.key, message))
    }

    /// Sends a pipeline (atomic or not), each reply kept as it is, errors included; `None` when
    /// a `WATCH`ed transaction was aborted.
    pub(super) fn pipeline(
        &mut self,
        command: &'static str,
        pipe: &mut Pipeline,
    ) -> Result<Option<Vec<Value>>, BridgeError> {
        let packed = pipe.get_packed_pipeline();
        self.packed_pipeline(command, &packed, pipe.len(), pipe.is_transaction())
    }

    /// As [`pipeline`](Session::pipeline), for `len` commands already in RESP form (a
    /// transaction's `MULTI` and `EXEC` not counted in `len`).
    fn packed_pipeline(
        &mut self,
        command: &'static str,
        packed: &[u8],
        len: usize,
        transaction: bool,
    ) -> Result<Option<Vec<Value>>, BridgeError> {
        self.commands += len as u64 + if transaction { 2 } else { 0 };
        self.round_trips += 1;
        // The packed commands go straight to the connection, not through `Pipeline::query`,
        // which refuses a cluster connection (it "does not support pipelining", yet sends a
        // pipeline whose commands share a hash slot to that slot's node, which is all this
        // bridge sends), and which would take the replies' errors apart.
        let (offset, count) = if transaction {
            (len + 1, 1) // MULTI's and the QUEUED replies, then EXEC's
        } else {
            (0, len)
        };
        let mut replies = self
            .conn
            .req_packed_commands(packed, offset, count)
            .map_err(|e| client_error(command, self.key, e))?;
        let reply = match (transaction, replies.pop()) {
            (true, Some(exec)) if replies.is_empty() => exec,
            (true, other) => Value::Array(replies.into_iter().chain(other).collect()),
            (false, last) => Value::Array(replies.into_iter().chain(last).collect()),
        };
        match reply {
            Value::ServerError(e) => Err(refusal(command, self.key, server_text(&e))),
            Value::Nil if transaction => Ok(None),
            Value::Array(replies) if replies.len() == len => Ok(Some(replies)),
            other => Err(BridgeError::UnexpectedReply {
                command,
                reply: abridged(&other),
            }),
        }
    }

    /// Best effort, after a failure: the failure is what the caller reports.
    pub(super) fn quietly(&mut self, cmd: &Cmd) {
        self.commands += 1;
        self.round_trips += 1;
        let _ = self.conn.req_command(cmd);
    }

    fn unexpected(&self, command: &'static str, reply: &Value) -> BridgeError {
        BridgeError::UnexpectedReply {
            command,
            reply: abridged(reply),
        }
    }

    fn inconsistent(&self, error: LoadError) -> BridgeError {
        BridgeError::Inconsistent {
            key: show(self.key),
            error,
        }
    }
}

/// A reply that must be `OK`.
pub(super) fn expect_ok(
    session: &Session<'_>,
    command: &'static str,
    reply: Value,
) -> Result<(), BridgeError> {
    match reply {
        Value::Okay => Ok(()),
        Value::SimpleString(ref s) if s == "OK" => Ok(()),
        Value::ServerError(e) => Err(refusal(command, session.key, server_text(&e))),
        other => Err(session.unexpected(command, &other)),
    }
}

/// A reply that must be an integer (RESP3 may give a boolean).
pub(super) fn expect_int(
    session: &Session<'_>,
    command: &'static str,
    reply: Value,
) -> Result<i64, BridgeError> {
    match reply {
        Value::Int(n) => Ok(n),
        Value::Boolean(b) => Ok(i64::from(b)),
        Value::ServerError(e) => Err(refusal(command, session.key, server_text(&e))),
        other => Err(session.unexpected(command, &other)),
    }
}

/// A `CF.SCANDUMP` reply: the next iterator and the chunk (`None` at the end).
fn scandump_reply(
    session: &Session<'_>,
    reply: Value,
) -> Result<(u64, Option<Vec<u8>>), BridgeError> {
    const COMMAND: &str = "CF.SCANDUMP";
    let items = match reply {
        Value::Array(items) if items.len() == 2 => items,
        Value::ServerError(e) => return Err(refusal(COMMAND, session.key, server_text(&e))),
        other => return Err(session.unexpected(COMMAND, &other)),
    };
    let mut items = items.into_iter();
    let (iterator, chunk) = (items.next(), items.next());
    match (iterator, chunk) {
        (Some(Value::Int(it)), Some(chunk)) if it >= 0 => match chunk {
            Value::Nil => Ok((it as u64, None)),
            Value::BulkString(bytes) => Ok((it as u64, Some(bytes))),
            other => Err(session.unexpected(COMMAND, &other)),
        },
        (iterator, _) => Err(session.unexpected(COMMAND, &iterator.unwrap_or(Value::Nil))),
    }
}

/// `CF.INFO`'s fields by name (RESP2: a flat array of names and values; RESP3: a map).
fn info_reply(session: &Session<'_>, reply: Value) -> Result<Vec<(String, i64)>, BridgeError> {
    const COMMAND: &str = "CF.INFO";
    let pairs: Vec<(Value, Value)> = match reply {
        Value::Array(items) if items.len() % 2 == 0 => {
            let mut items = items.into_iter();
            std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect()
        }
        Value::Map(pairs) => pairs,
        Value::ServerError(e) => return Err(refusal(COMMAND, session.key, server_text(&e))),
        other => return Err(session.unexpected(COMMAND, &other)),
    };
    pairs
        .into_iter()
        .map(|(name, value)| {
            let name = match name {
                Value::SimpleString(s) => s,
                Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                other => return Err(session.unexpected(COMMAND, &other)),
            };
            match value {
                Value::Int(n) => Ok((name, n)),
                other => Err(session.unexpected(COMMAND, &other)),
            }
        })
        .collect()
}

/// The geometry and counters `CF.INFO` reports, as a header with 0 items.
fn header_from_info(
    session: &Session<'_>,
    fields: &[(String, i64)],
) -> Result<Header, BridgeError> {
    let field = |name: &str| -> Result<u64, BridgeError> {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|&(_, v)| u64::try_from(v).ok())
            .ok_or_else(|| BridgeError::UnexpectedReply {
                command: "CF.INFO",
                reply: format!("no non-negative {name:?} in {fields:?}"),
            })
    };
    let narrow = |name: &str| -> Result<u16, BridgeError> {
        let value = field(name)?;
        u16::try_from(value).map_err(|_| {
            session.inconsistent(LoadError::FieldTooWide {
                field: "CF.INFO field",
                value,
            })
        })
    };
    Ok(Header {
        items: 0,
        buckets: field("Number of buckets")?,
        deletes: field("Number of items deleted")?,
        filters: field("Number of filters")?,
        bucket_size: narrow("Bucket size")?,
        max_iterations: narrow("Max iterations")?,
        expansion: narrow("Expansion rate")?,
    })
}

/// Sizes of the sub-filters of a validated header.
fn sub_filter_lens(geometry: &Geometry, filters: u16) -> Result<Vec<usize>, LoadError> {
    (0..filters)
        .map(|i| {
            geometry
                .sub_bytes(i)
                .and_then(|b| usize::try_from(b).ok())
                .ok_or(LoadError::TooLarge { bytes: u64::MAX })
        })
        .collect()
}

/// Checks a snapshot before it is sent: the header is one Redis accepts and that is not
/// corrupt, there are as many sub-filters as it says, each exactly as long as its buckets, and
/// the item count is the number of occupied slots. (A filter of this crate always passes.)
pub(super) fn check_exportable(header: &Header, data: &[Vec<u8>]) -> Result<(), LoadError> {
    let (geometry, filters) = header.validate()?;
    if data.len() != usize::from(filters) {
        return Err(LoadError::FilterCount {
            filters: data.len() as u64,
        });
    }
    for (i, sub) in data.iter().enumerate() {
        let expected = geometry.sub_bytes(i as u16).unwrap_or(u64::MAX);
        if sub.len() as u64 != expected {
            return Err(LoadError::SubFilterLength {
                index: i as u16,
                len: sub.len() as u64,
                expected,
            });
        }
    }
    let stored = occupied_slots(data);
    if stored != header.items {
        return Err(LoadError::ItemCount {
            header: header.items,
            stored,
        });
    }
    Ok(())
}

/// The RDB version of a Redis version (`INFO server`'s `redis_version`): the newest one
/// `RESTORE` accepts there. Unknown or newer versions get the newest this crate writes.
pub(crate) fn rdb_version_for(redis_version: &str) -> u16 {
    let mut parts = redis_version
        .trim()
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) else {
        return MAX_RDB_VERSION;
    };
    match (major, minor) {
        (0..=6, _) => MIN_RDB_VERSION, // 5.0 to 6.2: RDB 9 (older ones refuse, and say so)
        (7, 0..=1) => 10,              // 7.0
        (7, 2..=3) => 11,              // 7.2
        _ => MAX_RDB_VERSION,          // 7.4, 8.x
    }
}

/// `INFO server`'s `redis_version`, if the reply has one. A cluster connection sends `INFO` to
/// every node and answers with a map of node to reply: the lowest version among them counts
/// (the key's node is one of them, and a payload old enough for the oldest suits every node).
fn redis_version(reply: &Value) -> Option<String> {
    let text = match reply {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::SimpleString(text) => text.clone(),
        Value::Map(nodes) => {
            return nodes
                .iter()
                .filter_map(|(_, reply)| redis_version(reply))
                .min_by_key(|v| rdb_version_for(v));
        }
        _ => return None,
    };
    text.lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_owned())
}

/// A temporary key in the same hash slot as `key` (so that `RENAME` works in a cluster):
/// `key` itself plus a suffix if it has a hash tag; `{key}` plus a suffix if it has none and
/// no `}` (its tag is then `key`, which was hashed whole); otherwise (a `}` but no tag: `a}b`,
/// `{}x`, whose whole key is hashed but can be no tag; or the empty key) `{n}` before `key`,
/// `n` a hex number in the key's slot.
fn temp_key(key: &[u8]) -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let suffix = format!(
        ":atomic-cuckoo-load:{}:{nanos:08x}:{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let mut tmp = Vec::with_capacity(key.len() + suffix.len() + 8);
    if hash_tag(key).is_some() {
        tmp.extend_from_slice(key);
    } else if !key.is_empty() && !key.contains(&b'}') {
        tmp.push(b'{');
        tmp.extend_from_slice(key);
        tmp.push(b'}');
    } else {
        tmp.push(b'{');
        tmp.extend_from_slice(&tag_for_slot(key_slot(key)));
        tmp.push(b'}');
        tmp.extend_from_slice(key);
    }
    tmp.extend_from_slice(suffix.as_bytes());
    tmp
}

impl RedisCuckooFilter {
    /// Writes the filter into `key` of a Redis server with the RedisBloom module (2.2.15 or
    /// later, Redis 8 included), as one consistent snapshot of it (writers here wait while it is
    /// taken). Afterwards `CF.EXISTS`, `CF.ADD`, `CF.DEL`, … on the server behave exactly as
    /// this filter does: the server holds the same bytes.
    ///
    /// See [`ExportMode`] for the two ways, which differ in what reaches replicas. For
    /// `Restore`, the payload's RDB version is chosen from `INFO server`'s `redis_version`:
    /// 5.0–6.2 → 9, 7.0 → 10, 7.2 → 11, 7.4 and 8.x → 12 (a payload is refused by a server
    /// older than its version; 12 where `INFO` is refused or unclear); should the server still
    /// answer `DUMP payload version or checksum are wrong`, each lower version down to 9 is
    /// tried. [`ExportSummary::rdb_version`] says which one the server took.
    ///
    /// Before anything is sent, the filter is checked (see [`BridgeError::Inconsistent`]), and
    /// so is the server: `COMMAND INFO CF.LOADCHUNK` tells whether it has the RedisBloom module
    /// (where `COMMAND` is renamed or denied, a keyless `CF.INFO` asks the module itself:
    /// `MODULE LIST` is not used, being the admin command most often denied), and
    /// `CONFIG GET proto-max-bulk-len` the longest argument it takes (where `CONFIG` is refused,
    /// none is assumed: a payload over it then makes the server close the connection,
    /// [`BridgeError::Connection`]).
    ///
    /// A `LoadChunk` export creates its temporary key and gives it a one-minute expiry in one
    /// `MULTI`/`EXEC` transaction, renews the expiry with every pipeline of chunks, and
    /// removes it (`PERSIST` and `RENAME`/`RENAMENX`) in another: whenever the connection is
    /// lost, the temporary key, if there is one, expires within a minute.
    ///
    /// **Connections need read and write timeouts**
    /// ([`redis::Connection::set_read_timeout`], [`set_write_timeout`](redis::Connection::set_write_timeout)):
    /// without them, a server that stalls (or a network path that drops packets silently)
    /// hangs the export forever. Give the read timeout room for the server's work: `RESTORE`
    /// of a large filter checks and copies all of it before it answers.
    ///
    /// **Memory.** Besides the filter, an export holds one snapshot of it (its size) and the
    /// bytes of one request: `Restore` the whole payload, built in place in the buffer the
    /// connection sends (measured: at most 2.0× [`memory_usage`](RedisCuckooFilter::memory_usage)
    /// at its peak; 1.97× for a 4 MiB filter, 2.00× for 32 and 64 MiB), `LoadChunk` one
    /// pipeline of at most 16 MiB (measured: 1.97×, 1.50× and 1.25× for 4, 32 and 64 MiB
    /// filters). On a plain [`redis::Connection`]; a cluster connection copies the request
    /// once more to route it.
    ///
    /// # Errors
    ///
    /// [`BridgeError::ModuleMissing`] if the server has no RedisBloom module (nothing is sent
    /// then, and the connection stays usable); [`BridgeError::KeyExists`] if the key exists
    /// and the mode does not replace it; [`BridgeError::Refused`] if the server refuses a
    /// command, or if a `Restore` payload is longer than the server's `proto-max-bulk-len`
    /// (refused before it is sent; `LoadChunk` sends smaller chunks instead), or for a server
    /// older than Redis 5; [`BridgeError::UnexpectedReply`] for a reply of the wrong shape. A
    /// `LoadChunk` export that fails deletes its temporary key (if the connection still works;
    /// otherwise the key expires within a minute) and leaves `key` as it was.
    ///
    /// [`BridgeError::Connection`] if the connection fails (I/O, a timeout, a lost
    /// connection). **The outcome is then unknown**: the server may have run the command
    /// that wrote the key (`RESTORE`, or the `LoadChunk` export's final `RENAME`) and its reply
    /// have been lost, or may still run it: a request can be on its way (held by a proxy, a
    /// slow network, a busy server) after the client gave up. To tell, drop this connection
    /// (after a timeout it may still have replies in flight, which the next command would read
    /// as its own) and, on a new one, first end the old one at the server: `CLIENT KILL ID`
    /// with the number `CLIENT ID` gave on it before the export (an ACL must allow `CLIENT`).
    /// Nothing sent on it runs after that, so the answer stays true: `EXISTS key` where the key
    /// did not exist before, otherwise compare the filter there
    /// ([`import_from`](RedisCuckooFilter::import_from), then
    /// [`scandump`](RedisCuckooFilter::scandump) on both) with this one. Asked without the
    /// kill, `EXISTS` can say "not written" just before a late request writes the key. Or
    /// simply export again with a replacing mode (a late replacing request then rewrites the
    /// same filter). No key without an expiry is left behind other than `key`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use atomic_cuckoo::redisbloom::{BridgeError, ExportMode, RedisCuckooFilter};
    ///
    /// let filter = RedisCuckooFilter::reserve(1_000_000)?;
    /// filter.insert("user:42")?;
    /// let client = redis::Client::open("redis://127.0.0.1:6379/")?;
    /// let mut conn = client.get_connection()?;
    /// conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    /// conn.set_write_timeout(Some(Duration::from_secs(10)))?;
    /// let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn)?;
    /// match filter.export_to(&mut conn, "users", ExportMode::Restore { replace: true }) {
    ///     Ok(_) => {}
    ///     // Written or not? Ask on a fresh connection (this one may be out of step), once the
    ///     // server has ended the old one (a request of it may still be on its way).
    ///     Err(BridgeError::Connection(e)) => {
    ///         drop(conn);
    ///         let mut fresh = client.get_connection()?;
    ///         let _: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).query(&mut fresh)?;
    ///         let there = RedisCuckooFilter::import_from(&mut fresh, "users");
    ///         let written = there.is_ok_and(|f| f.scandump() == filter.scandump());
    ///         println!("connection failed ({e}); the filter was written: {written}");
    ///         return Ok(());
    ///     }
    ///     Err(e) => return Err(e.into()),
    /// }
    /// let found: bool = redis::cmd("CF.EXISTS").arg("users").arg("user:42").query(&mut conn)?;
    /// assert!(found);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn export_to(
        &self,
        conn: &mut dyn ConnectionLike,
        key: impl AsRef<[u8]>,
        mode: ExportMode,
    ) -> Result<ExportSummary, BridgeError> {
        let key = key.as_ref();
        let mut session = Session::new(conn, key);
        let (header, data) = self.snapshot();
        check_exportable(&header, &data).map_err(|e| session.inconsistent(e))?;
        check_module(&mut session)?;
        let max_bulk = max_bulk_len(&mut session)?;
        let (bytes, rdb_version) = match mode {
            ExportMode::Restore { replace } => {
                let (bytes, version) = restore(&mut session, &header, &data, replace, 0, max_bulk)?;
                (bytes, Some(version))
            }
            ExportMode::LoadChunk => (
                load_chunks(&mut session, &header, &data, false, max_bulk)?,
                None,
            ),
            ExportMode::LoadChunkReplace => (
                load_chunks(&mut session, &header, &data, true, max_bulk)?,
                None,
            ),
        };
        Ok(ExportSummary {
            bytes,
            commands: session.commands,
            round_trips: session.round_trips,
            rdb_version,
        })
    }

    /// Reads the cuckoo filter at `key` of a Redis server with the RedisBloom module into a new
    /// filter here, which then answers `contains`, `count`, … exactly as the server did at one
    /// moment.
    ///
    /// After the module check [`export_to`](RedisCuckooFilter::export_to) makes, the read is one
    /// consistent snapshot: `WATCH key`, `CF.SCANDUMP key 0` for the header
    /// (whose geometry fixes every chunk's iterator), then `MULTI`, every `CF.SCANDUMP`, `EXEC`;
    /// a write to the key in between aborts the `EXEC`, and the read starts again. After 5
    /// aborted tries it falls back to one `DUMP` (atomic, but LZF compression costs the server
    /// more, and the payload of a server whose RDB version is newer than 12 cannot be read:
    /// [`BridgeError::Contended`] then). `SCANDUMP` is the primary way because the server only
    /// copies memory for it, and its format does not change with the Redis version. (Under a
    /// steady stream of writes to the key, most `WATCH`ed tries abort: the tests see the
    /// fallback taken by most imports while two clients write to the key without pause.)
    ///
    /// An empty filter (0 items: `CF.SCANDUMP` returns nothing then) is rebuilt from
    /// `CF.INFO`'s geometry: its buckets, bucket size, expansion, max iterations, sub-filters and
    /// deletes. The new filter allows 32 sub-filters (RedisBloom's default
    /// `cf-max-expansions`); the server's setting is not read.
    ///
    /// # Errors
    ///
    /// [`BridgeError::MissingKey`], [`BridgeError::WrongType`];
    /// [`BridgeError::Inconsistent`] if the server's filter is corrupt (as
    /// [`from_chunks`](RedisCuckooFilter::from_chunks) checks it: the counters must match the
    /// bytes, the geometry must be one RedisBloom creates); [`BridgeError::Contended`] if the
    /// key kept changing and `DUMP` failed too; [`BridgeError::ModuleMissing`] (checked as
    /// [`export_to`](RedisCuckooFilter::export_to) does, before the key is sent; the connection
    /// stays usable), [`BridgeError::Refused`], [`BridgeError::Connection`],
    /// [`BridgeError::UnexpectedReply`].
    ///
    /// ```no_run
    /// use atomic_cuckoo::redisbloom::RedisCuckooFilter;
    ///
    /// let mut conn = redis::Client::open("redis://127.0.0.1:6379/")?.get_connection()?;
    /// let replica = RedisCuckooFilter::import_from(&mut conn, "users")?;
    /// println!("{} items", replica.info().items);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn import_from(
        conn: &mut dyn ConnectionLike,
        key: impl AsRef<[u8]>,
    ) -> Result<Self, BridgeError> {
        let key = key.as_ref();
        let mut session = Session::new(conn, key);
        // Before the key is sent: a server without the module echoes an unknown command's
        // first arguments in its error reply, and a key that is not UTF-8 makes that reply one
        // the client cannot parse (the connection is lost, not the error typed).
        check_module(&mut session)?;
        for _ in 0..IMPORT_ATTEMPTS {
            session.call("WATCH", redis::cmd("WATCH").arg(key))?;
            match snapshot_once(&mut session) {
                Ok(Some(filter)) => return Ok(filter),
                Ok(None) => continue,
                Err(e) => {
                    session.quietly(&redis::cmd("UNWATCH"));
                    return Err(e);
                }
            }
        }
        import_by_dump(&mut session).map_err(|e| match e {
            BridgeError::Inconsistent {
                error: LoadError::RdbVersion { .. },
                ..
            } => BridgeError::Contended {
                key: show(key),
                attempts: IMPORT_ATTEMPTS,
            },
            e => e,
        })
    }
}

/// One `WATCH`ed snapshot attempt (the caller has sent `WATCH`); `None` if `EXEC` was aborted.
fn snapshot_once(session: &mut Session<'_>) -> Result<Option<RedisCuckooFilter>, BridgeError> {
    let key = session.key;
    let first = session.call("CF.SCANDUMP", redis::cmd("CF.SCANDUMP").arg(key).arg(0))?;
    let mut pipe = redis::pipe();
    pipe.atomic();
    match scandump_reply(session, first)? {
        (0, None) => {
            pipe.cmd("CF.INFO").arg(key);
            pipe.cmd("CF.SCANDUMP").arg(key).arg(0);
            let Some(replies) = session.pipeline("EXEC", &mut pipe)? else {
                return Ok(None);
            };
            let mut replies = replies.into_iter();
            let info = replies.next().unwrap_or_default();
            let last = replies.next().unwrap_or_default();
            let header = header_from_info(session, &info_reply(session, info)?)?;
            if scandump_reply(session, last)? != (0, None) {
                // WATCH should have aborted the EXEC: the key changed after all.
                return Ok(None);
            }
            empty_filter(header)
                .map(Some)
                .map_err(|e| session.inconsistent(e))
        }
        (1, Some(header_bytes)) => {
            let header = Header::decode(&header_bytes).map_err(|e| session.inconsistent(e))?;
            let (geometry, filters) = header.validate().map_err(|e| session.inconsistent(e))?;
            let lens = sub_filter_lens(&geometry, filters).map_err(|e| session.inconsistent(e))?;
            let plan: Vec<chunks::DataChunk> = chunks::data_chunks(lens).collect();
            // SCANDUMP 0 again (the header, checked against the one above), then each chunk's
            // start iterator (the previous chunk's), then the end.
            let mut sent = 1u64;
            pipe.cmd("CF.SCANDUMP").arg(key).arg(0);
            for chunk in &plan {
                pipe.cmd("CF.SCANDUMP").arg(key).arg(sent);
                sent = chunk.iterator;
            }
            pipe.cmd("CF.SCANDUMP").arg(key).arg(sent);
            let Some(replies) = session.pipeline("EXEC", &mut pipe)? else {
                return Ok(None);
            };
            let mut got = Vec::with_capacity(replies.len());
            for reply in replies {
                got.push(scandump_reply(session, reply)?);
            }
            let wrong = |what: String| BridgeError::UnexpectedReply {
                command: "CF.SCANDUMP",
                reply: what,
            };
            if got.first() != Some(&(1, Some(header_bytes))) {
                // The header changed between WATCH and EXEC without aborting it.
                return Ok(None);
            }
            if got.last() != Some(&(0, None)) {
                return Err(wrong(format!(
                    "the last reply is not [0, nil] (iterator {})",
                    got.last().map_or(0, |g| g.0)
                )));
            }
            let data = &got[1..got.len() - 1];
            for (chunk, (iterator, bytes)) in plan.iter().zip(data) {
                let len = bytes.as_ref().map_or(0, Vec::len);
                if *iterator != chunk.iterator || len != chunk.range.len() {
                    return Err(wrong(format!(
                        "chunk {iterator} of {len} bytes where the header gives chunk {} of {} \
                         bytes",
                        chunk.iterator,
                        chunk.range.len()
                    )));
                }
            }
            let chunks = got[..got.len() - 1]
                .iter()
                .map(|(it, bytes)| (*it, bytes.as_deref().unwrap_or_default()));
            RedisCuckooFilter::from_chunks(chunks)
                .map(Some)
                .map_err(|e| session.inconsistent(e))
        }
        (iterator, chunk) => Err(BridgeError::UnexpectedReply {
            command: "CF.SCANDUMP",
            reply: format!(
                "[{iterator}, {} bytes] to iterator 0",
                chunk.map_or(0, |c| c.len())
            ),
        }),
    }
}

/// An empty filter with the geometry and counters of `header` (whose item count is 0): the
/// header and zero-filled chunks through [`RedisCuckooFilter::from_chunks`].
fn empty_filter(header: Header) -> Result<RedisCuckooFilter, LoadError> {
    let (geometry, filters) = header.validate()?;
    let lens = sub_filter_lens(&geometry, filters)?;
    let plan: Vec<chunks::DataChunk> = chunks::data_chunks(lens).collect();
    let zeros = vec![0u8; plan.iter().map(|c| c.range.len()).max().unwrap_or(0)];
    let header_bytes = header.encode();
    let chunks = std::iter::once((1, &header_bytes[..]))
        .chain(plan.iter().map(|c| (c.iterator, &zeros[..c.range.len()])));
    RedisCuckooFilter::from_chunks(chunks)
}

/// The `DUMP` fallback of an import.
pub(super) fn import_by_dump(session: &mut Session<'_>) -> Result<RedisCuckooFilter, BridgeError> {
    let key = session.key;
    match session.call("DUMP", redis::cmd("DUMP").arg(key))? {
        Value::Nil => Err(BridgeError::MissingKey {
            key: show(key),
            message: "DUMP answered nil".to_owned(),
        }),
        Value::BulkString(payload) => {
            RedisCuckooFilter::from_dump_payload(&payload).map_err(|e| session.inconsistent(e))
        }
        other => Err(session.unexpected("DUMP", &other)),
    }
}

/// Finds out, before a filter is sent, whether the server has the RedisBloom module: a
/// server without it answers an unknown `CF.LOADCHUNK` with an error that echoes the start of
/// its arguments, binary chunk bytes the client cannot parse (the connection is lost), and
/// `RESTORE` with a bare `ERR Bad data format`.
///
/// `COMMAND INFO CF.LOADCHUNK` answers `nil` where the command is unknown. Where `COMMAND` is
/// refused (renamed, or denied by an ACL, as managed services do), `CF.INFO` without a key
/// asks the module itself: it answers with its arity error, a server without it with `unknown
/// command` (ASCII only, so the reply parses whatever it echoes). `MODULE LIST` is not used:
/// it is an admin command, the one most often denied.
fn check_module(session: &mut Session<'_>) -> Result<(), BridgeError> {
    let info = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("CF.LOADCHUNK")
        .to_owned();
    if let Ok(Value::Array(commands)) = session.raw("COMMAND", &info)? {
        match commands.as_slice() {
            [Value::Nil] => {
                return Err(BridgeError::ModuleMissing {
                    message: "COMMAND INFO CF.LOADCHUNK answered nil".to_owned(),
                })
            }
            [Value::Array(_)] => return Ok(()),
            _ => {}
        }
    }
    match session.raw("CF.INFO", &redis::cmd("CF.INFO"))? {
        Err(message) if message.starts_with("ERR unknown command") => {
            Err(BridgeError::ModuleMissing { message })
        }
        _ => Ok(()),
    }
}

/// The server's `proto-max-bulk-len` (the longest argument it takes: a longer one makes it
/// close the connection), or `None` where `CONFIG GET` is refused or its reply is unclear.
pub(super) fn max_bulk_len(session: &mut Session<'_>) -> Result<Option<u64>, BridgeError> {
    let get = redis::cmd("CONFIG")
        .arg("GET")
        .arg("proto-max-bulk-len")
        .to_owned();
    let Ok(reply) = session.raw("CONFIG", &get)? else {
        return Ok(None);
    };
    let value = match &reply {
        Value::Array(pair) if pair.len() == 2 => &pair[1],
        Value::Map(pairs) if pairs.len() == 1 => &pairs[0].1,
        _ => return Ok(None),
    };
    Ok(match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok().and_then(|t| t.parse().ok()),
        Value::SimpleString(text) => text.parse().ok(),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    })
}

/// Appends a RESP bulk string's length line.
fn put_bulk_len(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    out.extend_from_slice(len.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a RESP bulk string.
fn put_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    put_bulk_len(out, bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// The `Restore` export (with an expiry of `ttl_ms` milliseconds, or none for 0): returns the
/// bytes sent and the RDB version taken.
pub(super) fn restore(
    session: &mut Session<'_>,
    header: &Header,
    data: &[Vec<u8>],
    replace: bool,
    ttl_ms: u64,
    max_bulk: Option<u64>,
) -> Result<(u64, u16), BridgeError> {
    let lens: Vec<usize> = data.iter().map(Vec::len).collect();
    let len = payload::encoded_len(header, &lens);
    if let Some(limit) = max_bulk.filter(|&limit| len as u64 > limit) {
        return Err(BridgeError::Refused {
            command: "RESTORE",
            message: format!(
                "the payload is {len} bytes, over the server's proto-max-bulk-len of {limit} \
                 (raise it, or export with LoadChunk)"
            ),
        });
    }
    // A server that refuses INFO (an ACL) is tried from the newest version down.
    let info = session.raw("INFO", redis::cmd("INFO").arg("server"))?;
    let newest = info
        .ok()
        .and_then(|info| redis_version(&info))
        .map_or(MAX_RDB_VERSION, |v| rdb_version_for(&v));
    // `RESTORE key 0 payload [REPLACE]` in RESP, the payload written straight into it: the
    // snapshot and this buffer are the only copies of the filter (a `Cmd` would copy the
    // payload once more, and again when packed). A lower RDB version rewrites only the footer.
    let key = session.key;
    let mut packed = Vec::with_capacity(len + key.len() + 64);
    packed.extend_from_slice(if replace { b"*5\r\n" } else { b"*4\r\n" });
    put_bulk(&mut packed, b"RESTORE");
    put_bulk(&mut packed, key);
    put_bulk(&mut packed, ttl_ms.to_string().as_bytes());
    put_bulk_len(&mut packed, len);
    let start = packed.len();
    let slices: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    payload::encode_into(&mut packed, header, &slices, newest);
    debug_assert_eq!(packed.len() - start, len);
    packed.extend_from_slice(b"\r\n");
    if replace {
        put_bulk(&mut packed, b"REPLACE");
    }
    let mut sent = 0u64;
    let mut refusal_text = String::new();
    for version in (MIN_RDB_VERSION..=newest).rev() {
        if version != newest {
            payload::set_version(&mut packed[start..start + len], version);
        }
        sent += len as u64;
        match session.raw_packed("RESTORE", &packed)? {
            Ok(reply) => {
                expect_ok(session, "RESTORE", reply)?;
                return Ok((sent, version));
            }
            Err(message) if message.contains(BAD_VERSION_REPLY) => refusal_text = message,
            Err(message) => return Err(refusal("RESTORE", session.key, message)),
        }
    }
    // Even RDB version 9 was refused: a server older than Redis 5.0.
    Err(BridgeError::Refused {
        command: "RESTORE",
        message: refusal_text,
    })
}

/// The `LoadChunk` export: returns the bytes sent.
fn load_chunks(
    session: &mut Session<'_>,
    header: &Header,
    data: &[Vec<u8>],
    replace: bool,
    max_bulk: Option<u64>,
) -> Result<u64, BridgeError> {
    let key = session.key;
    if !replace {
        let exists = session.call("EXISTS", redis::cmd("EXISTS").arg(key))?;
        if expect_int(session, "EXISTS", exists)? != 0 {
            return Err(BridgeError::KeyExists {
                key: show(key),
                message: None,
            });
        }
    }
    let tmp = temp_key(key);
    let header_bytes = header.encode();
    let mut sent = HEADER_LEN as u64;
    // Chunks no longer than the server takes in one argument (CF.LOADCHUNK takes any size
    // within a sub-filter; the header's 38 bytes are under any proto-max-bulk-len, 1 MiB at
    // least).
    let max_chunk = max_bulk.map_or(MAX_CHUNK, |limit| {
        MAX_CHUNK.min(usize::try_from(limit).unwrap_or(usize::MAX))
    });
    // The header (which creates the temporary key, every sub-filter allocated) and its expiry
    // in one transaction: a connection lost between the two must not leave a key that never
    // expires. The server runs neither unless it receives EXEC.
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe.cmd("CF.LOADCHUNK")
        .arg(&tmp)
        .arg(1)
        .arg(&header_bytes[..]);
    pipe.cmd("PEXPIRE").arg(&tmp).arg(TEMP_KEY_TTL_MS);
    let replies = session.pipeline("EXEC", &mut pipe)?.unwrap_or_default();
    let mut replies = replies.into_iter();
    let created = replies.next().unwrap_or_default();
    // On failure nothing was created (or a key of this name, unique to this process, time and
    // counter, existed: leave it).
    expect_ok(session, "CF.LOADCHUNK", created)?;
    let result = (|| {
        // Data chunks in pipelines of about 16 MiB, each followed by a fresh expiry. All-zero
        // chunks are skipped: the header created the sub-filters zero-filled.
        let lens = data.iter().map(Vec::len);
        let mut plan = chunks::data_chunks_of(lens, max_chunk)
            .filter(|c| data[c.filter][c.range.clone()].iter().any(|&b| b != 0))
            .peekable();
        // Each pipeline is packed by hand into one buffer of its final size: a `Pipeline` would
        // copy every chunk into its commands, then again when packed.
        while plan.peek().is_some() {
            let mut batch = Vec::new();
            let mut bytes = 0usize;
            while let Some(c) =
                plan.next_if(|c| bytes == 0 || bytes + c.range.len() <= PIPELINE_BYTES)
            {
                bytes += c.range.len();
                batch.push(c);
            }
            // Per command: the array and 4 length lines, the name, the key, an iterator of at
            // most 20 digits, the CRLFs; 128 bytes cover all but the key and the chunk.
            let commands = batch.len() + 1;
            let mut packed = Vec::with_capacity(bytes + commands * (tmp.len() + 128));
            for c in batch {
                packed.extend_from_slice(b"*4\r\n");
                put_bulk(&mut packed, b"CF.LOADCHUNK");
                put_bulk(&mut packed, &tmp);
                put_bulk(&mut packed, c.iterator.to_string().as_bytes());
                put_bulk(&mut packed, &data[c.filter][c.range]);
            }
            packed.extend_from_slice(b"*3\r\n");
            put_bulk(&mut packed, b"PEXPIRE");
            put_bulk(&mut packed, &tmp);
            put_bulk(&mut packed, TEMP_KEY_TTL_MS.to_string().as_bytes());
            sent += bytes as u64;
            let replies = session
                .packed_pipeline("CF.LOADCHUNK", &packed, commands, false)?
                .unwrap_or_default();
            let count = replies.len();
            for (i, reply) in replies.into_iter().enumerate() {
                if i + 1 < count {
                    expect_ok(session, "CF.LOADCHUNK", reply)?;
                } else if expect_int(session, "PEXPIRE", reply)? != 1 {
                    return Err(BridgeError::Refused {
                        command: "PEXPIRE",
                        message: "the temporary key vanished during the export".to_owned(),
                    });
                }
            }
        }
        // Publish: PERSIST the temporary key and rename it, in one transaction.
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("PERSIST").arg(&tmp);
        if replace {
            pipe.cmd("RENAME").arg(&tmp).arg(key);
        } else {
            pipe.cmd("RENAMENX").arg(&tmp).arg(key);
            pipe.cmd("DEL").arg(&tmp);
        }
        let replies = session.pipeline("EXEC", &mut pipe)?.unwrap_or_default();
        let mut replies = replies.into_iter();
        let persisted = replies.next().unwrap_or_default();
        expect_int(session, "PERSIST", persisted)?;
        let renamed = replies.next().unwrap_or_default();
        if replace {
            expect_ok(session, "RENAME", renamed)
        } else if expect_int(session, "RENAMENX", renamed)? == 1 {
            Ok(())
        } else {
            Err(BridgeError::KeyExists {
                key: show(key),
                message: None,
            })
        }
    })();
    if result.is_err() {
        session.quietly(redis::cmd("DEL").arg(&tmp));
    }
    result.map(|()| sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redisbloom::cluster_slot::reference_slot;

    #[test]
    fn rdb_versions_follow_the_redis_version() {
        for (version, rdb) in [
            ("5.0.14", 9),
            ("6.2.17", 9),
            ("7.0.15", 10),
            ("7.2.4", 11),
            ("7.4.2", 12),
            ("8.0.2", 12),
            ("8.6.0", 12),
            ("255.255.255", 12),
            ("garbage", 12),
            ("", 12),
        ] {
            assert_eq!(rdb_version_for(version), rdb, "{version}");
        }
    }

    /// Temporary keys land in their key's slot: keys with and without a hash tag, with a `}`
    /// but no tag, binary keys.
    #[test]
    fn temp_keys_share_the_hash_slot() {
        let keys: [&[u8]; 20] = [
            b"users",
            b"user:{42}",
            b"a{b",
            b"{}x",
            b"a}b",
            b"}",
            b"{",
            b"{}",
            b"{a}{b}",
            b"a{b}c",
            b"}{a}",
            b"x{}y{z}",
            b"{{}}",
            b"{}}",
            b"}}{",
            b"",
            b"\xff\x00}\x80",
            b"\x00{\xff}\x01",
            b"\xfe{}\xfd",
            b"{\x00\x7d",
        ];
        for key in keys {
            let tmp = temp_key(key);
            assert_eq!(
                reference_slot(&tmp),
                reference_slot(key),
                "{:?} -> {:?}",
                show(key),
                show(&tmp)
            );
            assert_eq!(key_slot(&tmp), key_slot(key), "{:?}", show(key));
            let at = tmp.windows(key.len().max(1)).position(|w| w == key);
            assert!(key.is_empty() || at.is_some(), "{:?}", show(&tmp));
        }
        assert_ne!(temp_key(b"k"), temp_key(b"k"));
    }

    #[test]
    fn export_checks_refuse_inconsistent_snapshots() {
        let f = RedisCuckooFilter::reserve(64).unwrap();
        f.insert("a").unwrap();
        let (header, data) = f.snapshot();
        assert_eq!(check_exportable(&header, &data), Ok(()));
        let mut short = data.clone();
        short[0].pop();
        assert!(matches!(
            check_exportable(&header, &short),
            Err(LoadError::SubFilterLength { .. })
        ));
        let two = Header {
            filters: 2,
            expansion: 0,
            ..header
        };
        let doubled = vec![data[0].clone(), data[0].clone()];
        assert!(matches!(
            check_exportable(&two, &doubled),
            Err(LoadError::ZeroExpansionWithSubFilters { .. })
        ));
        let odd = Header {
            buckets: 24,
            ..header
        };
        assert!(matches!(
            check_exportable(&odd, &data),
            Err(LoadError::BucketsNotPowerOfTwo { .. })
        ));
        let miscounted = Header { items: 2, ..header };
        assert!(matches!(
            check_exportable(&miscounted, &data),
            Err(LoadError::ItemCount { .. })
        ));
        let missing = Header {
            filters: 2,
            expansion: 1,
            ..header
        };
        assert!(matches!(
            check_exportable(&missing, &data),
            Err(LoadError::FilterCount { .. })
        ));
    }

    #[test]
    fn an_empty_filter_rebuilds_from_its_geometry() {
        let header = Header {
            items: 0,
            buckets: 8,
            deletes: 3,
            filters: 3,
            bucket_size: 2,
            max_iterations: 7,
            expansion: 2,
        };
        let f = empty_filter(header).unwrap();
        let info = f.info();
        assert_eq!(
            (info.buckets, info.filters, info.deletes, info.bucket_size),
            (8, 3, 3, 2)
        );
        assert_eq!((info.expansion, info.max_iterations, info.items), (2, 7, 0));
        assert!(f.scandump().is_empty());
    }
}
