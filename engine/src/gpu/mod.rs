//! GPU models and MIG geometry: which profiles a model offers, where on the
//! GPU each may start, and which sets of instances can share one GPU. It is
//! pure arithmetic over the tables in `catalog.rs`: no I/O, no clocks, no
//! state that changes.
//!
//! A MIG-capable GPU has `COMPUTE_SLICES` compute slices and
//! `MEMORY_SLICES` memory slices; an instance (a `Placement`) is a profile
//! at a start memory slice, and a `Layout` is the instances of one GPU.
//! Memory in use is kept as a `u8` bit mask, one bit per memory slice.

mod catalog;
mod error;
mod geometry;
mod layout;
mod model;

#[cfg(test)]
pub(crate) mod tests;

pub use error::GpuError;
pub use geometry::starts_of;
pub(crate) use geometry::{Usage, join_starts};
pub(crate) use layout::same_name;
pub use layout::{Layout, Placement};
pub use model::{DEFAULT_HEADROOM, Model, ModelRef, Profile, catalog, lookup};

/// Compute slices of every MIG-capable GPU in the catalog.
pub const COMPUTE_SLICES: i32 = 7;

/// Memory slices of every MIG-capable GPU in the catalog. A layout's memory
/// use fits in a `u8` bit mask because of the 8.
pub const MEMORY_SLICES: i32 = 8;
