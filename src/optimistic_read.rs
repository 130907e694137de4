//! The optimistic (seqlock) read that every filter's lookups and counts retry: its outcome
//! ([`Lookup`]), its one attempt limit ([`READ_ATTEMPTS`]) and the retry loop itself
//! ([`retry_read`]).
//!
//! An attempt reads a stripe version, the buckets, and the version again (`stripe`): a hit
//! needs no proof, a miss or a count holds only if no writer touched the stripe in between. A
//! reader never waits for a writer (guarantee 2), so after [`READ_ATTEMPTS`] attempts that each
//! met one the read gives up and its caller decides: a lookup answers "maybe present", a count
//! takes its buckets' stripes to read, or waits for what kept it from a consistent state.

use crate::sync::reader_pause;

/// Optimistic attempts of one read before it gives up (every filter type, lookups and counts).
///
/// An attempt fails only when a writer changed the read's stripe during it, so 64 failures in
/// a row take a writer that rewrites the same buckets without pause; a lookup then answers
/// "maybe present" rather than wait. Loom models that need an impatient reader pass a smaller
/// limit of their own (see `loom_hook`).
pub(crate) const READ_ATTEMPTS: u32 = 64;

/// The outcome of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A lane holds the fingerprint.
    Present,
    /// The buckets were read in one consistent state and none holds the fingerprint.
    Absent,
    /// Every optimistic attempt collided with a writer; the answer falls back to "maybe".
    Unproven,
}

impl Lookup {
    /// The outcome of a [`retry_read`] whose attempts answer whether a lane holds the
    /// fingerprint.
    #[inline(always)]
    pub(crate) fn of(read: Option<bool>) -> Lookup {
        match read {
            Some(true) => Lookup::Present,
            Some(false) => Lookup::Absent,
            None => Lookup::Unproven,
        }
    }

    /// The answer over several tables (levels, sub-filters), looked up in the iterator's order
    /// and lazily: `Present` at the first table that has the item, else `Unproven` if any
    /// table's answer was, else `Absent`.
    #[inline]
    pub(crate) fn over(answers: impl Iterator<Item = Lookup>) -> Lookup {
        let mut unproven = false;
        for answer in answers {
            match answer {
                Lookup::Present => return Lookup::Present,
                Lookup::Unproven => unproven = true,
                Lookup::Absent => {}
            }
        }
        if unproven {
            Lookup::Unproven
        } else {
            Lookup::Absent
        }
    }
}

/// Runs optimistic read attempts until one gives an answer, at most `attempts` of them (at
/// least one), with a [`reader_pause`] between two attempts. `attempt(n)` makes attempt `n`
/// (from 0) and returns its answer, or `None` when a writer kept it from one (its validation
/// failed). Returns the first answer, or `None` when every attempt failed: the read is
/// unproven, and the caller chooses what that means.
///
/// Always inlined, like the loops it replaced, and `attempt` is called from one place only, so
/// that it is inlined too: a lookup's first attempt stays on its caller's fast path. (Called
/// once before the loop and once in it, the expanding filter's lookup became a call.)
#[inline(always)]
pub(crate) fn retry_read<T>(attempts: u32, mut attempt: impl FnMut(u32) -> Option<T>) -> Option<T> {
    let mut n = 0;
    loop {
        if let Some(answer) = attempt(n) {
            return Some(answer);
        }
        n += 1;
        if n >= attempts {
            return None;
        }
        reader_pause();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn retry_read_stops_at_the_first_answer() {
        let mut made = Vec::new();
        let answer = retry_read(READ_ATTEMPTS, |n| {
            made.push(n);
            (n == 2).then_some("proven")
        });
        assert_eq!(answer, Some("proven"));
        assert_eq!(made, [0, 1, 2]);
    }

    #[test]
    fn retry_read_gives_up_after_the_limit() {
        let mut made = 0;
        let answer: Option<()> = retry_read(5, |_| {
            made += 1;
            None
        });
        assert_eq!((answer, made), (None, 5));
    }

    #[test]
    fn a_limit_of_zero_still_makes_one_attempt() {
        let mut made = 0;
        let answer: Option<()> = retry_read(0, |_| {
            made += 1;
            None
        });
        assert_eq!((answer, made), (None, 1));
    }

    #[test]
    fn lookup_over_tables_prefers_present_then_unproven() {
        use Lookup::*;
        assert_eq!(
            Lookup::over([Absent, Unproven, Present].into_iter()),
            Present
        );
        assert_eq!(
            Lookup::over([Absent, Unproven, Absent].into_iter()),
            Unproven
        );
        assert_eq!(Lookup::over([Absent, Absent].into_iter()), Absent);
        assert_eq!(Lookup::over(std::iter::empty()), Absent);
    }
}
