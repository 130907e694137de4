//! What the sharded-export attacks share: items, the keys and expiries on servers, the
//! ledger as a test reads it, and `Faulty`, a connection that fails, retries or runs a hook at
//! the Nth command of a name (counted inside pipelines and transactions too).

use std::collections::HashMap;

use redis::{Cmd, ConnectionLike, RedisResult, Value};

pub fn items(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

pub fn keys_and_ttls_of(conns: &mut [redis::Connection]) -> Vec<(String, i64)> {
    let mut all = Vec::new();
    for conn in conns {
        let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
        for key in keys {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(conn).unwrap();
            if ttl != -2 {
                all.push((key, ttl));
            }
        }
    }
    all.sort();
    all
}

pub fn ledger_text(conn: &mut dyn ConnectionLike, name: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(format!("{{{name}}}:ledger"))
        .query(conn)
        .unwrap()
}

pub fn ledger_keys(conn: &mut dyn ConnectionLike, name: &str) -> Vec<String> {
    ledger_text(conn, name)
        .map_or_else(Vec::new, |t| t.lines().skip(2).map(str::to_owned).collect())
}

pub fn ledger_started(conn: &mut dyn ConnectionLike, name: &str) -> Option<u64> {
    ledger_text(conn, name).map(|t| {
        t.lines()
            .nth(1)
            .unwrap()
            .strip_prefix("started ")
            .unwrap()
            .parse()
            .unwrap()
    })
}

pub fn command_names(mut packed: &[u8]) -> Vec<String> {
    fn line(buf: &[u8]) -> (usize, &[u8]) {
        let end = buf.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = std::str::from_utf8(&buf[1..end]).unwrap().parse().unwrap();
        (n, &buf[end + 2..])
    }
    let mut names = Vec::new();
    while !packed.is_empty() {
        let (args, mut rest) = line(packed);
        for i in 0..args {
            let (len, after) = line(rest);
            if i == 0 {
                names.push(String::from_utf8_lossy(&after[..len]).to_ascii_uppercase());
            }
            rest = &after[len + 2..];
        }
        packed = rest;
    }
    names
}

/// What a [`Faulty`] connection does at a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Fails it with an I/O error without sending it.
    FailBefore,
    /// Sends it, then fails with an I/O error (the reply is lost).
    FailAfter,
    /// Sends it, loses the reply, and sends it again (what the `redis` crate's cluster
    /// connection does after an I/O error on a single command): the second reply is returned.
    Retry,
}

/// Code a [`Faulty`] connection runs before a command.
pub type Hook<'c> = Box<dyn FnMut() + 'c>;

/// A connection that faults at chosen (name, nth) commands and runs `before_each` before
/// every command it passes on.
pub struct Faulty<'c> {
    pub inner: &'c mut dyn ConnectionLike,
    pub rules: Vec<(String, usize, Option<Fault>)>,
    pub counts: HashMap<String, usize>,
    pub log: Vec<String>,
    pub before_each: Option<Box<dyn FnMut() + 'c>>,
    /// Hooks run before the (name, nth) command is sent (say, to kill a node).
    pub hooks: Vec<(String, usize, Option<Hook<'c>>)>,
}

pub fn injected() -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected fault").into()
}

impl<'c> Faulty<'c> {
    pub fn new(inner: &'c mut dyn ConnectionLike) -> Self {
        Faulty {
            inner,
            rules: Vec::new(),
            counts: HashMap::new(),
            log: Vec::new(),
            before_each: None,
            hooks: Vec::new(),
        }
    }

    pub fn at(mut self, name: &str, nth: usize, fault: Fault) -> Self {
        self.rules.push((name.to_owned(), nth, Some(fault)));
        self
    }

    /// Runs `hook` just before the `nth` command named `name` is sent.
    pub fn hook_at(mut self, name: &str, nth: usize, hook: Hook<'c>) -> Self {
        self.hooks.push((name.to_owned(), nth, Some(hook)));
        self
    }

    pub fn fault_for(&mut self, packed: &[u8]) -> Option<Fault> {
        let mut fault = None;
        for name in command_names(packed) {
            let n = self.counts.entry(name.clone()).or_insert(0);
            *n += 1;
            self.log.push(format!("{name}#{n}"));
            for (rule, nth, hook) in &mut self.hooks {
                if *rule == name && *nth == *n {
                    if let Some(mut hook) = hook.take() {
                        self.log.push("  <- hook".to_owned());
                        hook();
                    }
                }
            }
            for (rule, nth, action) in &mut self.rules {
                if *rule == name && *nth == *n && fault.is_none() {
                    fault = action.take();
                    if fault.is_some() {
                        self.log.push(format!("  <- {fault:?}"));
                    }
                }
            }
        }
        fault
    }

    pub fn run<T>(
        &mut self,
        packed: &[u8],
        mut send: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> RedisResult<T> {
        if let Some(check) = &mut self.before_each {
            check();
        }
        match self.fault_for(packed) {
            None => send(self.inner),
            Some(Fault::FailBefore) => Err(injected()),
            Some(Fault::FailAfter) => {
                let _ = send(self.inner);
                Err(injected())
            }
            Some(Fault::Retry) => {
                let _ = send(self.inner);
                send(self.inner)
            }
        }
    }
}

impl ConnectionLike for Faulty<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.run(cmd, |c| c.req_packed_command(cmd))
    }
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.run(cmd, |c| c.req_packed_commands(cmd, offset, count))
    }
    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let packed = cmd.get_packed_command();
        self.run(&packed, |c| c.req_command(cmd))
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
