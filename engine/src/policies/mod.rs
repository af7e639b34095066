//! The placement policies: the published baselines Partita is measured
//! against (shared/reference/fgd-protocol.md §5) and Partita's own. Each
//! is a [`Policy`] of the placement pipeline built from small stages;
//! [`new`] builds one by name.
//!
//! Ported from the Go build's `internal/engine/policies`: every score is
//! computed with the Go build's arithmetic (integer where it is integer,
//! floats in its order), so that both builds place every task alike.

use std::sync::Arc;

use crate::cluster::{Node, State};
use crate::frag::{Distribution, Shape};

mod bestfit;
mod clustering;
mod dotproduct;
mod fgd;
mod k8sdefault;
mod mig;
mod packing;
mod partita;
mod random;
mod registry;
mod reserve;

#[cfg(test)]
mod tests;

pub use bestfit::best_fit;
pub use clustering::gpu_clustering;
pub use dotproduct::dot_product;
pub use fgd::fgd;
pub use k8sdefault::k8s_default;
pub use packing::gpu_packing;
pub use partita::partita;
pub use random::random;
pub use registry::{PolicyError, names, new};

#[cfg(doc)]
use crate::placement::Policy;

/// What policies may need to know beyond one node.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The expected workload as the FGD paper sees it (no host memory).
    /// Required by fgd and partita. Shared, as one distribution serves
    /// every run of a pod list.
    pub typical: Option<Arc<Distribution>>,
    /// The requests of the expected workload with host memory, for
    /// policies that build their own view of it (partita).
    pub shapes: Vec<Shape>,
    /// Maps the model names of `shapes` to the cluster's; none: the GPU
    /// catalog's canonical name (`gpu::lookup`).
    pub canonical: Option<fn(&str) -> String>,
    /// The CPU (milli) and GPU (milli) that scale the dot-product and
    /// best-fit scores: the largest node's, as in the FGD protocol (128000
    /// and 8000 on the Alibaba cluster).
    pub norm_cpu: i64,
    pub norm_gpu: i64,
}

/// A config with the typical workload and the normalisers of `st`'s
/// largest nodes.
pub fn config_for(st: &State, typical: impl Into<Arc<Distribution>>) -> Config {
    let mut c = Config {
        typical: Some(typical.into()),
        ..Config::default()
    };
    for n in st.nodes() {
        c.norm_cpu = c.norm_cpu.max(n.cpu_milli());
        c.norm_gpu = c.norm_gpu.max(1000 * n.gpus().len() as i64);
    }
    c
}

/// The name of `n`'s GPU model, "" for a CPU-only node.
fn model_name(n: &Node) -> &str {
    n.model().map_or("", |m| m.name.as_str())
}

/// Refills `buf` with the milli left on each GPU of `n` (0 on a MIG or
/// cordoned GPU). Scorers keep `buf` between calls, so scoring a node
/// allocates nothing.
fn gpu_left(n: &Node, buf: &mut Vec<i64>) {
    buf.clear();
    buf.extend(n.gpus().iter().map(|g| i64::from(g.free())));
}
