//! Helpers for the loom model checks of atomic-cuckoo (the models are in `tests/`).
//!
//! Everything here is compiled only with `--cfg loom`:
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p loom-tests --features models --release`.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};

pub use atomic_cuckoo::loom_hook::{self as hook, Outcome, PassThrough};
pub use atomic_cuckoo::redisbloom::RedisCuckooFilter;
use atomic_cuckoo::CuckooFilter;
pub use atomic_cuckoo::Layout;
pub use loom::sync::Arc;

/// The filter type of every model, fixed or growable: items are their own hashes.
pub type Filter = CuckooFilter<PassThrough>;

/// The first item (hash) from a fixed sequence that `wanted` accepts and `taken` does not
/// hold, added to `taken`: models search their items, so every interleaving starts alike.
pub fn find_item(taken: &mut Vec<u64>, wanted: impl Fn(u64) -> bool) -> u64 {
    let item = (1u64..1 << 20)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .find(|&item| !taken.contains(&item) && wanted(item))
        .expect("some item has these buckets");
    taken.push(item);
    item
}

/// Fingerprint width of the models: 32 bits, so a bucket has two slots and fills quickly.
pub const BITS: u32 = 32;

/// A tiny table and the fingerprints placed in it so far.
pub struct Table {
    pub filter: Filter,
    taken: Vec<u64>,
    /// The largest fingerprint of the table's width.
    max_fp: u64,
}

impl Table {
    /// `buckets` buckets of two slots, guarded by `stripes` stripes.
    pub fn new(buckets: usize, stripes: usize) -> Self {
        Table {
            filter: hook::tiny_filter(buckets, stripes, BITS),
            taken: Vec::new(),
            max_fp: (1 << BITS) - 1,
        }
    }

    /// Like [`Table::new`], with lookups that answer "maybe present" after `read_attempts`
    /// failed validations.
    pub fn with_read_attempts(buckets: usize, stripes: usize, read_attempts: u32) -> Self {
        Table {
            filter: hook::tiny_filter_with_read_attempts(buckets, stripes, BITS, read_attempts),
            taken: Vec::new(),
            max_fp: (1 << BITS) - 1,
        }
    }

    /// `buckets` buckets of `layout` (packed and compact: four lanes of `bits` bits, bit-packed,
    /// so that buckets may straddle words), guarded by `stripes` stripes.
    pub fn with_layout(layout: Layout, buckets: usize, stripes: usize, bits: u32) -> Self {
        Table {
            filter: hook::tiny_layout_filter(layout, buckets, stripes, bits),
            taken: Vec::new(),
            max_fp: (1 << bits) - 1,
        }
    }

    /// A fingerprint not used yet whose alternate bucket from `bucket` is `partner`. The search
    /// is deterministic, so every interleaving starts from the same table.
    pub fn fingerprint(&mut self, bucket: usize, partner: usize) -> u64 {
        self.fingerprint_from(bucket, partner, 1)
    }

    /// Like [`Table::fingerprint`], the least one from `min` up (compact buckets sort their
    /// lanes by their top bits: models choose them so that a write reorders the lanes).
    pub fn fingerprint_from(&mut self, bucket: usize, partner: usize, min: u64) -> u64 {
        let fp = (min..=self.max_fp)
            .find(|fp| {
                !self.taken.contains(fp) && hook::alternate(&self.filter, bucket, *fp) == partner
            })
            .expect("some fingerprint pairs these buckets");
        self.taken.push(fp);
        fp
    }

    /// Stores a new fingerprint pairing `bucket` with `partner` in `bucket`; returns the item.
    pub fn put(&mut self, bucket: usize, partner: usize) -> u64 {
        let fp = self.fingerprint(bucket, partner);
        assert!(
            hook::place(&self.filter, bucket, fp),
            "bucket {bucket} is full"
        );
        hook::item(&self.filter, bucket, fp)
    }

    /// An item (not stored) with primary bucket `primary` and a new fingerprint pairing it with
    /// `partner`.
    pub fn new_item(&mut self, primary: usize, partner: usize) -> u64 {
        let fp = self.fingerprint(primary, partner);
        hook::item(&self.filter, primary, fp)
    }
}

/// A tiny RedisBloom filter (sub-filters of equal size) and the fingerprints used in it so far.
pub struct RbTable {
    pub filter: RedisCuckooFilter,
    taken: Vec<u8>,
}

impl RbTable {
    /// `sub_filters` live sub-filters of `buckets` buckets of `bucket_size` slots, one stripe per
    /// bucket; kick walks give up after 4 kicks.
    pub fn new(buckets: u64, bucket_size: u16, sub_filters: usize) -> Self {
        RbTable {
            filter: hook::rb_filter(buckets, bucket_size, sub_filters, 4),
            taken: Vec::new(),
        }
    }

    /// An item (not stored) whose fingerprint is not used yet and whose buckets are `primary`
    /// (the one its lookup validates) and `partner`, in every sub-filter. The search is
    /// deterministic, so every interleaving starts from the same filter.
    pub fn new_item(&mut self, primary: usize, partner: usize) -> Vec<u8> {
        let (item, fp) = (0u32..)
            .map(|n| format!("item {n}").into_bytes())
            .find_map(|item| {
                let (fp, pair) = hook::rb_key(&self.filter, 0, &item);
                (pair == (primary, partner) && !self.taken.contains(&fp)).then_some((item, fp))
            })
            .expect("some item has these buckets");
        self.taken.push(fp);
        item
    }

    /// Stores a new item's fingerprint in `bucket` (its primary) of sub-filter `sub`; returns
    /// the item.
    pub fn put(&mut self, sub: usize, bucket: usize, partner: usize) -> Vec<u8> {
        let item = self.new_item(bucket, partner);
        let (fp, _) = hook::rb_key(&self.filter, sub, &item);
        assert!(
            hook::rb_place(&self.filter, sub, bucket, fp),
            "bucket {bucket} of sub-filter {sub} is full"
        );
        item
    }
}

/// Copies of `item`'s fingerprint in sub-filter `sub`, in its two buckets there.
pub fn rb_copies(filter: &RedisCuckooFilter, sub: usize, item: &[u8]) -> usize {
    let (fp, (a, b)) = hook::rb_key(filter, sub, item);
    let other = if b == a {
        0
    } else {
        hook::rb_copies_in(filter, sub, b, fp)
    };
    hook::rb_copies_in(filter, sub, a, fp) + other
}

/// Copies of `item`'s fingerprint in `buckets`.
pub fn copies(filter: &Filter, item: u64, buckets: &[usize]) -> u32 {
    let fp = hook::fingerprint(filter, item);
    buckets
        .iter()
        .map(|&b| hook::copies_in(filter, b, fp))
        .sum()
}

/// Every model thread, spawned or main, starts with an RMW on this shared counter before its
/// role: loom may not explore a spawned thread whose first operation is a load
/// (tokio-rs/loom#392), and a lookup (or a lock) starts with one.
pub struct Start(loom::sync::atomic::AtomicUsize);

impl Start {
    pub fn new() -> Self {
        Start(loom::sync::atomic::AtomicUsize::new(0))
    }

    pub fn go(&self) {
        // Relaxed: not a synchronization, only a first operation that is not a load.
        self.0.fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
    }
}

impl Default for Start {
    fn default() -> Self {
        Self::new()
    }
}

/// What one thread of a model does with the shared state.
pub type Role<S> = fn(&S);

/// Fewest interleavings a model must explore: fewer means loom did not explore it (a blind
/// spot such as tokio-rs/loom#392), and a model that was not explored proves nothing.
pub const MIN_INTERLEAVINGS: usize = 10;

/// Records that some interleaving reached a branch a model is meant to cover; checked after
/// the model ran with [`assert_reached`]. (A std atomic: it is bookkeeping outside the model.)
pub struct Reached(std::sync::atomic::AtomicBool);

impl Reached {
    pub const fn new() -> Self {
        Reached(std::sync::atomic::AtomicBool::new(false))
    }

    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

impl Default for Reached {
    fn default() -> Self {
        Self::new()
    }
}

/// Fails unless some interleaving marked `flag`: a model whose interesting branch is never
/// reached checks nothing there.
pub fn assert_reached(flag: &Reached, what: &str) {
    assert!(
        flag.0.load(Ordering::Relaxed),
        "no interleaving reached: {what}"
    );
}

/// Runs a loom model and prints how many interleavings it explored.
pub fn check(name: &str, model: impl Fn() + Sync + Send + 'static) {
    let explored = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&explored);
    let mut builder = loom::model::Builder::new();
    // Loom's default of 1000 branch points per execution is too few for a kick chain in a full
    // table plus its setup; spinning is bounded anyway (locks yield, readers give up).
    builder.max_branches = builder.max_branches.max(20_000);
    // Relaxed: a plain tally; loom runs one interleaving at a time on this thread's behalf.
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model();
    });
    let explored = explored.load(Ordering::Relaxed);
    println!("loom model `{name}`: {explored} interleavings explored");
    assert!(
        explored >= MIN_INTERLEAVINGS,
        "loom model `{name}` explored only {explored} interleavings: not a real check"
    );
}

/// Checks a two-thread scenario twice: once with `first` on a spawned thread and `second` on
/// the model's main thread, once the other way round, so that each role also runs where loom's
/// blind spot for spawned threads (tokio-rs/loom#392) cannot reach it.
pub fn check_both_orders<S: Send + Sync + 'static>(
    name: &str,
    setup: fn() -> S,
    first: Role<S>,
    second: Role<S>,
    after: Role<S>,
) {
    for first_spawned in [true, false] {
        let label = if first_spawned {
            format!("{name} [first spawned]")
        } else {
            format!("{name} [second spawned]")
        };
        check(&label, move || {
            let state = Arc::new(setup());
            let start = Arc::new(Start::new());
            let (spawned, here): (Role<S>, Role<S>) = if first_spawned {
                (first, second)
            } else {
                (second, first)
            };
            let handle = {
                let (state, start) = (Arc::clone(&state), Arc::clone(&start));
                loom::thread::spawn(move || {
                    start.go();
                    spawned(&state)
                })
            };
            start.go();
            here(&state);
            handle.join().unwrap();
            after(&state);
        });
    }
}
