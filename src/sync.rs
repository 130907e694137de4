//! The one module that knows whether the crate runs under loom.
//!
//! Everything else imports atomics, fences and spin hints from here, so the loom model checks in
//! `loom-tests/` exercise exactly the code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

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

/// A gate that one thread closes and opens again while others wait for it to open: an atomic
/// flag for the check on the hot path, and a mutex with a condition variable (parking_lot's;
/// loom's under loom) for the cold path, so that a waiting thread sleeps instead of spinning.
///
/// Only one thread at a time closes and opens a gate (the caller serializes them).
pub(crate) struct Gate {
    closed: AtomicBool,
    #[cfg(not(loom))]
    parking: parking_lot::Mutex<()>,
    #[cfg(not(loom))]
    opened: parking_lot::Condvar,
    #[cfg(loom)]
    parking: loom::sync::Mutex<()>,
    #[cfg(loom)]
    opened: loom::sync::Condvar,
}

impl Gate {
    pub(crate) fn new() -> Self {
        Gate {
            closed: AtomicBool::new(false),
            #[cfg(not(loom))]
            parking: parking_lot::Mutex::new(()),
            #[cfg(not(loom))]
            opened: parking_lot::Condvar::new(),
            #[cfg(loom)]
            parking: loom::sync::Mutex::new(()),
            #[cfg(loom)]
            opened: loom::sync::Condvar::new(),
        }
    }

    /// Closes the gate. Writers that take stripes learn of it through the stripes' Release
    /// hand-offs that follow (see `StripeSet::freeze`); claims (writers that take none) through
    /// Dekker's handshake with `announce`: this store is sequentially consistent, as are the
    /// closer's later loads of announcements (`announced`).
    pub(crate) fn close(&self) {
        #[cfg(not(loom))]
        self.closed.store(true, Ordering::SeqCst);
        // Loom models SeqCst loads and stores as AcqRel (tokio-rs/loom#180) but SeqCst fences
        // exactly: under loom the handshake is written with fences, its C++ equivalent.
        #[cfg(loom)]
        {
            self.closed.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
        }
    }

    /// Adds 1 to `announcement` (a claim's busy count), then tells whether the gate is closed:
    /// Dekker's handshake with `close` and `announced`. Both sides' accesses are sequentially
    /// consistent, so in their single total order either this load comes after the close (and
    /// sees the gate closed, or opened again after it), or the closer's later load of
    /// `announcement` comes after our add (and sees it, or what followed it).
    #[inline]
    pub(crate) fn announce(&self, announcement: &AtomicU64) -> bool {
        #[cfg(not(loom))]
        {
            // SeqCst: the handshake (above). On x86-64 the add is one locked instruction,
            // already a full barrier, where an add and a SeqCst fence would be two.
            announcement.fetch_add(1, Ordering::SeqCst);
            self.closed.load(Ordering::SeqCst)
        }
        #[cfg(loom)]
        {
            announcement.fetch_add(1, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            self.closed.load(Ordering::Relaxed)
        }
    }

    /// Reads an announcement word after `close` (see `announce`), with Acquire semantics: a
    /// value written by a Release end of a claim makes the claim's writes visible.
    #[inline]
    pub(crate) fn announced(&self, announcement: &AtomicU64) -> u64 {
        #[cfg(not(loom))]
        {
            // SeqCst: the handshake (see `announce`); it includes Acquire.
            announcement.load(Ordering::SeqCst)
        }
        #[cfg(loom)]
        {
            // Acquire: the closer's SeqCst fence in `close` orders it (see above).
            announcement.load(Ordering::Acquire)
        }
    }

    /// Whether the gate is closed.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release in `open`; a thread that finds the gate open again
        // happens after everything the closer did while it was closed.
        self.closed.load(Ordering::Acquire)
    }

    /// Opens the gate and wakes every thread waiting for it.
    pub(crate) fn open(&self) {
        let _parking = self.lock_parking();
        // Release: see `is_closed`. Stored under the mutex, so that no waiter can check the
        // flag, miss this store and then miss the notification too.
        self.closed.store(false, Ordering::Release);
        self.opened.notify_all();
    }

    /// Sleeps until the gate is open (returns at once if it is).
    #[cold]
    pub(crate) fn wait_open(&self) {
        let mut parking = self.lock_parking();
        // Relaxed: `open` stores under the mutex we hold, which orders it for us.
        while self.closed.load(Ordering::Relaxed) {
            #[cfg(not(loom))]
            self.opened.wait(&mut parking);
            #[cfg(loom)]
            {
                parking = self.opened.wait(parking).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    #[cfg(not(loom))]
    fn lock_parking(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.parking.lock()
    }

    #[cfg(loom)]
    fn lock_parking(&self) -> loom::sync::MutexGuard<'_, ()> {
        // The mutex guards no data, so a panic while holding it poisons nothing.
        self.parking.lock().unwrap_or_else(|e| e.into_inner())
    }
}
