//! The state of a GPU cluster: nodes, their GPUs and MIG instances, what
//! is allocated where, and the topology that training gangs care about.
//!
//! A `State` is changed only through `allocate`, `release` and the MIG and
//! cordon methods, which keep its invariants: no GPU or MIG instance is
//! over-allocated, CPU and memory in use never exceed a node's capacity or
//! go negative, every MIG layout is valid. Cloning a State is cheap (copy on
//! write per node), so the engine can try a plan on a copy and throw it
//! away.
//!
//! Every change gives the changed node a new `generation` and the State a new
//! `version`, numbered by the State's `NodeSet`: caches of per-node or
//! whole-cluster facts key on them (and on the node set).

mod alloc;
mod build;
mod error;
mod node;
mod state;

#[cfg(test)]
mod tests;

pub use build::{LINK_ALL, LINK_NONE, LINK_PAIRS, NodeSpec, build_node};
pub use error::{AllocError, ClusterError, GrantError, ParseTierError};
pub use node::{
    Gpu, Hold, LABEL_BLOCK, LABEL_LEAF, LABEL_SPINE, NO_LINK, Node, Slice, Tier, Topology,
    parse_tier, topology_from_labels,
};
pub use state::{Assignment, Grant, NodeSet, State};
