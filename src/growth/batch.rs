//! Batched operations of a growable table, as a fixed table's (`table::batch`): the buckets of
//! a whole batch of lookups are asked for before any of them is read, and inserts ask for the
//! buckets of the item a few places ahead, so that the processor overlaps their cache misses.
//! Per item, the protocol is exactly that of `lookup_hash` and `insert`.

use super::keys::Key;
use super::Doubling;
use crate::error::InsertError;
use crate::optimistic_read::Lookup;
use crate::table::{BATCH, PREFETCH_AHEAD};

impl Doubling {
    /// Asks for the lines of both of `key`'s buckets in the table as it is now, without waiting
    /// for them. A hint: if the table doubles meanwhile, the operation reads other lines.
    #[inline(always)]
    fn prefetch(&self, key: &Key) {
        let k = self.doublings_now();
        self.table.prefetch(key.pos(0, k));
        self.table.prefetch(key.pos(1, k));
    }

    /// Looks up at most `BATCH` hashes; `out[i]` answers `hashes[i]`.
    pub(crate) fn lookup_batch(&self, hashes: &[u64], out: &mut [Lookup]) {
        debug_assert!(hashes.len() <= BATCH && out.len() == hashes.len());
        let mut keys = [Key::default(); BATCH];
        for (key, &hash) in keys.iter_mut().zip(hashes) {
            *key = self.key(hash);
            self.prefetch(key);
        }
        for ((answer, key), &hash) in out.iter_mut().zip(&keys).zip(hashes) {
            *answer = self.lookup_retried(hash, key);
        }
    }

    /// Inserts at most `BATCH` hashes in order (with set semantics if `unique`), stopping at
    /// the first that fails: how many were added, or the failed one's index and its error.
    pub(crate) fn insert_batch(
        &self,
        hashes: &[u64],
        unique: bool,
    ) -> Result<usize, (usize, InsertError)> {
        debug_assert!(hashes.len() <= BATCH);
        let mut keys = [Key::default(); BATCH];
        for (key, &hash) in keys.iter_mut().zip(hashes) {
            *key = self.key(hash);
        }
        let keys = &keys[..hashes.len()];
        for key in keys.iter().take(PREFETCH_AHEAD) {
            self.prefetch(key);
        }
        let mut added = 0;
        for (i, key) in keys.iter().enumerate() {
            if let Some(ahead) = keys.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            added += usize::from(self.insert_key(key, unique).map_err(|e| (i, e))?);
        }
        Ok(added)
    }
}
