//! Memory for bucket words: one contiguous array of `AtomicU64`.
//!
//! Large tables ask the kernel for transparent huge pages (Linux `madvise(MADV_HUGEPAGE)`,
//! honoured when the system's THP mode is `madvise` or `always`): a lookup touches two random
//! buckets, and with 4 KiB pages nearly every such touch in a table of tens of megabytes also
//! misses the TLB. The advice must come before the pages are first touched, so those tables are
//! allocated uninitialised, 2 MiB-aligned, advised, and only then zeroed. Everything else is an
//! ordinary allocation. This module holds the crate's only `unsafe` code.
//!
//! Under loom, atomics are loom objects that cannot be made by zeroing memory: the words are a
//! plain boxed slice there.

use super::AllocationFailed;
use crate::sync::AtomicU64;

/// Tables at least this large (bytes) use huge pages.
#[cfg(not(loom))]
const HUGE_PAGE: usize = 2 << 20;

#[cfg(not(loom))]
pub(crate) use real::BucketWords;

#[cfg(loom)]
pub(crate) use modelled::BucketWords;

#[cfg(not(loom))]
#[allow(unsafe_code)]
mod real {
    use std::alloc::{self, Layout};
    use std::ops::Deref;
    use std::ptr::NonNull;

    use super::{AllocationFailed, AtomicU64, HUGE_PAGE};

    /// An owned, initialised `[AtomicU64]` with the allocation's own layout.
    pub(crate) struct BucketWords {
        ptr: NonNull<AtomicU64>,
        len: usize,
        layout: Layout,
    }

    // SAFETY: `BucketWords` owns its allocation exclusively, like `Box<[AtomicU64]>`, which is
    // Send and Sync because `AtomicU64` is; all shared access goes through `&[AtomicU64]`.
    unsafe impl Send for BucketWords {}
    // SAFETY: as above.
    unsafe impl Sync for BucketWords {}

    impl BucketWords {
        /// `len` (> 0) zeroed words; with `huge_pages`, advised onto huge pages when large.
        pub(crate) fn zeroed(len: usize, huge_pages: bool) -> Result<Self, AllocationFailed> {
            let failed = AllocationFailed {
                bytes: len.saturating_mul(8),
            };
            let bytes = len.checked_mul(8).ok_or(failed)?;
            let huge = huge_pages && bytes >= HUGE_PAGE;
            let align = if huge {
                HUGE_PAGE
            } else {
                std::mem::align_of::<AtomicU64>()
            };
            let layout = Layout::from_size_align(bytes, align).map_err(|_| failed)?;
            assert!(layout.size() > 0, "tables have at least two buckets");
            let raw = if huge {
                // SAFETY: `layout` has a non-zero size (asserted above).
                let raw = unsafe { alloc::alloc(layout) };
                if !raw.is_null() {
                    advise_huge_pages(raw, bytes);
                    // SAFETY: `raw` is valid for writes of `bytes` bytes (just allocated with
                    // that size); writing zeros initialises every word, since an all-zero
                    // `AtomicU64` is a valid zero.
                    unsafe { raw.write_bytes(0, bytes) };
                }
                raw
            } else {
                // SAFETY: `layout` has a non-zero size (asserted above).
                unsafe { alloc::alloc_zeroed(layout) }
            };
            let ptr = NonNull::new(raw.cast::<AtomicU64>()).ok_or(failed)?;
            Ok(BucketWords { ptr, len, layout })
        }

        /// Takes over a boxed slice (a table restored from a stream), advising its memory onto
        /// huge pages where it happens to cover whole aligned ones.
        pub(crate) fn from_boxed(words: Box<[AtomicU64]>, huge_pages: bool) -> Self {
            let len = words.len();
            let layout = Layout::for_value::<[AtomicU64]>(&words);
            let raw = Box::into_raw(words).cast::<AtomicU64>();
            if huge_pages && layout.size() >= HUGE_PAGE {
                advise_huge_pages(raw.cast::<u8>(), layout.size());
            }
            // A Box's pointer is never null.
            let ptr = NonNull::new(raw).expect("a Box's pointer is non-null");
            BucketWords { ptr, len, layout }
        }
    }

    impl Deref for BucketWords {
        type Target = [AtomicU64];

        fn deref(&self) -> &[AtomicU64] {
            // SAFETY: `ptr` points to `len` initialised `AtomicU64`s that we own until drop;
            // the slice borrows `self`, so it cannot outlive the allocation.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
        }
    }

    impl Drop for BucketWords {
        fn drop(&mut self) {
            // SAFETY: `ptr` was allocated by the global allocator with exactly `layout`
            // (directly, or by the Box whose layout `from_boxed` recorded), and is freed once.
            unsafe { alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), self.layout) };
        }
    }

    /// Asks the kernel to back `[start, start + len)` with transparent huge pages; a hint, so
    /// a refusal (no THP support, THP disabled) changes nothing.
    #[cfg(target_os = "linux")]
    fn advise_huge_pages(start: *mut u8, len: usize) {
        // The advice applies to whole pages: round the start up to a huge-page boundary.
        let offset = start.align_offset(HUGE_PAGE);
        if offset >= len {
            return;
        }
        // SAFETY: the range lies inside one live allocation of `len` bytes starting at `start`;
        // madvise(MADV_HUGEPAGE) only changes how the kernel backs it, never its contents.
        unsafe {
            libc::madvise(
                start.add(offset).cast::<libc::c_void>(),
                len - offset,
                libc::MADV_HUGEPAGE,
            );
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_huge_pages(_start: *mut u8, _len: usize) {}
}

#[cfg(loom)]
mod modelled {
    use std::ops::Deref;

    use super::{AllocationFailed, AtomicU64};

    pub(crate) struct BucketWords(Box<[AtomicU64]>);

    impl BucketWords {
        pub(crate) fn zeroed(len: usize, _huge_pages: bool) -> Result<Self, AllocationFailed> {
            Ok(BucketWords((0..len).map(|_| AtomicU64::new(0)).collect()))
        }

        pub(crate) fn from_boxed(words: Box<[AtomicU64]>, _huge_pages: bool) -> Self {
            BucketWords(words)
        }
    }

    impl Deref for BucketWords {
        type Target = [AtomicU64];

        fn deref(&self) -> &[AtomicU64] {
            &self.0
        }
    }
}
