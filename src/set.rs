//! [`CuckooSet`]: a [`CuckooFilter`] whose item type is fixed when it is built, with set
//! semantics.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::marker::PhantomData;

use crate::builder::Builder;
use crate::error::{BuildError, InsertError, InsertManyError};
use crate::filter::CuckooFilter;
use crate::hasher::DefaultHashBuilder;

/// A concurrent approximate set of `T`: a [`CuckooFilter`] whose item type is part of its
/// type, with `HashSet`'s set semantics. Shared between threads as `Arc<CuckooSet<T>>`, every
/// operation through `&self`.
///
/// A [`CuckooFilter`] hashes whatever it is given, so its item type is chosen at each call:
/// after `insert(&42u64)`, `contains(&42)` looks up an `i32` (a literal's default type), which
/// hashes differently and is almost always not found. A `CuckooSet<u64>` takes only `u64` (or
/// what `u64` borrows as, like `HashSet`): there `contains(&42)` means `42u64`, and
/// `contains(&42i32)` does not compile.
///
/// [`insert`](CuckooSet::insert) stores an item only if it is not (maybe) present yet and
/// says whether it did, like `HashSet::insert`; [`Extend`], [`FromIterator`] and
/// [`insert_many`](CuckooSet::insert_many) do the same for many items, so repeated items are
/// stored once and [`remove`](CuckooSet::remove) of an item that `insert` added is always
/// safe (one refused as present because it collides with another shares that one's entry).
/// The guarantees are those of [`CuckooFilter`]: no false negatives under any interleaving,
/// wait-free lookups, a false-positive rate under the target. For a multiset (copies counted),
/// or items of several types in one filter, use [`CuckooFilter`] itself;
/// [`as_filter`](CuckooSet::as_filter) gives every other method of the filter (snapshots,
/// statistics).
///
/// ```
/// use std::sync::Arc;
/// use atomic_cuckoo::CuckooSet;
///
/// let users: Arc<CuckooSet<u64>> = Arc::new(CuckooSet::with_capacity(1_000_000));
/// let writer = {
///     let users = Arc::clone(&users);
///     std::thread::spawn(move || users.insert_many([1, 42, 7, 42]))
/// };
/// assert_eq!(writer.join().unwrap()?, 3); // the second 42 was already there
///
/// assert!(users.contains(&42)); // 42 is a u64 here
/// assert!(users.remove(&42));
/// assert_eq!(users.len(), 2);
/// # Ok::<(), atomic_cuckoo::InsertManyError>(())
/// ```
///
/// Items of another type are a compile error, not a silent false negative:
///
/// ```compile_fail
/// let users = atomic_cuckoo::CuckooSet::<u64>::with_capacity(100);
/// users.insert(&42u64).unwrap();
/// assert!(users.contains(&42i32)); // error: `u64: Borrow<i32>` is not satisfied
/// ```
///
/// ```compile_fail
/// let names = atomic_cuckoo::CuckooSet::<str>::with_capacity(100);
/// names.insert("alice").unwrap();
/// assert!(names.contains(&b"alice"[..])); // error: bytes are not a `str`
/// ```
///
/// Saving and restoring go through the filter:
///
/// ```
/// use atomic_cuckoo::{CuckooFilter, CuckooSet};
///
/// let names: CuckooSet<String> = ["alice", "bob"].iter().map(|s| s.to_string()).collect();
/// let bytes = names.as_filter().to_bytes();
/// let restored = CuckooSet::<String>::from_filter(CuckooFilter::from_bytes(&bytes)?);
/// assert!(restored.contains("alice")); // a `String` set is looked up by `&str`
/// # Ok::<(), atomic_cuckoo::PersistError>(())
/// ```
pub struct CuckooSet<T: ?Sized, S = DefaultHashBuilder> {
    filter: CuckooFilter<S>,
    /// `fn(&T)`: the set holds no `T`, so it is `Send`, `Sync` and `'static` whatever `T` is.
    items: PhantomData<fn(&T)>,
}

impl<T: ?Sized> CuckooSet<T> {
    /// A set for `items` items at the default false-positive rate (1 %) with the default hasher.
    ///
    /// # Panics
    ///
    /// As [`CuckooFilter::with_capacity`]: if the table cannot be allocated.
    /// [`Builder::build_set`] reports that as an error instead.
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(1_000);
    /// assert!(ids.capacity() >= 1_000 && ids.is_empty());
    /// ```
    pub fn with_capacity(items: usize) -> Self {
        CuckooSet::from_filter(CuckooFilter::with_capacity(items))
    }
}

impl<T: ?Sized, S> CuckooSet<T, S> {
    /// A set over an existing filter, whose items, if it has any, must have been inserted as
    /// `T` (or as what `T` borrows as): the filter cannot check that, and items of another type
    /// would not be found.
    ///
    /// ```
    /// use atomic_cuckoo::{CuckooFilter, CuckooSet};
    ///
    /// let filter = CuckooFilter::builder().capacity(1_000).false_positive_rate(0.001).build()?;
    /// filter.insert(&7u32).unwrap();
    /// let set = CuckooSet::<u32>::from_filter(filter);
    /// assert!(set.contains(&7));
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn from_filter(filter: CuckooFilter<S>) -> Self {
        CuckooSet {
            filter,
            items: PhantomData,
        }
    }

    /// The untyped filter underneath: every [`CuckooFilter`] method (snapshots, statistics,
    /// [`count`](CuckooFilter::count)). Its `insert` and `contains` take any type, so prefer
    /// the set's own methods for items.
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(1_000);
    /// ids.insert(&1).unwrap();
    /// assert_eq!(ids.as_filter().count(&1u64), 1);
    /// ```
    pub fn as_filter(&self) -> &CuckooFilter<S> {
        &self.filter
    }

    /// The untyped filter underneath, taken out of the set.
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(1_000);
    /// ids.insert(&1).unwrap();
    /// let filter = ids.into_filter();
    /// assert!(filter.contains(&1u64));
    /// ```
    pub fn into_filter(self) -> CuckooFilter<S> {
        self.filter
    }

    /// Number of items stored (see [`CuckooFilter::len`]).
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(100);
    /// ids.insert(&5).unwrap();
    /// ids.insert(&5).unwrap();
    /// assert_eq!(ids.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.filter.len()
    }

    /// Whether [`len`](CuckooSet::len) is zero.
    ///
    /// ```
    /// assert!(atomic_cuckoo::CuckooSet::<u64>::with_capacity(10).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.filter.is_empty()
    }

    /// Number of distinct items the set holds without failing (see
    /// [`CuckooFilter::capacity`]).
    ///
    /// ```
    /// assert!(atomic_cuckoo::CuckooSet::<u64>::with_capacity(1_000).capacity() >= 1_000);
    /// ```
    pub fn capacity(&self) -> usize {
        self.filter.capacity()
    }

    /// Expected false-positive rate at the current load (see
    /// [`CuckooFilter::false_positive_rate`]).
    ///
    /// ```
    /// let ids: atomic_cuckoo::CuckooSet<u64> = (0..1_000).collect();
    /// assert!(ids.false_positive_rate() < 0.01);
    /// ```
    pub fn false_positive_rate(&self) -> f64 {
        self.filter.false_positive_rate()
    }

    /// Bytes of memory held (see [`CuckooFilter::memory_usage`]).
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(1_000_000);
    /// assert!(ids.memory_usage() * 8 < 16 * 1_000_000);
    /// ```
    pub fn memory_usage(&self) -> usize {
        self.filter.memory_usage()
    }

    /// Removes every item (see [`CuckooFilter::clear`]).
    ///
    /// ```
    /// let ids: atomic_cuckoo::CuckooSet<u64> = (0..10).collect();
    /// ids.clear();
    /// assert!(ids.is_empty() && !ids.contains(&3));
    /// ```
    pub fn clear(&self) {
        self.filter.clear();
    }

    /// Frees what the set holds beyond its items' needs: a growable set halves its table
    /// while its items fit (see [`CuckooFilter::shrink_to_fit`]).
    ///
    /// ```
    /// let mut ids: atomic_cuckoo::CuckooSet<u64> = atomic_cuckoo::CuckooFilter::builder()
    ///     .capacity(100)
    ///     .growable(true)
    ///     .build_set()
    ///     .unwrap();
    /// for id in 0..10_000u64 {
    ///     ids.insert(&id).unwrap();
    /// }
    /// for id in 100..10_000u64 {
    ///     ids.remove(&id);
    /// }
    /// let bytes = ids.memory_usage();
    /// ids.shrink_to_fit();
    /// assert!(ids.memory_usage() < bytes && ids.contains(&7));
    /// ```
    pub fn shrink_to_fit(&mut self) {
        self.filter.shrink_to_fit();
    }
}

impl<T: Hash + ?Sized, S: BuildHasher> CuckooSet<T, S> {
    /// Adds `item` unless it is (maybe) present already, like `HashSet::insert`: `Ok(true)` if
    /// it was added, `Ok(false)` if it (or an item whose fingerprint collides with it) was
    /// there. Two threads racing to add the same item cannot both get `Ok(true)`. `item` is a
    /// `&T`, or a reference to what `T` borrows as (`&str` for a `CuckooSet<String>`), which
    /// hashes the same.
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] when the item is not present and no room can be found; nothing
    /// changes then (see [`CuckooFilter::insert_unique`]).
    ///
    /// ```
    /// let names = atomic_cuckoo::CuckooSet::<String>::with_capacity(100);
    /// assert_eq!(names.insert("alice"), Ok(true));
    /// assert_eq!(names.insert(&"alice".to_string()), Ok(false));
    /// ```
    pub fn insert<Q: Hash + ?Sized>(&self, item: &Q) -> Result<bool, InsertError>
    where
        T: Borrow<Q>,
    {
        self.filter.insert_unique(item)
    }

    /// Adds every item that is not (maybe) present yet, in order: items are `T`s, or anything
    /// that borrows as one (`&T`). Returns how many were added. Buckets are prefetched a few
    /// items ahead, so this is faster than one [`insert`](CuckooSet::insert) per item in large
    /// tables.
    ///
    /// # Errors
    ///
    /// Stops at the first item that is not present and cannot be inserted (see
    /// [`CuckooFilter::insert_many_unique`]).
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(1_000);
    /// assert_eq!(ids.insert_many(0..100)?, 100);
    /// assert_eq!(ids.insert_many(&[99, 100])?, 1);
    /// # Ok::<(), atomic_cuckoo::InsertManyError>(())
    /// ```
    pub fn insert_many<I>(&self, items: I) -> Result<usize, InsertManyError>
    where
        I: IntoIterator,
        I::Item: Borrow<T>,
    {
        self.filter
            .insert_many_unique(items.into_iter().map(HashedAs::<_, T>::new))
    }

    /// Whether `item` may be in the set: never `false` for an inserted item, `true` for an
    /// absent one with probability about the target rate. Wait-free.
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(100);
    /// ids.insert(&42).unwrap();
    /// assert!(ids.contains(&42));
    /// ```
    pub fn contains<Q: Hash + ?Sized>(&self, item: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.filter.contains(item)
    }

    /// Looks up many items at once: `results` is cleared and gets one answer per item, in order
    /// (see [`CuckooFilter::contains_many`]).
    ///
    /// ```
    /// let ids: atomic_cuckoo::CuckooSet<u64> = [1, 3].into_iter().collect();
    /// let mut found = Vec::new();
    /// ids.contains_many(&[1, 2, 3], &mut found);
    /// assert!(found[0] && found[2]);
    /// ```
    pub fn contains_many<I>(&self, items: I, results: &mut Vec<bool>)
    where
        I: IntoIterator,
        I::Item: Borrow<T>,
    {
        self.filter
            .contains_many(items.into_iter().map(HashedAs::<_, T>::new), results);
    }

    /// Removes `item`; returns whether it was found. Safe for items whose
    /// [`insert`](CuckooSet::insert) returned `Ok(true)`: the set stores each once, so removing
    /// one never removes another. Removing an item that was never inserted may remove another
    /// that collides with it (see [`CuckooFilter`]), and so may removing one whose insert
    /// returned `Ok(false)` because it collided with an item already there: it has no entry of
    /// its own, and removing either one removes their shared entry for both.
    ///
    /// ```
    /// let ids = atomic_cuckoo::CuckooSet::<u64>::with_capacity(100);
    /// ids.insert(&9).unwrap();
    /// assert!(ids.remove(&9));
    /// assert!(!ids.contains(&9) && !ids.remove(&9));
    /// ```
    pub fn remove<Q: Hash + ?Sized>(&self, item: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.filter.remove(item)
    }
}

impl<S> Builder<S> {
    /// Builds a [`CuckooSet`] of `T` with these settings.
    ///
    /// # Errors
    ///
    /// As [`build`](Builder::build).
    ///
    /// ```
    /// use atomic_cuckoo::{CuckooFilter, CuckooSet};
    ///
    /// let ids: CuckooSet<u64> = CuckooFilter::builder()
    ///     .capacity(10_000)
    ///     .false_positive_rate(0.001)
    ///     .build_set()?;
    /// assert!(ids.capacity() >= 10_000);
    /// # Ok::<(), atomic_cuckoo::BuildError>(())
    /// ```
    pub fn build_set<T: ?Sized>(self) -> Result<CuckooSet<T, S>, BuildError> {
        self.build().map(CuckooSet::from_filter)
    }
}

/// An item that hashes as the `T` it borrows as.
struct HashedAs<B, T: ?Sized> {
    item: B,
    as_type: PhantomData<fn(&T)>,
}

impl<B, T: ?Sized> HashedAs<B, T> {
    fn new(item: B) -> Self {
        HashedAs {
            item,
            as_type: PhantomData,
        }
    }
}

impl<B: Borrow<T>, T: Hash + ?Sized> Hash for HashedAs<B, T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Exactly the calls `T::hash` makes: the item hashes as a `T` would.
        self.item.borrow().hash(state);
    }
}

impl<T: ?Sized, S> fmt::Debug for CuckooSet<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CuckooSet")
            .field("item", &std::any::type_name::<T>())
            .field("filter", &self.filter)
            .finish()
    }
}

impl<T: ?Sized, S: Clone> Clone for CuckooSet<T, S> {
    /// A deep copy of one consistent state (see [`CuckooFilter`]'s `Clone`).
    ///
    /// # Panics
    ///
    /// As [`CuckooFilter`]'s `clone`.
    ///
    /// ```
    /// let ids: atomic_cuckoo::CuckooSet<u64> = (0..10).collect();
    /// let copy = ids.clone();
    /// ids.clear();
    /// assert!(copy.contains(&3));
    /// ```
    fn clone(&self) -> Self {
        CuckooSet::from_filter(self.filter.clone())
    }
}

impl<T: ?Sized, S: BuildHasher + Default> Default for CuckooSet<T, S> {
    /// A set with the [`Builder`]'s defaults (see [`CuckooFilter`]'s `Default`).
    ///
    /// # Panics
    ///
    /// If the table cannot be allocated.
    ///
    /// ```
    /// let ids: atomic_cuckoo::CuckooSet<u64> = Default::default();
    /// assert!(ids.capacity() >= atomic_cuckoo::DEFAULT_CAPACITY);
    /// ```
    fn default() -> Self {
        CuckooSet::from_filter(CuckooFilter::default())
    }
}

impl<T: ?Sized, S> From<CuckooFilter<S>> for CuckooSet<T, S> {
    /// As [`CuckooSet::from_filter`].
    fn from(filter: CuckooFilter<S>) -> Self {
        CuckooSet::from_filter(filter)
    }
}

impl<T: Hash, S: BuildHasher> Extend<T> for CuckooSet<T, S> {
    /// Adds every item not present yet (see [`CuckooFilter`]'s `Extend`).
    ///
    /// # Panics
    ///
    /// If the set is full; [`insert_many`](CuckooSet::insert_many) returns that as an error.
    ///
    /// ```
    /// let mut ids: atomic_cuckoo::CuckooSet<u64> = (0..10).collect();
    /// ids.extend([9, 10, 10]);
    /// assert_eq!(ids.len(), 11);
    /// ```
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        self.filter
            .extend(items.into_iter().map(HashedAs::<_, T>::new));
    }
}

impl<'a, T: Hash + ?Sized, S: BuildHasher> Extend<&'a T> for CuckooSet<T, S> {
    /// Adds every item not present yet (see [`CuckooFilter`]'s `Extend`).
    ///
    /// # Panics
    ///
    /// If the set is full; [`insert_many`](CuckooSet::insert_many) returns that as an error.
    ///
    /// ```
    /// let mut names = atomic_cuckoo::CuckooSet::<str>::with_capacity(100);
    /// names.extend(["alice", "bob", "alice"]);
    /// assert_eq!(names.len(), 2);
    /// ```
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, items: I) {
        self.filter
            .extend(items.into_iter().map(HashedAs::<_, T>::new));
    }
}

impl<T: Hash, S: BuildHasher + Default> FromIterator<T> for CuckooSet<T, S> {
    /// A set sized for the distinct items, holding each once (see [`CuckooFilter`]'s
    /// `FromIterator`).
    ///
    /// # Panics
    ///
    /// If the table cannot be allocated; never for repeated items.
    ///
    /// ```
    /// let ids: atomic_cuckoo::CuckooSet<u64> = std::iter::repeat_n(5, 20).collect();
    /// assert_eq!(ids.len(), 1);
    /// ```
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        CuckooSet::from_filter(items.into_iter().map(HashedAs::<_, T>::new).collect())
    }
}

impl<'a, T: Hash + ?Sized, S: BuildHasher + Default> FromIterator<&'a T> for CuckooSet<T, S> {
    /// A set sized for the distinct items, holding each once (see [`CuckooFilter`]'s
    /// `FromIterator`).
    ///
    /// # Panics
    ///
    /// If the table cannot be allocated; never for repeated items.
    ///
    /// ```
    /// let ids = vec![7u64, 7, 8];
    /// let set: atomic_cuckoo::CuckooSet<u64> = ids.iter().collect();
    /// assert_eq!(set.len(), 2);
    /// ```
    fn from_iter<I: IntoIterator<Item = &'a T>>(items: I) -> Self {
        CuckooSet::from_filter(items.into_iter().map(HashedAs::<_, T>::new).collect())
    }
}

#[cfg(feature = "serde")]
impl<T: ?Sized, S: BuildHasher> serde::Serialize for CuckooSet<T, S> {
    /// As the filter's snapshot bytes (see [`CuckooFilter`]'s `Serialize`).
    fn serialize<Z: serde::Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        self.filter.serialize(serializer)
    }
}

#[cfg(feature = "serde")]
impl<'de, T: ?Sized, S: BuildHasher + Default> serde::Deserialize<'de> for CuckooSet<T, S> {
    /// From the filter's snapshot bytes, validated (see [`CuckooFilter`]'s `Deserialize`).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        CuckooFilter::deserialize(deserializer).map(CuckooSet::from_filter)
    }
}
