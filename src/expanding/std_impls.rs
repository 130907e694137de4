//! The standard traits an [`ExpandingFilter`] implements besides `Clone` and `Debug`:
//! `Default`, `Extend` and `FromIterator`.

use std::hash::{BuildHasher, Hash};

use super::ExpandingFilter;
use crate::error::InsertError;

impl<S: BuildHasher + Default> Default for ExpandingFilter<S> {
    /// A filter with the builder's defaults: room for
    /// [`DEFAULT_CAPACITY`](crate::DEFAULT_CAPACITY) items before its first doubling, a 1 %
    /// false-positive rate held for 12 doublings.
    ///
    /// # Panics
    ///
    /// If the table cannot be allocated.
    ///
    /// ```
    /// let filter: atomic_cuckoo::ExpandingFilter = Default::default();
    /// assert!(filter.capacity() >= atomic_cuckoo::DEFAULT_CAPACITY);
    /// ```
    fn default() -> Self {
        ExpandingFilter::builder()
            .hasher(S::default())
            .build()
            .expect("the default filter's table could not be allocated")
    }
}

impl<T: Hash, S: BuildHasher> Extend<T> for ExpandingFilter<S> {
    /// Inserts every item that is not (maybe) present yet, as
    /// [`insert_unique`](ExpandingFilter::insert_unique) does one by one: set semantics, like
    /// `HashSet`, so repeated items are stored once and never fill their buckets.
    ///
    /// # Panics
    ///
    /// If an item that is not present cannot be inserted (the filter is past its last
    /// doubling, or memory ran out). Use [`insert_unique`](ExpandingFilter::insert_unique) to
    /// handle that as an error.
    ///
    /// ```
    /// let mut filter = atomic_cuckoo::ExpandingFilter::builder().capacity(10).build()?;
    /// filter.extend(0..1_000u32);
    /// assert!(filter.doublings() > 0 && filter.contains(&999u32));
    /// let before = filter.len();
    /// filter.extend(std::iter::repeat_n("hot", 100)); // stored once (or not, if it matched)
    /// assert!(filter.len() <= before + 1 && filter.contains("hot"));
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        if let Err(e) = insert_all_unique(self, items) {
            panic!("ExpandingFilter::extend: {e}");
        }
    }
}

/// Inserts each item not (maybe) present yet; stops at the first that fails.
fn insert_all_unique<T: Hash, S: BuildHasher>(
    filter: &ExpandingFilter<S>,
    items: impl IntoIterator<Item = T>,
) -> Result<(), InsertError> {
    for item in items {
        filter.insert_unique(&item)?;
    }
    Ok(())
}

impl<T: Hash, S: BuildHasher + Default> FromIterator<T> for ExpandingFilter<S> {
    /// A filter sized for the items the iterator says it has at least (1,000 at the fewest),
    /// at a 1 % rate, growing from there, holding one copy of each distinct item, like
    /// collecting into a `HashSet` (items are told apart by their 64-bit hash).
    ///
    /// # Panics
    ///
    /// If memory runs out, or the filter needs more doublings than it may take. Repeated
    /// items never make it panic.
    ///
    /// ```
    /// use atomic_cuckoo::ExpandingFilter;
    ///
    /// let filter: ExpandingFilter = (0..10_000u32).collect();
    /// assert_eq!(filter.len(), 10_000);
    /// assert!(filter.contains(&1234u32));
    /// let ids: ExpandingFilter = [7u64, 7, 7, 8].iter().collect();
    /// assert_eq!(ids.len(), 2);
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let items = items.into_iter();
        let filter = ExpandingFilter::builder()
            .capacity(items.size_hint().0.max(1_000))
            .hasher(S::default())
            .build()
            .expect("ExpandingFilter::from_iter: the filter's table could not be allocated");
        // Items are told apart by their hash, as `CuckooFilter`'s `from_iter` does: one copy
        // of each distinct item, also of one whose entry another item's matches.
        let mut hashes: Vec<u64> = items.map(|item| filter.hasher().hash_one(&item)).collect();
        crate::hashing::dedup_hashes(&mut hashes);
        for hash in hashes {
            if let Err(e) = filter.insert_hash(hash) {
                panic!("ExpandingFilter::from_iter: {e}");
            }
        }
        filter
    }
}
