//! Snapshots: round trips, malformed input, grown filters, the `serde` feature, and saves
//! while other threads use the filter (freeze, liveness, linearizability).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/format_model.rs"]
mod format_model;
#[path = "../common/growable.rs"]
mod growable_sizes;
#[path = "../common/serde_bytes.rs"]
mod serde_bytes;
mod watchdog;

mod growable;
mod growable_mutations;
mod nested_ops;
mod save_chaos;
mod save_corners;
mod save_freeze;
mod save_linearizable;
mod save_liveness;
mod save_under_load;
mod serde_format;
mod snapshots;
mod stages;
