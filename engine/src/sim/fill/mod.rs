//! The fill experiment of the FGD paper (ATC'23, "Beware of
//! Fragmentation"), as its simulator runs it on the Alibaba GPU 2023
//! trace: pods arrive one by one and never leave, a pod that does not fit
//! is dropped, and the GPU allocation rate is recorded against the arrived
//! workload. `shared/reference/fgd-protocol.md` is the specification; the
//! section numbers in comments refer to it.
//!
//! The engine runs one seed of one policy ([`run`]); running a grid of
//! them on worker threads, and writing the reports to files, is the
//! caller's (`partita bench fill`). The Go build's `--defrag` mode (moving
//! placed shares to make room) is not ported: it gained little and was not
//! deterministic (docs/fill.md).

mod arrivals;
mod report;
mod run;

pub use arrivals::{Pod, arrivals, canonical, nodes, pod_of, shapes, typical};
pub use report::{
    ListResult, PUBLISHED_NAMES, Published, PublishedError, alloc_svg, curves_csv, parse_published,
    readme, summary_md, workload_name,
};
pub use run::{Options, RunResult, run};

use std::sync::Arc;

use crate::cluster::ClusterError;
use crate::frag::{Distribution, Shape};
use crate::placement::PlaceError;
use crate::policies::PolicyError;
use crate::trace;

/// The number of arrived-workload columns, 0..130 % (§4).
pub const COLUMNS: usize = 131;

/// One pod list on one node list, with what is computed once from the
/// original trace: the typical workload and the request shapes.
#[derive(Clone, Debug)]
pub struct Input {
    pub nodes: Vec<trace::Node>,
    pub pods: Vec<trace::Pod>,
    /// Shared by every run of the list (and their policies).
    pub typical: Arc<Distribution>,
    pub shapes: Vec<Shape>,
}

impl Input {
    /// The input of `nodes` and `pods`, with the typical workload and the
    /// shapes computed from `pods`.
    pub fn new(nodes: Vec<trace::Node>, pods: Vec<trace::Pod>) -> Input {
        let typical = Arc::new(typical(&pods));
        let shapes = shapes(&pods);
        Input {
            nodes,
            pods,
            typical,
            shapes,
        }
    }
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    #[error("fill: empty node or pod list")]
    Empty,
    #[error("fill: the node list has no GPU")]
    NoGpu,
    #[error("{node} line {line}: {source}")]
    Node {
        node: String,
        line: usize,
        source: ClusterError,
    },
    #[error("{0}")]
    Cluster(ClusterError),
    #[error("{0}")]
    Policy(PolicyError),
    #[error("{0}")]
    Place(PlaceError),
    #[error("fill: engine chose an assignment the cluster refuses: {0}")]
    Refused(ClusterError),
}

/// The median of `xs` (the mean of the middle two for an even count), as
/// the published tables report over seeds 42-51; 0 for none.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests;
