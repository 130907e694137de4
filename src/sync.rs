//! The one module that knows whether the crate runs under loom.
//!
//! Everything else imports atomics, fences and spin hints from here, so the loom model checks in
//! `loom-tests/` exercise exactly the code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::fence;

/// How a writer waits for a stripe that another writer holds.
///
/// Outside loom it spins briefly and then yields to the OS scheduler (crossbeam's backoff). Under
/// loom a spin must yield to the model scheduler, or loom would explore the spin forever.
pub(crate) struct SpinWait {
    #[cfg(not(loom))]
    backoff: crossbeam_utils::Backoff,
}

impl SpinWait {
    pub(crate) fn new() -> Self {
        SpinWait {
            #[cfg(not(loom))]
            backoff: crossbeam_utils::Backoff::new(),
        }
    }

    pub(crate) fn wait(&self) {
        #[cfg(not(loom))]
        self.backoff.snooze();
        #[cfg(loom)]
        loom::thread::yield_now();
    }
}

/// The pause a reader takes between two optimistic attempts. It never blocks: readers stay
/// wait-free, so this is a CPU hint (or, under loom, a hand-back to the model scheduler).
pub(crate) fn reader_pause() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// The cold-path lock that serializes adding a level (parking_lot's mutex; loom's under loom,
/// whose blocking the model scheduler understands).
pub(crate) struct GrowLock {
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<()>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<()>,
}

/// Held [`GrowLock`].
pub(crate) struct GrowGuard<'a> {
    #[cfg(not(loom))]
    _inner: parking_lot::MutexGuard<'a, ()>,
    #[cfg(loom)]
    _inner: loom::sync::MutexGuard<'a, ()>,
}

impl GrowLock {
    pub(crate) fn new() -> Self {
        GrowLock {
            #[cfg(not(loom))]
            inner: parking_lot::Mutex::new(()),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(()),
        }
    }

    pub(crate) fn lock(&self) -> GrowGuard<'_> {
        GrowGuard {
            #[cfg(not(loom))]
            _inner: self.inner.lock(),
            // The mutex guards no data, so a panic while holding it poisons nothing.
            #[cfg(loom)]
            _inner: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}
