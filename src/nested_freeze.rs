//! The marks a thread leaves on the filters it is freezing (for a save, a clone or a clear),
//! so that the destination of a save that clears, clones or saves the same filter on the same
//! thread gets an error or a panic instead of waiting for itself forever.

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

/// Why a whole-filter operation refuses to run inside a save of the same filter.
pub(crate) const NESTED: &str =
    "a filter cannot be cleared or cloned by the writer of its own save";

/// The error of a save from inside a save of the same filter.
pub(crate) fn nested_save() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Deadlock,
        "this filter is already being saved on this thread (a save inside its own save)",
    )
}

/// This thread's mark on a filter it freezes; removed on drop.
pub(crate) struct FreezingHere(usize);

impl FreezingHere {
    /// `None` if this thread already freezes `filter`.
    pub(crate) fn enter<T>(filter: &T) -> Option<Self> {
        let at = filter as *const T as usize;
        FREEZING.with(|marks| {
            let mut marks = marks.borrow_mut();
            (!marks.contains(&at)).then(|| {
                marks.push(at);
                FreezingHere(at)
            })
        })
    }
}

impl Drop for FreezingHere {
    fn drop(&mut self) {
        FREEZING.with(|marks| marks.borrow_mut().retain(|&at| at != self.0));
    }
}
