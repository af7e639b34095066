use thiserror::Error;

use crate::gpu::{GpuError, Placement};
use crate::quote::quote;

/// Why a change to the cluster, or the building of one, is refused. The
/// texts are the Go build's, word for word.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ClusterError {
    /// `State::allocate` on a node the cluster does not have.
    #[error("allocate {task}: node {}: not found", quote(.node))]
    AllocateUnknownNode { task: String, node: String },
    /// `State::allocate` refused: the assignment does not fit the node.
    #[error("allocate {task} on {node}: {reason}")]
    Refused {
        task: String,
        node: String,
        reason: Box<AllocError>,
    },
    /// `State::release` on a node the cluster does not have.
    #[error("release {task}: node {}: not found", quote(.node))]
    ReleaseUnknownNode { task: String, node: String },
    /// `State::release` of a task the node does not run.
    #[error("release: task {} on node {node}: not found", quote(.task))]
    UnknownTask { task: String, node: String },
    /// A MIG change or cordon on a node the cluster does not have.
    #[error("node {}: not found", quote(.node))]
    UnknownNode { node: String },
    #[error("node {node}: no GPU {index}")]
    NoSuchGpu { node: String, index: usize },
    #[error("node {node}: GPU {index}: MIG is off")]
    MigOff { node: String, index: usize },
    /// An invalid MIG layout for a GPU.
    #[error("node {node}: GPU {index}: {source}")]
    BadLayout {
        node: String,
        index: usize,
        source: Box<GpuError>,
    },
    #[error("node {node}: GPU {index}: new layout drops {placement}, which {task} is using")]
    DropsHeld {
        node: String,
        index: usize,
        placement: Placement,
        task: String,
    },
    #[error("node {node}: GPU {index}: model {model} does not support MIG")]
    GpuWithoutMig {
        node: String,
        index: usize,
        model: String,
    },
    #[error("node {node}: GPU {index}: busy; MIG mode changes need an idle GPU")]
    Busy { node: String, index: usize },

    // State::new
    #[error("node {index}: name is empty")]
    EmptyNodeName { index: usize },
    #[error("node {node}: name is used twice")]
    DuplicateNode { node: String },
    #[error("node {node}: negative capacity")]
    NegativeCapacity { node: String },
    #[error("node {node}: GPU at position {position} has index {index}")]
    GpuIndex {
        node: String,
        position: usize,
        index: usize,
    },

    // build_node
    #[error("node {node}: gpus {gpus} is negative")]
    NegativeGpus { node: String, gpus: i32 },
    #[error("node {node}: {gpus} GPUs but no GPU model")]
    NoGpuModel { node: String, gpus: i32 },
    #[error("node {node}: {source}")]
    BadTier {
        node: String,
        source: ParseTierError,
    },
    #[error("node {node}: model {model} does not support MIG")]
    NodeWithoutMig { node: String, model: String },
    #[error("node {node}: a MIG layout is given but MIG is off")]
    LayoutWithoutMig { node: String },
    #[error("node {node}: layout: {source}")]
    BadSpecLayout { node: String, source: Box<GpuError> },
    #[error("node {node}: nvlink {}: want none, all or pairs", quote(.nvlink))]
    BadNvlink { node: String, nvlink: String },

    /// `State::check` found a broken invariant.
    #[error("node {node}: {problem}")]
    Broken { node: String, problem: String },
}

impl ClusterError {
    /// Whether the error is for an unknown node or task: Go's
    /// `errors.Is(err, ErrNotFound)`.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            ClusterError::AllocateUnknownNode { .. }
                | ClusterError::ReleaseUnknownNode { .. }
                | ClusterError::UnknownTask { .. }
                | ClusterError::UnknownNode { .. }
        )
    }
}

/// Why an assignment does not fit a node.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum AllocError {
    #[error("task name is empty")]
    EmptyTaskName,
    #[error("task already runs here")]
    AlreadyRuns,
    #[error("negative cpu or memory request")]
    Negative,
    #[error("cpu: asks {asks}m, {free}m free of {total}m")]
    Cpu { asks: i64, free: i64, total: i64 },
    #[error("memory: asks {asks} MiB, {free} MiB free of {total} MiB")]
    Memory { asks: i64, free: i64, total: i64 },
    #[error("gpu {gpu}: node has {count} GPUs")]
    NoSuchGpu { gpu: i32, count: usize },
    #[error("gpu {gpu}: granted twice to one task")]
    GrantedTwice { gpu: i32 },
    /// One grant does not fit its GPU.
    #[error("gpu {gpu}: {reason}")]
    Grant { gpu: i32, reason: GrantError },
}

/// Why a grant does not fit its GPU.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum GrantError {
    #[error("cordoned: takes no new work")]
    Cordoned,
    #[error("MIG is on: ask for an instance, not {0} milli")]
    MigOn(i32),
    #[error("share {0} milli is not between 1 and 1000")]
    BadShare(i32),
    #[error("asks {asks} milli, {free} free")]
    TooMuch { asks: i32, free: i32 },
    #[error("MIG is off: no instance {0}")]
    MigOff(Placement),
    #[error("instance {placement} is held by {task}")]
    Held { placement: Placement, task: String },
    #[error("instance {placement}: start not allowed (allowed: {allowed})")]
    StartNotAllowed {
        placement: Placement,
        /// The profile's starts as Go's `%v` writes a list: "[0 4]".
        allowed: String,
    },
    #[error("instance {placement} does not fit beside {layout}")]
    NoRoom {
        placement: Placement,
        layout: String,
    },
    /// The model refuses the instance: an unknown profile, or a rule of
    /// the layout (one +me, a profile's count).
    #[error(transparent)]
    Layout(GpuError),
}

/// An unknown capacity tier name.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown capacity tier {} (known: reserved, on-demand, spot)", quote(.0))]
pub struct ParseTierError(pub String);
