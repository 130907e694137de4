//! The standard traits an [`ExpandingFilter`] implements besides `Clone` and `Debug`:
//! `Default`, `Extend` and `FromIterator`.

use std::hash::{BuildHasher, Hash};

use super::ExpandingFilter;

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
    /// Inserts every item, as [`insert`](ExpandingFilter::insert) does one by one.
    ///
    /// # Panics
    ///
    /// If an item cannot be inserted (its buckets are full of its copies, the filter is past
    /// its last doubling, or memory ran out). Use [`insert`](ExpandingFilter::insert) to
    /// handle that as an error.
    ///
    /// ```
    /// let mut filter = atomic_cuckoo::ExpandingFilter::builder().capacity(10).build()?;
    /// filter.extend(0..1_000u32);
    /// assert!(filter.doublings() > 0 && filter.contains(&999u32));
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        for item in items {
            if let Err(e) = self.insert(&item) {
                panic!("ExpandingFilter::extend: {e}");
            }
        }
    }
}

impl<T: Hash, S: BuildHasher + Default> FromIterator<T> for ExpandingFilter<S> {
    /// A filter sized for the items the iterator says it has at least (1,000 at the fewest),
    /// at a 1 % rate, growing from there, holding one copy of each as if inserted one by one.
    ///
    /// # Panics
    ///
    /// If memory runs out, or one item repeats more often than its two buckets hold
    /// ([`InsertError::ItemBucketsFull`](crate::InsertError::ItemBucketsFull)).
    ///
    /// ```
    /// use atomic_cuckoo::ExpandingFilter;
    ///
    /// let filter: ExpandingFilter = (0..10_000u32).collect();
    /// assert_eq!(filter.len(), 10_000);
    /// assert!(filter.contains(&1234u32));
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let items = items.into_iter();
        let mut filter = ExpandingFilter::builder()
            .capacity(items.size_hint().0.max(1_000))
            .hasher(S::default())
            .build()
            .expect("the filter's table could not be allocated");
        filter.extend(items);
        filter
    }
}
