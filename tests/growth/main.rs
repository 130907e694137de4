//! Growable filters: a table that doubles in place instead of failing inserts; every item is
//! found through every doubling, alone and under threads; removes, hot keys, limits and the
//! standard traits.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/format_model.rs"]
mod format_model;
#[path = "../common/growable.rs"]
mod growable_sizes;
#[path = "../common/serde_bytes.rs"]
mod serde_bytes;

mod api;
mod corners;
mod doubling;
mod expected_items;
mod growing;
mod lookup_stress;
mod lookups;
mod remove;
mod shrink;
mod split_runs;
mod width_churn;
