//! Helpers of the save tests: a watchdog for deadlocks and a slow `Write`.
#![allow(dead_code)]

use std::io::{self, Write};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Runs `f` on its own thread; `None` if it has not returned after `limit` (the thread is
/// leaked, blocked: the test process exits without it). A panic in `f` is re-raised here.
pub fn finishes_within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => Some(v),
        Ok(Err(p)) => resume_unwind(p),
        Err(_) => None,
    }
}

/// `finishes_within`, failing the test with a deadlock message on timeout.
pub fn watchdog<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    finishes_within(limit, f)
        .unwrap_or_else(|| panic!("DEADLOCK (or livelock): {what} did not finish within {limit:?}"))
}

/// A destination that sleeps in every `write`.
pub struct SlowWriter {
    pub delay: Duration,
    pub bytes: Vec<u8>,
}

impl Write for SlowWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        thread::sleep(self.delay);
        // Short writes, so that the save calls us many times.
        let n = buf.len().min(512);
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How an operation that a save's destination ran on the filter being saved ended.
#[derive(Debug)]
pub enum Inside {
    /// It returned: what it returned, described by the operation.
    Returned(String),
    /// It panicked with this message.
    Panicked(String),
}

impl Inside {
    /// Whether it panicked with the one message of a whole-filter operation nested in a save
    /// of the same filter.
    pub fn is_nested_panic(&self) -> bool {
        matches!(self, Inside::Panicked(m) if m.contains("by the writer of its own save"))
    }
}

/// The destination of a save that, at its first write, runs `op` on the filter being saved
/// (on the saving thread) and records how it ended; it keeps every byte.
struct CallsBack<'a, F> {
    filter: &'a F,
    op: &'a dyn Fn(&F) -> String,
    inside: Option<Inside>,
    bytes: Vec<u8>,
}

impl<F> Write for CallsBack<'_, F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.inside.is_none() {
            let (filter, op) = (self.filter, self.op);
            self.inside = Some(match catch_unwind(AssertUnwindSafe(|| op(filter))) {
                Ok(returned) => Inside::Returned(returned),
                Err(payload) => Inside::Panicked(panic_message(payload)),
            });
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload
            .downcast::<&str>()
            .map_or_else(|_| "(not a string)".to_string(), |s| s.to_string()),
    }
}

/// Saves `filter` with `save` to a destination that runs `op` on the same filter from inside
/// the save (at its first write, on the saving thread): how `op` ended, and what the save
/// returned (the bytes it wrote). `None` if that did not finish within three seconds: a
/// deadlock, whose thread is left blocked.
pub fn inside_own_save<F: Send + Sync + 'static>(
    filter: &std::sync::Arc<F>,
    save: fn(&F, &mut dyn Write) -> io::Result<()>,
    op: impl Fn(&F) -> String + Send + 'static,
) -> Option<(Inside, io::Result<Vec<u8>>)> {
    let filter = std::sync::Arc::clone(filter);
    finishes_within(Duration::from_secs(3), move || {
        let mut out = CallsBack {
            filter: &*filter,
            op: &op,
            inside: None,
            bytes: Vec::new(),
        };
        let saved = save(&filter, &mut out);
        let inside = out.inside.expect("a save writes something");
        (inside, saved.map(|()| out.bytes))
    })
}

/// How the policy refuses an operation nested in a save of the same filter.
#[derive(Clone, Copy, Debug)]
pub enum Refused {
    /// A save: an error of kind `Deadlock`, which the operation describes as `Err(Deadlock)`.
    DeadlockError,
    /// An operation with no error to return: a panic with the one message.
    NestedPanic,
}

impl Refused {
    /// Panics unless `inside` is this refusal of `what`.
    pub fn assert(self, what: &str, inside: &Inside) {
        let refused = match (self, inside) {
            (Refused::DeadlockError, Inside::Returned(r)) => r == "Err(Deadlock)",
            (Refused::NestedPanic, inside) => inside.is_nested_panic(),
            _ => false,
        };
        assert!(
            refused,
            "{what} inside a save of the same filter: {inside:?}, expected {self:?}"
        );
    }
}
