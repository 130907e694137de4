//! Real Redis servers for the bridge tests (`tests/`): each test starts its own `redis-server`
//! (Debian's, with `<repo>/.redis-stack/redisbloom.so` loaded, both installed by
//! `scripts/install-redis.sh`) on a free port bound to 127.0.0.1, without persistence, and
//! stops it on drop.
//!
//! The tests are `#[ignore]`d, so that `cargo test` counts them as not run; run them with
//! `cargo test -p redis-tests -- --include-ignored`. A test that is run fails when it cannot
//! start its server, saying what is missing and how to install it: asked for, it never passes
//! without running. `REDIS_SERVER` and `REDISBLOOM_MODULE` override the paths.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The redis-server binary: `$REDIS_SERVER`, else the first `redis-server` on `PATH`.
fn server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

/// The module: `$REDISBLOOM_MODULE`, else `<repo>/.redis-stack/redisbloom.so`.
fn module_path() -> PathBuf {
    std::env::var_os("REDISBLOOM_MODULE").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.redis-stack/redisbloom.so"),
        PathBuf::from,
    )
}

/// What to start: the binary and the module. Panics, saying how to install them, where either
/// is missing.
fn prerequisites(test: &str) -> (PathBuf, PathBuf) {
    let why = match (server_binary(), module_path()) {
        (None, _) => "no redis-server on PATH".to_owned(),
        (Some(bin), _) if !bin.is_file() => format!("no redis-server at {}", bin.display()),
        (Some(bin), module) if !module.is_file() => format!(
            "{} has no RedisBloom module at {}",
            bin.display(),
            module.display()
        ),
        (Some(bin), module) => return (bin, module),
    };
    panic!(
        "{test}: needs a Redis server with RedisBloom, but {why}. Install both with \
         `bash scripts/install-redis.sh` (REDIS_SERVER and REDISBLOOM_MODULE override the \
         paths)."
    )
}

/// A `redis-server` child process, killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

impl Server {
    /// A server with the RedisBloom module; panics where [`prerequisites`] are missing.
    pub fn start(test: &str) -> Server {
        Self::start_with(test, &[], true)
    }

    /// A server with extra arguments (`--replicaof 127.0.0.1 PORT`, ...), with or without the
    /// module (both must be installed).
    pub fn start_with(test: &str, extra: &[&str], module: bool) -> Server {
        let (bin, module_path) = prerequisites(test);
        for _attempt in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("atomic-cuckoo-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let mut cmd = Command::new(&bin);
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .args(extra);
            if module {
                cmd.arg("--loadmodule").arg(&module_path);
            }
            let log = std::fs::File::create(dir.join("server.log")).expect("log file");
            let child = cmd
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .stdin(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{test}: cannot run {}: {e}", bin.display()));
            let mut server = Server { child, port, dir };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("{test}: redis-server did not start:\n{log}"),
            }
        }
        panic!("{test}: no free port after 5 tries")
    }

    /// Waits until the server answers PING; on failure, its log.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Err(self.log());
            }
            if let Ok(mut conn) = self.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    return Ok(());
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        Err(self.log())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("connection")
    }

    /// A RESP3 connection.
    pub fn conn_resp3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .expect("client")
            .get_connection()
            .expect("connection")
    }

    /// A replica of this server (`--replicaof`), once its link is up.
    pub fn replica(&self, test: &str) -> Server {
        let port = self.port.to_string();
        let replica = Server::start_with(test, &["--replicaof", "127.0.0.1", &port], true);
        let mut conn = replica.conn();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut conn)
                .unwrap();
            if info.contains("master_link_status:up") {
                return replica;
            }
            assert!(
                Instant::now() < deadline,
                "{test}: the replica did not sync:\n{info}\n{}",
                replica.log()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// What a [`CuttingProxy`] does once the client has sent a given command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Forward the command whole, then close both sides (the server sees a client that
    /// vanished right after it).
    Cut,
    /// Forward it and everything after, but hold back every byte the server sends from then on
    /// (a server that stalls: the client's read times out). See [`CuttingProxy::held`].
    HoldReplies,
    /// Hold the command and everything after it in the proxy, the connection to the server
    /// kept open, until [`CuttingProxy::release`]; then forward it all (a hop that still
    /// delivers a request after its client gave up).
    HoldRequest,
}

/// A watched command: its name (upper case), which occurrence of it (1 = the first), and what
/// then.
type Watch = Option<(Vec<u8>, usize, Trigger)>;

/// A TCP proxy to a server that drops the connection once a set number of bytes went from the
/// client to the server (the server sees a client that vanished mid-command), or acts once the
/// client sent a given command ([`CuttingProxy::on_command`]). One client.
pub struct CuttingProxy {
    pub port: u16,
    /// Bytes forwarded from the client so far.
    pub forwarded: Arc<AtomicUsize>,
    /// The cut: no byte past this many is forwarded (`usize::MAX` until set).
    pub limit: Arc<AtomicUsize>,
    /// The command watched for.
    command: Arc<Mutex<Watch>>,
    /// Whether the command was seen (and the trigger acted).
    pub triggered: Arc<AtomicBool>,
    /// Server bytes held back after a [`Trigger::HoldReplies`].
    held: Arc<Mutex<Vec<u8>>>,
    /// Names of the whole commands seen while one is watched for (see [`CuttingProxy::record`]).
    names: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Set by [`CuttingProxy::release`].
    released: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

/// The length and name of the RESP command (an array of bulk strings) at the start of `buf`,
/// or `None` while it is incomplete.
fn command_at(buf: &[u8]) -> Option<(usize, &[u8])> {
    fn line(buf: &[u8], at: usize) -> Option<(usize, usize)> {
        let end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(&buf[at + 1..end]).ok()?.parse().ok()?;
        Some((n, end + 2))
    }
    if buf.is_empty() {
        return None;
    }
    assert_eq!(buf[0], b'*', "the proxy reads RESP arrays only");
    let (args, mut at) = line(buf, 0)?;
    let mut name: &[u8] = &[];
    for i in 0..args {
        let (len, start) = line(buf, at)?;
        if buf.len() < start + len + 2 {
            return None;
        }
        if i == 0 {
            name = &buf[start..start + len];
        }
        at = start + len + 2;
    }
    Some((at, name))
}

impl CuttingProxy {
    pub fn start(server_port: u16) -> CuttingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let forwarded = Arc::new(AtomicUsize::new(0));
        let limit = Arc::new(AtomicUsize::new(usize::MAX));
        let command = Arc::new(Mutex::new(None::<(Vec<u8>, usize, Trigger)>));
        let triggered = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(Vec::new()));
        let names = Arc::new(Mutex::new(Vec::new()));
        let released = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (fwd, lim, stopped) = (forwarded.clone(), limit.clone(), stop.clone());
        let (cmd, trig, hold) = (command.clone(), triggered.clone(), held.clone());
        let (names2, released2) = (names.clone(), released.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)) else {
                    return;
                };
                let (mut c_read, mut s_write) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut s_read, mut c_write) = (server, client);
                let (fwd, lim) = (fwd.clone(), lim.clone());
                let (cmd, trig) = (cmd.clone(), trig.clone());
                let (names, released, stopped) =
                    (names2.clone(), released2.clone(), stopped.clone());
                let holding = Arc::new(AtomicBool::new(false));
                let (hold, holding2) = (hold.clone(), holding.clone());
                // Server to client, as it comes (or into `held` once holding).
                thread::spawn(move || {
                    let mut buf = vec![0u8; 64 << 10];
                    loop {
                        let n = match s_read.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if holding2.load(Ordering::SeqCst) {
                            hold.lock().unwrap().extend_from_slice(&buf[..n]);
                        } else if c_write.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_write.shutdown(Shutdown::Both);
                });
                // Client to server: whole commands while one is watched for, up to the byte
                // limit; then both sides closed.
                thread::spawn(move || {
                    let mut buf = vec![0u8; 64 << 10];
                    let mut pending = Vec::new();
                    let mut seen = 0usize;
                    'conn: loop {
                        let n = match c_read.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&buf[..n]);
                        let watched = cmd.lock().unwrap().clone();
                        let (mut end, mut cut, mut hold_from) = (pending.len(), false, None);
                        if let Some((name, nth, action)) = watched {
                            end = 0;
                            while let Some((len, got)) = command_at(&pending[end..]) {
                                names.lock().unwrap().push(got.to_ascii_uppercase());
                                end += len;
                                if got.eq_ignore_ascii_case(&name) {
                                    seen += 1;
                                    if seen == nth {
                                        trig.store(true, Ordering::SeqCst);
                                        match action {
                                            Trigger::Cut => cut = true,
                                            Trigger::HoldReplies => {
                                                // Before the command reaches the server: its
                                                // reply is held too.
                                                holding.store(true, Ordering::SeqCst);
                                                *cmd.lock().unwrap() = None;
                                                end = pending.len();
                                            }
                                            Trigger::HoldRequest => {
                                                *cmd.lock().unwrap() = None;
                                                hold_from = Some(end - len);
                                                end -= len;
                                            }
                                        }
                                        break;
                                    }
                                }
                            }
                        }
                        let done = fwd.load(Ordering::Relaxed);
                        let take = end.min(lim.load(Ordering::Relaxed).saturating_sub(done));
                        if take > 0 && s_write.write_all(&pending[..take]).is_err() {
                            break 'conn;
                        }
                        fwd.fetch_add(take, Ordering::Relaxed);
                        pending.drain(..take);
                        if take < end || cut {
                            break;
                        }
                        if hold_from.is_some() {
                            // Nothing more read from the client until released: it times out
                            // and leaves, what it sent stays here.
                            while !released.load(Ordering::SeqCst) {
                                if stopped.load(Ordering::Relaxed) {
                                    break 'conn;
                                }
                                thread::sleep(Duration::from_millis(5));
                            }
                            if s_write.write_all(&pending).is_err() {
                                break 'conn;
                            }
                            fwd.fetch_add(pending.len(), Ordering::Relaxed);
                            pending.clear();
                        }
                    }
                    let _ = s_write.shutdown(Shutdown::Both);
                    let _ = c_read.shutdown(Shutdown::Both);
                });
            }
        });
        CuttingProxy {
            port,
            forwarded,
            limit,
            command,
            triggered,
            held,
            names,
            released,
            stop,
        }
    }

    /// Records the names of the commands the client sends from now on (see
    /// [`CuttingProxy::names`]), without acting on any.
    pub fn record(&self) {
        self.names.lock().unwrap().clear();
        *self.command.lock().unwrap() = Some((b"\0none".to_vec(), usize::MAX, Trigger::Cut));
    }

    /// The names (upper case) of the commands recorded, in order.
    pub fn names(&self) -> Vec<String> {
        let names = self.names.lock().unwrap();
        names
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect()
    }

    /// Forwards what a [`Trigger::HoldRequest`] held, and all after it.
    pub fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }

    /// Cuts the connection `more` bytes from now.
    pub fn cut_after(&self, more: usize) {
        let now = self.forwarded.load(Ordering::Relaxed);
        self.limit.store(now + more, Ordering::Relaxed);
    }

    /// Acts (`what`) once the client sent the `nth` (1 = first) command named `name`; until
    /// then only whole commands are forwarded.
    pub fn on_command(&self, name: &str, nth: usize, what: Trigger) {
        *self.command.lock().unwrap() = Some((name.as_bytes().to_vec(), nth, what));
    }

    /// The server's bytes held back since a [`Trigger::HoldReplies`].
    pub fn held(&self) -> Vec<u8> {
        self.held.lock().unwrap().clone()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// Waits until `admin`'s connection is the server's only client: every other one has been
/// closed, so the server has run all it received from them.
pub fn wait_until_alone(admin: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
        if list.lines().count() == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "other clients stay:\n{list}");
        thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// A Redis Cluster of masters on 127.0.0.1, each a [`Server`] with `cluster-enabled yes`: the
/// slots split into contiguous ranges of (nearly) equal size in node order, as `redis-cli
/// --cluster create` splits them, the nodes joined with `CLUSTER MEET`. Ready when every node
/// says `cluster_state:ok` and knows every other.
pub struct Cluster {
    /// The nodes, in slot order; `None` once killed.
    pub nodes: Vec<Option<Server>>,
}

impl Cluster {
    /// `masters` masters, each with the RedisBloom module.
    pub fn start(test: &str, masters: usize) -> Cluster {
        Self::start_with_modules(test, &vec![true; masters])
    }

    /// One master per entry of `modules`, with the module where it says `true`.
    pub fn start_with_modules(test: &str, modules: &[bool]) -> Cluster {
        // Bus ports of their own: the default, the port plus 10000, may be taken or too large.
        let buses: Vec<u16> = modules.iter().map(|_| free_port()).collect();
        let nodes: Vec<Server> = modules
            .iter()
            .zip(&buses)
            .map(|(&module, bus)| {
                let bus = bus.to_string();
                Server::start_with(
                    test,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-port",
                        &bus,
                        "--cluster-node-timeout",
                        "2000",
                    ],
                    module,
                )
            })
            .collect();
        let masters = nodes.len();
        for (i, node) in nodes.iter().enumerate() {
            let mut conn = node.conn();
            let (first, last) = (i * 16384 / masters, (i + 1) * 16384 / masters - 1);
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(first)
                .arg(last)
                .query::<()>(&mut conn)
                .expect("CLUSTER ADDSLOTSRANGE");
            if i > 0 {
                redis::cmd("CLUSTER")
                    .arg("MEET")
                    .arg("127.0.0.1")
                    .arg(nodes[0].port)
                    .arg(buses[0])
                    .query::<()>(&mut conn)
                    .expect("CLUSTER MEET");
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            let mut conn = node.conn();
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut conn).unwrap();
                let known = format!("cluster_known_nodes:{masters}\r\n");
                if info.contains("cluster_state:ok") && info.contains(&known) {
                    break;
                }
                assert!(Instant::now() < deadline, "{test}: cluster not ok:\n{info}");
                thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster {
            nodes: nodes.into_iter().map(Some).collect(),
        }
    }

    /// The URLs of the nodes still running.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().flatten().map(Server::url).collect()
    }

    /// A cluster connection (the `redis` crate's), which routes each command to its key's
    /// node and follows `MOVED` and `ASK`.
    pub fn conn(&self) -> redis::cluster::ClusterConnection {
        redis::cluster::ClusterClient::builder(self.urls())
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(5))
            .retries(2)
            .build()
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }

    /// A plain connection to node `i`.
    pub fn node_conn(&self, i: usize) -> redis::Connection {
        self.nodes[i].as_ref().expect("a running node").conn()
    }

    /// Stops node `i` (its process is killed).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i] = None;
    }
}

/// `CF.SCANDUMP key 0, it, …` up to `[0, nil]`: every reply with data.
pub fn server_scandump(conn: &mut redis::Connection, key: &str) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut it = 0u64;
    loop {
        let (next, chunk): (u64, Option<Vec<u8>>) = redis::cmd("CF.SCANDUMP")
            .arg(key)
            .arg(it)
            .query(conn)
            .unwrap();
        match chunk {
            Some(chunk) if next != 0 => out.push((next, chunk)),
            _ => return out,
        }
        it = next;
    }
}
