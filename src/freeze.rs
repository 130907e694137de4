//! The whole-filter freeze that every filter type uses for a save, a clone, a clear or a
//! compaction, and the one policy for such an operation nested inside another of the same
//! filter on the same thread.
//!
//! [`freeze`] takes, in this order: this thread's mark on the filter, the filter's grow lock (no
//! level, doubling or sub-filter is added meanwhile, and whole-filter operations run one at a
//! time), then each part's [`StripeSet::freeze`](crate::stripe::StripeSet::freeze), in the order
//! given (oldest first: the order writers lock parts in). Writers wait until the [`Frozen`]
//! guard is dropped; lookups and counts go on. Dropping it releases them in the reverse order.
//!
//! # Nested calls
//!
//! A save hands the filter's bytes to the caller's `io::Write` while the filter is frozen, so
//! that destination's code runs inside the freeze. If it starts another whole-filter operation
//! on the same filter, on the same thread, that operation would wait for the grow lock its own
//! thread holds, forever. The mark is what tells it apart: each thread keeps the addresses of
//! the filters it is freezing now, and [`freeze`] refuses with [`Nested`] when the filter's is
//! among them. The policy, for every filter type:
//!
//! - A save (`write_to`, `Serialize`) inside a save of the same filter on the same thread
//!   returns an `io::Error` of kind [`Deadlock`](std::io::ErrorKind::Deadlock) (`Serialize`:
//!   the serializer's error, carrying its message). Never a hang, never an empty snapshot.
//! - An operation that has no error to return panics with [`NESTED`]: `to_bytes`, `clone`,
//!   `clear`, `CuckooFilter::finish_doubling` (whose splits would wait for the freeze);
//!   each documents it under `# Panics`. It panics before it changes anything, and the panic
//!   unwinds through the destination and the outer save, which releases its freeze: the filter
//!   is unchanged and usable.
//! - Other filters, and the same filter on other threads, are unaffected: a save's destination
//!   may save, clone or clear another filter, and another thread's save of the same filter
//!   waits for this one as any writer does.
//!
//! A `RedisCuckooFilter` runs none of the caller's code while frozen (its dumps copy the
//! sub-filters' bytes, then encode and send them), so its operations never meet a mark; they
//! take one all the same, through the same [`freeze`].
//!
//! Inserts and removes are writers, not whole-filter operations: inside a save of the same
//! filter on the saving thread they wait for that save forever, as `write_to` documents.

use std::io;

use crate::stripe::FreezeGuard;
use crate::sync::{GrowGuard, GrowLock};

#[cfg(not(loom))]
std::thread_local! {
    /// Addresses of the filters this thread is freezing now (nested saves of other filters
    /// are fine; of the same one, a deadlock).
    static FREEZING: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

// Loom runs its threads on one OS thread: its own thread-locals keep them apart.
#[cfg(loom)]
loom::thread_local! {
    static FREEZING: std::cell::RefCell<Vec<usize>> = std::cell::RefCell::new(Vec::new());
}

/// The panic of a whole-filter operation with no error to return, run inside a save of the
/// same filter on the same thread.
pub(crate) const NESTED: &str = "a filter cannot be cleared or cloned by the writer of its own \
     save (nor turned into bytes, nor its doubling finished): that save holds the filter frozen \
     on this thread";

/// The message of a save's `Deadlock` error, inside a save of the same filter.
const NESTED_SAVE: &str =
    "this filter is already being saved on this thread (a save inside its own save)";

/// A whole-filter operation refused: this thread is freezing the same filter already (the
/// destination of its save started it).
#[derive(Debug)]
pub(crate) struct Nested;

impl Nested {
    /// For an operation with no error to return: panics with [`NESTED`].
    #[track_caller]
    pub(crate) fn panic(self) -> ! {
        panic!("{NESTED}")
    }
}

impl From<Nested> for io::Error {
    /// A save inside a save of the same filter: [`io::ErrorKind::Deadlock`].
    fn from(_: Nested) -> io::Error {
        io::Error::new(io::ErrorKind::Deadlock, NESTED_SAVE)
    }
}

/// This thread's mark on a filter it freezes; removed on drop.
pub(crate) struct Mark(usize);

impl Mark {
    /// Marks `filter` as frozen by this thread; [`Nested`] if it is already.
    pub(crate) fn enter<F: ?Sized>(filter: &F) -> Result<Mark, Nested> {
        let at = address(filter);
        FREEZING.with(|marks| {
            let mut marks = marks.borrow_mut();
            if marks.contains(&at) {
                return Err(Nested);
            }
            marks.push(at);
            Ok(Mark(at))
        })
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        FREEZING.with(|marks| marks.borrow_mut().retain(|&at| at != self.0));
    }
}

/// [`Nested`] if this thread is freezing `filter` now: for an operation that does not freeze
/// the filter itself but would wait for a freeze (a doubling's splits take stripes).
pub(crate) fn refuse_if_frozen_here<F: ?Sized>(filter: &F) -> Result<(), Nested> {
    let at = address(filter);
    FREEZING.with(|marks| {
        if marks.borrow().contains(&at) {
            Err(Nested)
        } else {
            Ok(())
        }
    })
}

fn address<F: ?Sized>(filter: &F) -> usize {
    (filter as *const F).cast::<()>() as usize
}

/// A filter frozen whole (see the module docs); everything is released on drop, the parts'
/// freezes first, then the grow lock, then the mark.
pub(crate) struct Frozen<'a, P: ?Sized> {
    /// Each part with its freeze, in the order frozen. Dropped first (fields drop in order).
    parts: Vec<(&'a P, FreezeGuard<'a>)>,
    _growth: GrowGuard<'a>,
    _mark: Mark,
}

impl<'a, P: ?Sized> Frozen<'a, P> {
    /// The parts, each with the guard that freezes it, in the order frozen.
    pub(crate) fn parts(&self) -> &[(&'a P, FreezeGuard<'a>)] {
        &self.parts
    }
}

/// Freezes `filter` whole: marks it as frozen by this thread, takes `grow`, then calls `parts`
/// (under the grow lock, so the parts it lists stay all there are) and freezes each part with
/// `freeze_part`, in order. [`Nested`], taking nothing, if this thread is freezing `filter`
/// already.
pub(crate) fn freeze<'a, F: ?Sized, P: ?Sized + 'a, I>(
    filter: &F,
    grow: &'a GrowLock,
    parts: impl FnOnce() -> I,
    freeze_part: impl Fn(&'a P) -> FreezeGuard<'a>,
) -> Result<Frozen<'a, P>, Nested>
where
    I: IntoIterator<Item = &'a P>,
{
    let mark = Mark::enter(filter)?;
    let growth = grow.lock();
    let parts = parts()
        .into_iter()
        .map(|part| (part, freeze_part(part)))
        .collect();
    Ok(Frozen {
        parts,
        _growth: growth,
        _mark: mark,
    })
}
