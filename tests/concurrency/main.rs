//! `CuckooFilter` under real threads: stress on large, nearly full tables, tiny growing
//! filters, contended inserts and `insert_unique`. (Loom explores interleavings exhaustively on
//! tiny tables: see `loom-tests/`.)

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/format_model.rs"]
mod format_model;

mod claims_attack;
mod contended_inserts;
mod every_width_growth;
mod expanding;
mod insert_unique;
mod layout_stress;
mod straddling_claims;
mod stress;
mod tiny_growable_mix;
mod tiny_growing_filters;
