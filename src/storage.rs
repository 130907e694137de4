//! Memory for bucket words: one contiguous array of `AtomicU64`.
//!
//! A new level may be allocated by the insert that found the newest one full (when it was not
//! prepared ahead, see `levels`), and a filter may be built far larger than it will hold for long,
//! so allocating writes nothing. On Linux, tables of 16 KiB and more get a private anonymous
//! mapping of their own, which the kernel hands out zeroed page by page on first touch: the zeroing
//! and the page faults spread over the inserts that fill the table instead of stalling the one that
//! added it (writing a 16 MiB level took that insert 2–22 ms), and memory is taken only as the
//! table fills. `fault_in` takes all the faults at once, for a table built off the insert path:
//! level 0 when the builder is asked to prefault, a level prepared ahead. A mapping of its own also
//! keeps the allocator from reusing freed heap memory, which it would have to zero itself, and lets
//! a released level give its pages back (`give_back`) while it stays readable. Smaller tables, and
//! all tables elsewhere, come zeroed from the allocator.
//!
//! Tables of 2 MiB and more also ask the kernel for transparent huge pages (Linux
//! `madvise(MADV_HUGEPAGE)`, honoured when the system's THP mode is `madvise` or `always`): a
//! lookup touches two random buckets, and with 4 KiB pages nearly every such touch in a table
//! of tens of megabytes also misses the TLB. Those mappings start on a 2 MiB boundary, and the
//! advice comes before the first touch, so each 2 MiB of the table is one huge page fault.
//! `prefetch` asks for a word's line ahead of its use (`insert_many`). This module holds the
//! crate's only `unsafe` code.
//!
//! Under loom, atomics are loom objects that cannot be made by zeroing memory: the words are a
//! plain boxed slice there.

use crate::sync::AtomicU64;

/// Table bytes from which a lookup asks for its second bucket's line before it tests the
/// first, and an insert for both lines before it takes its stripes (fixed and growable
/// tables): measured (one thread, 2-core EPYC, 1 MiB of L2 a core), asking early cost present
/// lookups about 7 % at a 2 MiB table, where both lines are mostly in the caches, and gained
/// 10 % at 15 MiB and 15 % at 57 MiB.
pub(crate) const PREFETCH_FROM_BYTES: u64 = 4 << 20;

/// The bucket words could not be allocated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllocationFailed {
    pub(crate) bytes: usize,
}

/// Tables at least this large (bytes) use huge pages, and the next level of a growing filter
/// is prepared ahead from this size on (see `levels`).
#[cfg(not(loom))]
const HUGE_PAGE: usize = 2 << 20;

/// Tables at least this large (bytes) are mapped on their own (Linux), so that a released
/// level gives its memory back. Four pages: below that the memory is too little to matter, and
/// the allocator serves it faster than a mapping.
#[cfg(not(loom))]
const OWN_MAPPING: usize = 16 << 10;

#[cfg(all(test, not(loom)))]
pub(crate) use real::FAIL_ALLOCATION;
#[cfg(not(loom))]
pub(crate) use real::{prefetch, BucketWords};

#[cfg(loom)]
pub(crate) use modelled::{prefetch, BucketWords};

#[cfg(not(loom))]
#[allow(unsafe_code)]
mod real {
    use std::alloc::{self, Layout};
    use std::ops::Deref;
    use std::ptr::NonNull;

    use super::{AllocationFailed, AtomicU64, HUGE_PAGE, OWN_MAPPING};
    use crate::sync::Ordering;

    /// An owned, initialised `[AtomicU64]`.
    pub(crate) struct BucketWords {
        ptr: NonNull<AtomicU64>,
        len: usize,
        owner: Owner,
    }

    /// Where the words' memory goes back to on drop.
    enum Owner {
        /// The global allocator, which allocated it with this layout.
        Heap(Layout),
        /// A mapping of its own, held only to be dropped: its drop unmaps it.
        #[cfg(target_os = "linux")]
        Mapped(#[allow(dead_code)] Mapping),
    }

    // SAFETY: `BucketWords` owns its allocation exclusively, like `Box<[AtomicU64]>`, which is
    // Send and Sync because `AtomicU64` is; all shared access goes through `&[AtomicU64]`.
    unsafe impl Send for BucketWords {}
    // SAFETY: as above.
    unsafe impl Sync for BucketWords {}

    #[cfg(test)]
    thread_local! {
        /// Counts down the tables `zeroed` allocates on this thread; the one that takes it from
        /// 1 to 0 fails as if memory ran out (0: none fails). For tests of a failed growth.
        pub(crate) static FAIL_ALLOCATION: std::cell::Cell<u32> =
            const { std::cell::Cell::new(0) };
    }

    impl BucketWords {
        /// `len` (> 0) zeroed words; with `huge_pages`, advised onto huge pages when large.
        pub(crate) fn zeroed(len: usize, huge_pages: bool) -> Result<Self, AllocationFailed> {
            let failed = AllocationFailed {
                bytes: len.saturating_mul(8),
            };
            #[cfg(test)]
            if FAIL_ALLOCATION.with(|left| left.replace(left.get().saturating_sub(1)) == 1) {
                return Err(failed);
            }
            let bytes = len.checked_mul(8).ok_or(failed)?;
            assert!(bytes > 0, "tables have at least two buckets");
            #[cfg(target_os = "linux")]
            if bytes >= OWN_MAPPING {
                let huge_pages = huge_pages && bytes >= HUGE_PAGE;
                // The kernel may refuse a mapping that the allocator would still serve (a
                // process may hold only so many mappings, `vm.max_map_count`, and a program may
                // hold that many filters): then the words come from the allocator, as the
                // allocator's own large blocks do, and a release keeps their memory.
                if let Some((mapping, start)) = Mapping::zeroed(bytes, huge_pages) {
                    let owner = Owner::Mapped(mapping);
                    let ptr = start.cast::<AtomicU64>();
                    return Ok(BucketWords { ptr, len, owner });
                }
            }
            // Huge pages are a Linux hint only.
            #[cfg(not(target_os = "linux"))]
            let _ = huge_pages;
            let layout = Layout::array::<AtomicU64>(len).map_err(|_| failed)?;
            // SAFETY: `layout` has a non-zero size (asserted above).
            let raw = unsafe { alloc::alloc_zeroed(layout) };
            let ptr = NonNull::new(raw.cast::<AtomicU64>()).ok_or(failed)?;
            let owner = Owner::Heap(layout);
            Ok(BucketWords { ptr, len, owner })
        }

        /// Takes over a boxed slice (a table restored from a stream). A table large enough for
        /// a mapping of its own is copied into one (its non-zero words only, so empty pages are
        /// never backed), as if it had been allocated by `zeroed`: its memory can then be given
        /// back if its level is released. Otherwise (or if the kernel refuses the mapping) the
        /// slice's memory is kept, advised onto huge pages where it covers whole aligned ones.
        pub(crate) fn from_boxed(words: Box<[AtomicU64]>, huge_pages: bool) -> Self {
            let len = words.len();
            let layout = Layout::for_value::<[AtomicU64]>(&words);
            #[cfg(target_os = "linux")]
            if layout.size() >= OWN_MAPPING {
                if let Ok(mapped) = Self::zeroed(len, huge_pages) {
                    for (from, to) in words.iter().zip(mapped.iter()) {
                        // Relaxed: neither table is shared yet.
                        let word = from.load(Ordering::Relaxed);
                        if word != 0 {
                            to.store(word, Ordering::Relaxed);
                        }
                    }
                    return mapped;
                }
            }
            let raw = Box::into_raw(words).cast::<AtomicU64>();
            if huge_pages && layout.size() >= HUGE_PAGE {
                advise_huge_pages(raw.cast::<u8>(), layout.size());
            }
            // A Box's pointer is never null.
            let ptr = NonNull::new(raw).expect("a Box's pointer is non-null");
            let owner = Owner::Heap(layout);
            BucketWords { ptr, len, owner }
        }

        /// Writes a zero to one word of every 4 KiB page of words that are all still zero, so
        /// the kernel backs every page now, on this thread, instead of on the inserts that
        /// would touch each first. A write without a read: a read would first map the shared
        /// zero page, and the write then fault a second time.
        pub(crate) fn fault_in(&mut self) {
            for word in self.iter().step_by(4096 / 8) {
                // Relaxed: `&mut self`, so no other thread sees these words.
                word.store(0, Ordering::Relaxed);
            }
        }
    }

    impl BucketWords {
        /// Gives the memory of the words back to the OS while they stay readable (and read as
        /// zero), for a table that is empty and that no writer will store into again (a released
        /// level, see `Table::release_if_empty`). Returns how many bytes of words were given
        /// back: all of a mapped table's; none of a table from the global allocator (tables
        /// under 16 KiB), whose memory may not be ours to advise: an allocator may back it with
        /// a private file mapping, which MADV_DONTNEED would read back from the file.
        ///
        /// Every word must be zero, and no thread may store a non-zero value into one from now
        /// on: the pages are replaced with fresh zero-filled ones, so a non-zero value would be
        /// lost.
        pub(crate) fn give_back(&self) -> usize {
            #[cfg(target_os = "linux")]
            if let Owner::Mapped(mapping) = &self.owner {
                // SAFETY: `[base, base + len)` is exactly our own private anonymous mapping,
                // live until drop. MADV_DONTNEED leaves it mapped and readable; the next touch
                // of a page gets a zero-filled one. So no access faults or reads freed memory,
                // and no value changes: every word is zero now and no thread stores into them
                // again (the caller's promise), so every load, before or after the advice,
                // returns zero (and the slack pages were never touched). The memory stays
                // ours; only its backing pages go back to the kernel.
                let rc = unsafe {
                    libc::madvise(
                        mapping.base.as_ptr().cast::<libc::c_void>(),
                        mapping.len,
                        libc::MADV_DONTNEED,
                    )
                };
                if rc == 0 {
                    return self.len * 8;
                }
            }
            0
        }
    }

    #[cfg(all(test, target_os = "linux"))]
    impl BucketWords {
        /// How many of the pages the words lie on are resident in memory now, of how many.
        pub(crate) fn resident_pages(&self) -> (usize, usize) {
            // SAFETY: sysconf only reads a system setting.
            let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
            let start = self.ptr.as_ptr() as usize;
            let first = start - start % page;
            let len = start + self.len * 8 - first;
            let mut resident = vec![0u8; len.div_ceil(page)];
            // SAFETY: `[first, first + len)` covers only pages of our live allocation; mincore
            // writes one byte per page of it into `resident`, which has that many, and changes
            // nothing else.
            let rc =
                unsafe { libc::mincore(first as *mut libc::c_void, len, resident.as_mut_ptr()) };
            assert_eq!(rc, 0, "mincore failed");
            let count = resident.iter().filter(|&&b| b & 1 != 0).count();
            (count, resident.len())
        }
    }

    /// Asks the processor to bring `word`'s cache line in, without waiting for it. A hint, not
    /// an access: it reads nothing into the program, and (unlike a load) a later locked
    /// instruction does not wait for it, so an insert's lock can go ahead while the next
    /// items' buckets are still on their way.
    #[inline(always)]
    pub(crate) fn prefetch(word: &AtomicU64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: PREFETCHT0 (SSE, part of every x86-64) never faults and changes no
            // memory or register; the address comes from a live reference besides.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(word.as_ptr().cast::<i8>()) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // No stable prefetch hint here: a load brings the line in as well.
            // Relaxed: the value is not used; the insert reads the word again under its lock.
            std::hint::black_box(word.load(Ordering::Relaxed));
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
            // A mapping unmaps itself when `owner` is dropped, right after this.
            if let Owner::Heap(layout) = self.owner {
                // SAFETY: `ptr` was allocated by the global allocator with exactly `layout`
                // (directly, or by the Box whose layout `from_boxed` recorded), and is freed
                // once.
                unsafe { alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), layout) };
            }
        }
    }

    /// A private anonymous mapping: zeroed by the kernel one page at a time, on first touch.
    #[cfg(target_os = "linux")]
    struct Mapping {
        base: NonNull<u8>,
        len: usize,
    }

    #[cfg(target_os = "linux")]
    impl Mapping {
        /// A mapping with room for `bytes` zeroed bytes, and where they start: on a huge-page
        /// boundary, advised onto huge pages, with `huge_pages`. `None` if the kernel refuses.
        ///
        /// No MAP_NORESERVE: the kernel's overcommit check still refuses a table that cannot
        /// fit, which the caller reports as an error rather than crashing on a later touch.
        fn zeroed(bytes: usize, huge_pages: bool) -> Option<(Mapping, NonNull<u8>)> {
            #[cfg(test)]
            if tests::REFUSE_MAPPINGS.with(std::cell::Cell::get) {
                return None;
            }
            // Slack to start on a huge-page boundary (a mapping is only page-aligned); the
            // pages of the slack are never touched, so they cost address space only.
            let slack = if huge_pages { HUGE_PAGE } else { 0 };
            let len = bytes.checked_add(slack)?;
            // SAFETY: a new private anonymous mapping at an address the kernel chooses: it
            // replaces no existing mapping and aliases no memory.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return None;
            }
            let mapping = Mapping {
                base: NonNull::new(base.cast::<u8>())?,
                len,
            };
            let offset = if huge_pages {
                mapping.base.as_ptr().align_offset(HUGE_PAGE)
            } else {
                0
            };
            debug_assert!(offset <= slack, "a mapping is page-aligned");
            // In bounds: `offset <= slack`, so `[start, start + bytes)` lies inside the mapping.
            let start = NonNull::new(mapping.base.as_ptr().wrapping_add(offset))?;
            if huge_pages {
                advise_huge_pages(start.as_ptr(), bytes);
            }
            Some((mapping, start))
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: `base` and `len` are exactly what `mmap` returned and was asked for, this
            // is the only unmap, and no reference into the mapping outlives its `BucketWords`.
            unsafe { libc::munmap(self.base.as_ptr().cast::<libc::c_void>(), self.len) };
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

    /// The insert that adds a level allocates it: if allocating wrote the table (zeroing it, or
    /// faulting in its pages), that insert would stall for as long as writing it takes. These
    /// tests check the pages themselves, not a time: a new large table has none of its pages
    /// resident, reads as zero, and `fault_in` backs every page.
    #[cfg(all(test, target_os = "linux"))]
    mod tests {
        use super::*;

        /// 64 MiB of words: far above the size from which tables are mapped.
        const WORDS: usize = 8 << 20;

        fn all_zero(words: &[AtomicU64]) -> bool {
            // Relaxed: the table is not shared.
            words
                .iter()
                .step_by(97)
                .all(|w| w.load(Ordering::Relaxed) == 0)
        }

        #[test]
        fn a_large_table_is_not_written_when_allocated() {
            for huge_pages in [true, false] {
                let mut words = BucketWords::zeroed(WORDS, huge_pages).unwrap();
                let (resident, pages) = words.resident_pages();
                assert!(
                    resident * 100 < pages,
                    "huge pages {huge_pages}: {resident} of {pages} pages resident after allocating"
                );
                assert!(all_zero(&words));
                words.fault_in();
                let (resident, pages) = words.resident_pages();
                assert_eq!(resident, pages, "huge pages {huge_pages}: after fault_in");
                assert!(all_zero(&words));
            }
        }

        thread_local! {
            /// Set: `Mapping::zeroed` refuses, as the kernel does past `vm.max_map_count`.
            pub(super) static REFUSE_MAPPINGS: std::cell::Cell<bool> =
                const { std::cell::Cell::new(false) };
        }

        /// 64 KiB of words: mapped on its own, below the huge-page size.
        const MID_WORDS: usize = 8 << 10;

        #[test]
        fn a_mid_sized_table_is_mapped_and_gives_all_its_pages_back() {
            let words = BucketWords::zeroed(MID_WORDS, true).unwrap();
            assert!(matches!(words.owner, Owner::Mapped(_)));
            for w in words.iter() {
                // Relaxed: the table is not shared.
                w.store(0, Ordering::Relaxed);
            }
            assert_eq!(words.resident_pages().0, words.resident_pages().1);
            assert_eq!(words.give_back(), MID_WORDS * 8);
            assert_eq!(words.resident_pages().0, 0);
            assert!(all_zero(&words));
        }

        #[test]
        fn a_refused_mapping_falls_back_to_the_allocator() {
            REFUSE_MAPPINGS.with(|r| r.set(true));
            let words = BucketWords::zeroed(MID_WORDS, true);
            let restored =
                BucketWords::from_boxed((0..MID_WORDS as u64).map(AtomicU64::new).collect(), true);
            REFUSE_MAPPINGS.with(|r| r.set(false));
            let words = words.unwrap();
            assert!(matches!(words.owner, Owner::Heap(_)));
            assert!(all_zero(&words));
            assert_eq!(words.give_back(), 0);
            assert!(matches!(restored.owner, Owner::Heap(_)));
            // Relaxed: the table is not shared.
            assert_eq!(
                restored[MID_WORDS - 1].load(Ordering::Relaxed),
                MID_WORDS as u64 - 1
            );
        }

        #[test]
        fn a_restored_mid_sized_table_is_copied_into_a_mapping() {
            let restored = BucketWords::from_boxed(
                (0..MID_WORDS as u64)
                    .map(|i| AtomicU64::new(i % 3))
                    .collect(),
                true,
            );
            assert!(matches!(restored.owner, Owner::Mapped(_)));
            // Relaxed: the table is not shared.
            assert!(restored
                .iter()
                .enumerate()
                .all(|(i, w)| w.load(Ordering::Relaxed) == i as u64 % 3));
        }

        #[test]
        fn a_small_table_reads_as_zero() {
            let words = BucketWords::zeroed(1000, true).unwrap();
            assert!(all_zero(&words));
        }
    }
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

        /// Nothing to do: a boxed slice is written when it is made.
        pub(crate) fn fault_in(&mut self) {}

        /// Nothing to give back: the words are loom objects.
        pub(crate) fn give_back(&self) -> usize {
            0
        }
    }

    /// Nothing to model: a prefetch is a hint, no access.
    pub(crate) fn prefetch(_word: &AtomicU64) {}

    impl Deref for BucketWords {
        type Target = [AtomicU64];

        fn deref(&self) -> &[AtomicU64] {
            &self.0
        }
    }
}
