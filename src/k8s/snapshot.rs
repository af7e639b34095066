//! One cycle's input to the engine, built from the API objects the
//! scheduler's reflectors hold (port of go/internal/kube/snapshot.go and
//! jobs.go): nodes into a cluster State, bound pods into what they hold,
//! pending pods into jobs (a PodGroup's pods are one gang), Queues into
//! teams. Pure: no API calls.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use partita_engine::cluster::{Assignment, State};
use partita_engine::sched::{Job, Team};

use super::node::{NodeOptions, NodeView};
use super::resources::{PodGroup, Queue};

/// What a cycle reads from the reflectors.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub nodes: Vec<Arc<Node>>,
    pub pods: Vec<Arc<Pod>>,
    pub queues: Vec<Arc<Queue>>,
    pub pod_groups: Vec<Arc<PodGroup>>,
}

/// A bind Partita made that the reflector has not shown yet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assumed {
    pub node: String,
    pub annotations: BTreeMap<String, String>,
}

/// The scheduler's settings and memory that shape a snapshot beyond the
/// objects. Pods are keyed by UID.
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions {
    pub scheduler_name: String,
    pub node: NodeOptions,
    pub headroom: f64,
    /// Hides the free MIG regions of nodes that run GPU pods from the
    /// engine, so that it plans no MIG change there: the GPU Operator's
    /// MIG manager stops a node's GPU pods while it applies a layout.
    pub freeze_busy: bool,
    /// Binds made but not yet seen.
    pub bound: HashMap<String, Assumed>,
    /// Evictions made.
    pub evicting: BTreeSet<String>,
    /// Keeps jobs from the engine while the MIG change made for them is
    /// in flight: job ID -> node.
    pub hold: HashMap<String, String>,
    /// The assignments of the last snapshot, by pod UID: an unchanged one
    /// is handed to the engine as the same Arc, which its caches key on.
    pub placed: HashMap<String, Arc<Assignment>>,
}

/// One cycle's input to the engine, plus what the scheduler needs to
/// carry the decision out.
#[derive(Debug)]
pub struct Snapshot {
    pub state: State,
    /// Every unfinished job, in a stable order (the engine's input order).
    pub jobs: Vec<Job>,
    pub teams: Vec<Team>,
    pub views: HashMap<String, NodeView>,
    /// Nodes that run pods holding GPUs.
    pub busy: BTreeSet<String>,
    /// Each job's unfinished pods, in task order for a job the engine gets
    /// whole (a held job with bound pods gets its bound part only).
    pub job_pods: HashMap<String, Vec<Arc<Pod>>>,
    /// The Queue of each job.
    pub job_queue: HashMap<String, String>,
    /// Jobs not given to the engine, with the reason; each of their
    /// pending pods waits for it.
    pub held: BTreeMap<String, String>,
    /// Bound pods whose devices could not be matched to the node's
    /// capacity (over-commitment by another component).
    pub unaccounted: Vec<String>,
    /// This snapshot's assignments by pod UID, for the next one.
    pub placed: HashMap<String, Arc<Assignment>>,
}

/// Why no snapshot could be built (only an inconsistent cluster State).
#[derive(Debug, thiserror::Error)]
#[error("snapshot: {0}")]
pub struct SnapshotError(pub String);

/// Turns the objects into the engine's input.
pub fn build_snapshot(obj: &Objects, opt: &SnapshotOptions) -> Result<Snapshot, SnapshotError> {
    let _ = (obj, opt);
    todo!("issue 48: port go/internal/kube/snapshot.go")
}
