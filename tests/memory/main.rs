//! Tests that measure the process: peak heap (through the counting allocator, global to this
//! binary), the largest single allocation, the resident set, huge pages. Those that measure run one at a
//! time (each holds [`counting_alloc::one_at_a_time`]), so that no other test's memory is
//! measured; the refusal of oversized sub-filters runs in child processes.

#[path = "../common/mod.rs"]
mod common;
mod counting_alloc;
#[path = "../common/format_model.rs"]
mod format_model;
#[path = "../common/growable.rs"]
mod growable_sizes;
#[path = "../redisbloom/serial_model.rs"]
mod serial_model;

mod huge_pages;
mod read_from_copies;
mod redisbloom_loaders;
mod redisbloom_oversized;
mod resident;
mod restore_heap;
