//! Where work goes: the placement pipeline (rewrite, filter, score,
//! select, pick) that every policy is made of, and the `Placer` that runs
//! one policy over a cluster snapshot.
//!
//! It is pure: given a snapshot and the work to place, it returns
//! decisions; it changes no State it is given, reads no clock, and draws
//! randomness only from the `Rand` its caller gives the placer. The
//! simulators, the standalone server and the Kubernetes scheduler all
//! drive this same code.
//!
//! Ported from the Go build's `internal/engine`; the decisions are the same
//! ones, tie for tie and draw for draw.

mod capacity;
mod fit;
mod picker;
mod pipeline;
mod placer;
mod request;
mod share;

#[cfg(test)]
mod tests;

pub use capacity::capacity_of;
pub use fit::{Fit, explain, slices_for};
pub use picker::{DefaultPicker, RandomPicker, lowest_free_gpus};
pub use pipeline::{
    Adjuster, Code, Filter, Hint, Picker, Policy, Reason, Rewriter, Scorer, Selector,
};
pub use placer::{Failure, PlaceError, Placer};
pub use request::Request;
pub use share::{grant_share, need};
