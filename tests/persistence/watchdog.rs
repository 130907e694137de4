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
