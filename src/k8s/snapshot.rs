//! One cycle's input to the engine, built from the API objects the
//! scheduler's reflectors hold (port of go/internal/kube/snapshot.go and
//! jobs.go): nodes into a cluster State, bound pods into what they hold,
//! pending pods into jobs (a PodGroup's pods are one gang), Queues into
//! teams. Pure: no API calls.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff;
use partita_engine::cluster::{Assignment, Grant, Node as EngineNode, State, build_node};
use partita_engine::gpu::{MEMORY_SLICES, Model, Placement, Profile, catalog};
use partita_engine::sched::{Job, Nanos, Team};
use partita_engine::workload::Kind;

use super::devices::grants_from_annotations;
use super::jobs::{Group, build_jobs, group_pods};
use super::node::{NodeOptions, NodeView, view_node};
use super::pod::{annotations_of, demand_of, gpu_resources, pod_requests, task_name, uid_of};
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

/// Marks, on the engine's copy of a node, that no new work may go there;
/// the scheduler's node filter reads it.
pub const LABEL_UNSCHEDULABLE: &str = "partita.dev/~unschedulable";

/// The engine's clock reading of a time: nanoseconds since the Unix epoch
/// (Go's `t.Sub(Epoch)`, `Epoch = time.Unix(0, 0)`), so that times
/// survive a restart of the scheduler. Saturates beyond i64 (292 years).
pub fn engine_time(t: jiff::Timestamp) -> Nanos {
    let ns = t.as_nanosecond();
    ns.clamp(i128::from(Nanos::MIN), i128::from(Nanos::MAX)) as Nanos
}

/// Turns the objects into the engine's input.
pub fn build_snapshot(obj: &Objects, opt: &SnapshotOptions) -> Result<Snapshot, SnapshotError> {
    let mut views = HashMap::new();
    let state = build_nodes(&obj.nodes, &opt.node, &mut views)?;
    let mut s = Snapshot {
        state,
        jobs: Vec::new(),
        teams: Vec::new(),
        views,
        busy: BTreeSet::new(),
        job_pods: HashMap::new(),
        job_queue: HashMap::new(),
        held: BTreeMap::new(),
        unaccounted: Vec::new(),
        placed: HashMap::new(),
    };
    let bound = allocate_pods(&mut s, &obj.pods, opt);
    cordon(&mut s);
    let groups = group_pods(&obj.pods, &opt.scheduler_name, &bound);
    if opt.freeze_busy {
        freeze_busy(&mut s, &groups, opt.headroom);
    }
    build_jobs(&mut s, groups, obj, opt);
    Ok(s)
}

/// Builds the engine's nodes, in name order, and fills `views`. A node
/// the engine refuses is kept without GPUs, unschedulable, so that the
/// pods bound there still count; only a State that cannot be built at all
/// (two nodes of one name) fails the snapshot.
fn build_nodes(
    nodes: &[Arc<Node>],
    opt: &NodeOptions,
    views: &mut HashMap<String, NodeView>,
) -> Result<State, SnapshotError> {
    let mut sorted: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut built = Vec::with_capacity(sorted.len());
    let mut names = Vec::with_capacity(sorted.len());
    for n in sorted {
        let mut v = view_node(n, opt);
        let mut spec = v.spec.clone();
        if v.unschedulable {
            spec.labels
                .insert(LABEL_UNSCHEDULABLE.to_string(), "true".to_string());
        }
        let cn = match build_node(&spec) {
            Ok(cn) => cn,
            Err(e) => {
                // build_node refuses only malformed specs (negative GPUs):
                // keep the node without GPUs so its pods are still counted.
                spec.gpus = 0;
                spec.gpu_model = String::new();
                spec.labels
                    .insert(LABEL_UNSCHEDULABLE.to_string(), "true".to_string());
                v.unschedulable = true;
                v.reason = e.to_string();
                v.gpus = Vec::new();
                build_node(&spec).map_err(|e| SnapshotError(e.to_string()))?
            }
        };
        built.push(cn);
        names.push(v.spec.name.clone());
        views.insert(v.spec.name.clone(), v);
    }
    let mut st = State::new(built).map_err(|e| SnapshotError(e.to_string()))?;
    for name in names {
        let Some(v) = views.get_mut(&name) else {
            continue;
        };
        for (k, g) in v.gpus.iter().enumerate() {
            if !g.mig {
                continue;
            }
            let set = st
                .set_mig(&name, k, true)
                .and_then(|()| st.set_layout(&name, k, &g.layout));
            if let Err(e) = set {
                v.mig_failed = true;
                v.reason = e.to_string();
                break;
            }
        }
    }
    Ok(st)
}

/// A pod that holds resources on a node: bound there, or bound by Partita
/// and not yet seen so (`SnapshotOptions::bound`).
struct BoundPod {
    pod: Arc<Pod>,
    node: String,
    annotations: BTreeMap<String, String>,
}

/// Puts every bound, unfinished pod (any scheduler's) on its node: first
/// those whose devices Partita recorded, then the others, on devices
/// derived from what they ask. Returns the node of each bound pod, by UID.
fn allocate_pods(
    s: &mut Snapshot,
    pods: &[Arc<Pod>],
    opt: &SnapshotOptions,
) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let (mut recorded, mut others) = (Vec::new(), Vec::new());
    for p in pods {
        if finished(p) {
            continue;
        }
        let node_name = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let b = match node_name {
            Some(node) if !node.is_empty() => BoundPod {
                pod: p.clone(),
                node: node.to_string(),
                annotations: annotations_of(p).clone(),
            },
            _ => {
                let Some(a) = opt.bound.get(uid_of(p)) else {
                    continue;
                };
                BoundPod {
                    pod: p.clone(),
                    node: a.node.clone(),
                    annotations: a.annotations.clone(),
                }
            }
        };
        out.insert(uid_of(p).to_string(), b.node.clone());
        // Unreadable device annotations count as recorded: they are
        // tried (and fail) first, as in Go.
        if matches!(grants_from_annotations(&b.annotations), Ok(None)) {
            others.push(b);
        } else {
            recorded.push(b);
        }
    }
    recorded.sort_by_key(|b| task_name(&b.pod));
    others.sort_by_key(|b| task_name(&b.pod));
    for b in &recorded {
        allocate(s, b, true, opt.headroom);
    }
    for b in &others {
        allocate(s, b, false, opt.headroom);
    }
    out
}

/// Whether the pod ran to its end (it holds nothing).
pub(crate) fn finished(p: &Pod) -> bool {
    matches!(phase(p), PHASE_SUCCEEDED | PHASE_FAILED)
}

/// The pod's status.phase ("" when unset).
pub(crate) fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Pod phases of the core API (corev1.PodSucceeded, PodFailed).
pub(crate) const PHASE_SUCCEEDED: &str = "Succeeded";
pub(crate) const PHASE_FAILED: &str = "Failed";

/// Puts one bound pod on its node, with the recorded devices when they
/// fit, else derived ones, else CPU and memory only.
fn allocate(s: &mut Snapshot, b: &BoundPod, recorded: bool, headroom: f64) {
    let Some(n) = s.state.node_by_name(&b.node) else {
        return; // bound to a node that is gone: it holds nothing
    };
    let derived = derive_grants(n, &b.pod, headroom);
    let (cpu_milli, memory_mib) = pod_requests(&b.pod);
    let mut a = Assignment {
        task: task_name(&b.pod),
        node: b.node.clone(),
        cpu_milli,
        memory_mib,
        grants: Vec::new(),
    };
    if recorded && let Ok(Some(grants)) = grants_from_annotations(&b.annotations) {
        a.grants = grants;
        if s.state.allocate(&a).is_ok() {
            mark_busy(s, &a);
            return;
        }
    }
    if let Some(grants) = derived {
        a.grants = grants;
        if s.state.allocate(&a).is_ok() {
            mark_busy(s, &a);
            return;
        }
    }
    a.grants = Vec::new();
    if gpu_resources(&b.pod).any() {
        s.unaccounted.push(format!(
            "{} on {}: its GPUs do not match the node's free devices",
            a.task, a.node
        ));
        s.busy.insert(a.node.clone());
    }
    if let Err(e) = s.state.allocate(&a) {
        s.unaccounted.push(format!("{} on {}: {e}", a.task, a.node));
    }
}

fn mark_busy(s: &mut Snapshot, a: &Assignment) {
    if !a.grants.is_empty() {
        s.busy.insert(a.node.clone());
    }
}

/// Picks devices for a bound pod Partita did not record (bound by another
/// scheduler, or before an upgrade): the lowest free whole GPUs, or the
/// first free MIG instance of its profile. None when they are not there.
fn derive_grants(n: &EngineNode, p: &Pod, headroom: f64) -> Option<Vec<Grant>> {
    let d = demand_of(p).ok()?;
    match d.kind {
        Kind::NoGpu => Some(Vec::new()),
        Kind::WholeGpus => {
            let want = usize::try_from(d.count).ok()?;
            let out: Vec<Grant> = n
                .gpus()
                .iter()
                .filter(|g| !g.mig() && g.used() == 0)
                .take(want)
                .map(|g| Grant::whole(g.index() as i32))
                .collect();
            (out.len() == want).then_some(out)
        }
        Kind::MigProfile | Kind::MemoryProfile => {
            for g in n.gpus().iter().filter(|g| g.mig()) {
                let profile = if d.kind == Kind::MemoryProfile {
                    match g
                        .model()
                        .profile_for(d.peak_memory_mib, d.compute, headroom)
                    {
                        Ok(p) => p.name.to_string(),
                        Err(_) => continue,
                    }
                } else {
                    d.profile.clone()
                };
                if let Some(sl) = g
                    .slices()
                    .iter()
                    .find(|sl| sl.is_free() && sl.profile() == profile)
                {
                    return Some(vec![Grant::instance(
                        g.index() as i32,
                        sl.placement().clone(),
                    )]);
                }
            }
            None
        }
        Kind::Fraction => None,
    }
}

/// Stops new GPU work on nodes that take none: unschedulable, or a MIG
/// change in flight or failed.
fn cordon(s: &mut Snapshot) {
    for (name, v) in &s.views {
        if !v.unschedulable && !v.mig_changing && !v.mig_failed {
            continue;
        }
        let gpus = s.state.node_by_name(name).map_or(0, |n| n.gpus().len());
        for k in 0..gpus {
            // The node and GPU exist: the cordon cannot fail.
            let _ = s.state.cordon(name, k, true);
        }
    }
}

/// Hides, on nodes that run GPU pods, what the engine could re-partition:
/// the uncovered memory of MIG GPUs, free instances of profiles no
/// pending pod asks for, and (when no pending pod asks for whole GPUs)
/// idle whole GPUs it could turn to MIG. Each is held by a placeholder
/// task (`is_hold`) that belongs to no job; free instances pending pods
/// can use stay free.
fn freeze_busy(s: &mut Snapshot, groups: &[Group], headroom: f64) {
    let (want_profiles, want_whole) = pending_demand(groups, headroom);
    let none = BTreeSet::new();
    for i in 0..s.state.len() {
        let n = s.state.node(i);
        if !s.busy.contains(n.name()) {
            continue;
        }
        let name = n.name().to_string();
        // What to do per GPU, read before the State changes.
        let gpus: Vec<(usize, bool, bool, String)> = n
            .gpus()
            .iter()
            .filter(|g| !g.cordoned() && g.model().mig)
            .map(|g| (g.index(), g.mig(), g.idle(), g.model().name.clone()))
            .collect();
        for (k, mig, idle, model) in gpus {
            if !mig {
                if idle && !want_whole {
                    let hold = Assignment {
                        task: hold_name(&name, k, 0),
                        node: name.clone(),
                        grants: vec![Grant::whole(k as i32)],
                        ..Assignment::default()
                    };
                    let _ = s.state.allocate(&hold);
                }
                continue;
            }
            freeze_mig(s, &name, k, want_profiles.get(&model).unwrap_or(&none));
        }
    }
}

/// Holds, on one MIG GPU of a busy node, the free instances of profiles no
/// pending pod wants and every memory slice no instance covers (with the
/// model's smallest instances).
fn freeze_mig(s: &mut Snapshot, node: &str, k: usize, wanted: &BTreeSet<String>) {
    let Some(g) = s.state.node_by_name(node).and_then(|n| n.gpus().get(k)) else {
        return;
    };
    let unwanted: Vec<Placement> = g
        .slices()
        .iter()
        .filter(|sl| sl.is_free() && !wanted.contains(sl.profile()))
        .map(|sl| sl.placement().clone())
        .collect();
    let small = smallest_profile(g.model()).cloned();
    let mut seq = 0;
    let mut hold = |s: &mut Snapshot, slice: Placement| {
        seq += 1;
        let a = Assignment {
            task: hold_name(node, k, seq),
            node: node.to_string(),
            grants: vec![Grant::instance(k as i32, slice)],
            ..Assignment::default()
        };
        // A hold that does not fit leaves that part free: nothing to hide.
        let _ = s.state.allocate(&a);
    };
    for pl in unwanted {
        hold(s, pl);
    }
    let Some(small) = small else {
        return;
    };
    for start in 0..MEMORY_SLICES {
        let free = s
            .state
            .node_by_name(node)
            .and_then(|n| n.gpus().get(k))
            .map_or(0, |g| g.free_memory_slices());
        if free & small.mask(start) == 0 || !small.can_start(start) {
            continue;
        }
        hold(s, Placement::new(small.name.clone(), start));
    }
}

/// The model's 1g profile with one memory slice.
fn smallest_profile(m: &Model) -> Option<&Profile> {
    m.profiles
        .iter()
        .find(|p| p.memory == 1 && p.compute == 1 && !p.media_ext)
}

fn hold_name(node: &str, gpu: usize, seq: usize) -> String {
    format!("{HOLD_PREFIX}{node}/{gpu}/{seq}")
}

const HOLD_PREFIX: &str = "~hold/";

/// Whether a task is one of the placeholders that hide a busy node's free
/// MIG regions (`SnapshotOptions::freeze_busy`): no pod, no job.
pub fn is_hold(task: &str) -> bool {
    task.starts_with(HOLD_PREFIX)
}

/// Lists, per GPU model, the MIG profiles pending pods may take, and
/// whether any pending pod asks for whole GPUs or a share.
fn pending_demand(groups: &[Group], headroom: f64) -> (BTreeMap<String, BTreeSet<String>>, bool) {
    let mut profiles: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut whole = false;
    for m in groups.iter().flat_map(|g| &g.members) {
        if m.bound.is_some() || m.task_err.is_some() {
            continue;
        }
        let d = &m.task.gpu;
        match d.kind {
            Kind::WholeGpus | Kind::Fraction => whole = true,
            Kind::MigProfile | Kind::MemoryProfile => {
                for model in catalog() {
                    if !model.mig || !d.allows_model(&model.name) {
                        continue;
                    }
                    let name = if d.kind == Kind::MemoryProfile {
                        match model.profile_for(d.peak_memory_mib, d.compute, headroom) {
                            Ok(p) => p.name.to_string(),
                            Err(_) => continue,
                        }
                    } else {
                        d.profile.clone()
                    };
                    profiles.entry(model.name.clone()).or_default().insert(name);
                }
            }
            Kind::NoGpu => {}
        }
    }
    (profiles, whole)
}
