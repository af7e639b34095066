//! The scheduler's tests: the Go build's, ported beside its fixtures
//! (`helpers.rs`), and the decisions of random worlds against the Go
//! build's (`golden.rs`).

mod config;
mod cycle;
mod determinism;
mod gang;
mod golden;
pub(super) mod helpers;
mod incremental;
mod mig;
mod moves;
mod order;
mod preempt;
mod quota;
mod random_world;
mod reserve;
