//! Growing filters: levels added instead of failed inserts, the key mapping of nested levels,
//! lookups and removes in grown filters, alone and under threads.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/format_model.rs"]
mod format_model;

mod expanding;
mod expanding_api;
mod growing;
mod level_keys;
mod lookup_oracle;
mod lookup_stress;
mod lookups;
mod model;
mod narrowing;
mod release;
mod remove;
mod shapes;
