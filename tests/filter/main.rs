//! `CuckooFilter` one thread at a time: the API and its std-like traits, the builder, the
//! hasher, false-positive rates, load factors, failed inserts, bucket layouts, hot keys, batch
//! calls, and the same calls on a growable filter.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/format_model.rs"]
mod format_model;

mod api;
mod batch;
mod builder;
mod builder_edges;
mod failed_insert;
mod false_positive_rate;
mod growable_api;
mod hasher_vectors;
mod hot_key;
mod hot_key_rule;
mod insert_many_prefetch;
mod layouts;
mod load_factor;
mod model;
mod set;
mod small_capacity;
mod std_api;
