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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::fixtures::{gpu_node, must_snapshot, pod, pod_group, queue};
    use crate::k8s::names::{
        ANNOTATION_GPU_MEMORY, ANNOTATION_GPUS, ANNOTATION_MIG_SLICE, ANNOTATION_MIN_MEMBER,
        LABEL_COSCHEDULING_POD_GROUP, LABEL_GPU_PRODUCT,
    };
    use crate::k8s::resources::QueueSpec;
    use partita_engine::random::Rand;
    use partita_engine::sched::{self, Input, Phase, Scheduler};

    fn ids(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(Job::id).collect()
    }

    // TestSnapshotAccountsBoundPods.
    #[test]
    fn snapshot_accounts_bound_pods() {
        let obj = Objects {
            nodes: vec![
                gpu_node("a", 4).obj(),
                gpu_node("m", 1).mig(1, &[("1g.10gb", 7)]).obj(),
            ],
            pods: vec![
                // Partita's, with the devices it recorded.
                pod("train")
                    .gpus(2)
                    .on("a", &[(ANNOTATION_GPUS, "2,3")])
                    .obj(),
                // Another scheduler's, without annotations: derived.
                pod("other")
                    .gpus(1)
                    .scheduler("default-scheduler")
                    .on("a", &[])
                    .obj(),
                pod("infer")
                    .mig_profile("1g.10gb")
                    .on("m", &[(ANNOTATION_MIG_SLICE, "0:1g.10gb@5")])
                    .obj(),
                // Finished pods hold nothing.
                pod("done").gpus(1).on("a", &[]).phase("Succeeded").obj(),
            ],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        let want = "a cpu 2000/64000m mem 2048/524288 MiB\n\
                    \x20 gpu0 H100-80GB 1000/1000 [ns/other 1000]\n\
                    \x20 gpu1 H100-80GB 0/1000\n\
                    \x20 gpu2 H100-80GB 1000/1000 [ns/train 1000]\n\
                    \x20 gpu3 H100-80GB 1000/1000 [ns/train 1000]\n";
        assert_eq!(s.state.node_by_name("a").unwrap().describe(), want);
        let m = s.state.node_by_name("m").unwrap().describe();
        assert!(
            m.contains("[1g.10gb@5 ns/infer]"),
            "node m does not hold infer on its recorded instance:\n{m}"
        );
        assert_eq!(s.busy, BTreeSet::from(["a".to_string(), "m".to_string()]));
        assert_eq!(ids(&s.jobs), ["pod:ns/infer", "pod:ns/train"]);
        for j in &s.jobs {
            assert_eq!(j.phase, Phase::Running, "job {}", j.id());
        }
        assert!(s.unaccounted.is_empty(), "{:?}", s.unaccounted);
    }

    // TestSnapshotRecordedDevicesThatNoLongerFitAreDerived.
    #[test]
    fn recorded_devices_that_no_longer_fit_are_derived() {
        let obj = Objects {
            nodes: vec![gpu_node("a", 2).obj()],
            pods: vec![
                pod("x").gpus(1).on("a", &[(ANNOTATION_GPUS, "1")]).obj(),
                // A conflicting record.
                pod("y").gpus(1).on("a", &[(ANNOTATION_GPUS, "1")]).obj(),
            ],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        assert_eq!(
            s.state.node_by_name("a").unwrap().gpu_free_milli(),
            0,
            "want both GPUs held"
        );
    }

    // A bound pod whose GPUs match no free device holds CPU and memory
    // only, and is reported.
    #[test]
    fn unmatched_devices_are_reported() {
        let obj = Objects {
            nodes: vec![gpu_node("a", 1).obj()],
            pods: vec![
                pod("x").gpus(1).on("a", &[(ANNOTATION_GPUS, "0")]).obj(),
                pod("y").gpus(1).on("a", &[]).obj(),
                pod("gone").gpus(1).on("nowhere", &[]).obj(),
            ],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        assert_eq!(
            s.unaccounted,
            ["ns/y on a: its GPUs do not match the node's free devices"]
        );
        let a = s.state.node_by_name("a").unwrap();
        assert_eq!((a.cpu_used(), a.mem_used()), (2000, 2048));
        // The pod on a node that is gone is running and holds nothing.
        let gone = s.jobs.iter().find(|j| j.id() == "pod:ns/gone").unwrap();
        assert_eq!(gone.phase, Phase::Running);
        let held = gone.placed[0].as_ref().unwrap();
        assert_eq!((held.node.as_str(), held.cpu_milli), ("nowhere", 0));
    }

    // TestSnapshotJobs: its fourteen cases.
    #[test]
    fn snapshot_jobs() {
        let nodes = vec![gpu_node("a", 8).obj()];
        let queues = vec![queue(
            "ml",
            QueueSpec {
                team: "ml".to_string(),
                guaranteed_gpus: 4,
                burst_gpus: Some(8),
                weight: Some(2.0),
                allowed_priority_classes: vec!["batch".to_string()],
            },
        )];
        struct Case {
            name: &'static str,
            pods: Vec<Arc<Pod>>,
            groups: Vec<Arc<PodGroup>>,
            /// A job the engine gets.
            want_job: &'static str,
            want_gang: i32,
            /// Part of the reason a job is held.
            want_held: &'static str,
        }
        let case = |name, pods| Case {
            name,
            pods,
            groups: vec![],
            want_job: "",
            want_gang: 0,
            want_held: "",
        };
        let gang = |names: &[&str], min: &str| {
            names
                .iter()
                .map(|n| {
                    pod(n)
                        .gpus(8)
                        .group("g")
                        .ann(ANNOTATION_MIN_MEMBER, min)
                        .obj()
                })
                .collect::<Vec<_>>()
        };
        let cases = vec![
            Case {
                want_job: "pod:ns/p",
                ..case("a lone pod", vec![pod("p").gpus(1).obj()])
            },
            Case {
                want_job: "group:ns/g",
                want_gang: 2,
                ..case("a gang by annotation, complete", gang(&["w0", "w1"], "2"))
            },
            Case {
                want_held: "gang: 2 of 3 pods exist",
                ..case("a gang missing a pod", gang(&["w0", "w1"], "3"))
            },
            Case {
                groups: vec![pod_group("g", 3, "")],
                want_held: "gang: 2 of 3",
                ..case(
                    "a PodGroup object gives the size",
                    vec![
                        pod("w0").gpus(1).group("g").obj(),
                        pod("w1").gpus(1).group("g").obj(),
                    ],
                )
            },
            Case {
                want_job: "group:ns/g",
                ..case(
                    "the coscheduling label works too",
                    vec![
                        pod("w0")
                            .gpus(1)
                            .label(LABEL_COSCHEDULING_POD_GROUP, "g")
                            .obj(),
                    ],
                )
            },
            Case {
                groups: vec![pod_group("g", 2, "")],
                want_job: "group:ns/g",
                want_gang: 1,
                ..case(
                    "a finished member still counts toward the gang",
                    vec![
                        pod("w0").gpus(1).group("g").phase("Succeeded").obj(),
                        pod("w1").gpus(1).group("g").obj(),
                    ],
                )
            },
            Case {
                want_held: r#"mig profile "5g.99gb": no GPU in the cluster offers it"#,
                ..case(
                    "an unknown MIG profile",
                    vec![pod("p").mig_profile("5g.99gb").obj()],
                )
            },
            Case {
                want_held: "asks for 16 GPUs but the largest node",
                ..case("more GPUs than any node has", vec![pod("p").gpus(16).obj()])
            },
            Case {
                want_held: r#"queue "nope" does not exist"#,
                ..case(
                    "an unknown queue",
                    vec![pod("p").gpus(1).queue("nope").obj()],
                )
            },
            Case {
                want_job: "pod:ns/p",
                ..case(
                    "a queue's allowed priority class",
                    vec![pod("p").gpus(1).queue("ml").priority_class("batch").obj()],
                )
            },
            Case {
                want_held: r#"priority class "urgent" is not allowed in queue ml"#,
                ..case(
                    "another priority class",
                    vec![pod("p").gpus(1).queue("ml").priority_class("urgent").obj()],
                )
            },
            Case {
                want_held: "nodeSelector zone",
                ..case(
                    "a node selector Partita does not evaluate",
                    vec![pod("p").gpus(1).node_selector("zone", "a").obj()],
                )
            },
            Case {
                want_held: "not a quantity",
                ..case(
                    "a bad memory annotation",
                    vec![pod("p").ann(ANNOTATION_GPU_MEMORY, "x").obj()],
                )
            },
            case(
                "another scheduler's pod is not a job",
                vec![pod("p").gpus(1).scheduler("default-scheduler").obj()],
            ),
        ];
        assert_eq!(cases.len(), 14);
        for tc in cases {
            let name = tc.name;
            let obj = Objects {
                nodes: nodes.clone(),
                pods: tc.pods,
                queues: queues.clone(),
                pod_groups: tc.groups,
            };
            let s = must_snapshot(obj, SnapshotOptions::default());
            if !tc.want_held.is_empty() {
                assert!(
                    s.held.values().any(|why| why.contains(tc.want_held)),
                    "{name}: held {:?}, want a reason containing {:?}",
                    s.held,
                    tc.want_held
                );
                assert!(
                    s.jobs.is_empty(),
                    "{name}: held job also given to the engine"
                );
                continue;
            }
            if tc.want_job.is_empty() {
                assert!(
                    s.jobs.is_empty() && s.held.is_empty(),
                    "{name}: jobs {:?} held {:?}, want none",
                    ids(&s.jobs),
                    s.held
                );
                continue;
            }
            assert_eq!(ids(&s.jobs), [tc.want_job], "{name}: held {:?}", s.held);
            if tc.want_gang > 0 {
                assert_eq!(s.jobs[0].spec.gang_size, tc.want_gang, "{name}: gang size");
            }
        }
    }

    // A queue is the engine's team; the job's team and project are its
    // queue and namespace, its class its highest pod's.
    #[test]
    fn queues_are_teams() {
        let queues = vec![
            queue(
                "ml",
                QueueSpec {
                    team: "ml".to_string(),
                    guaranteed_gpus: 4,
                    burst_gpus: Some(8),
                    weight: Some(2.0),
                    allowed_priority_classes: vec![],
                },
            ),
            queue(
                "bad",
                QueueSpec {
                    team: "x".to_string(),
                    guaranteed_gpus: 4,
                    burst_gpus: Some(2),
                    weight: None,
                    allowed_priority_classes: vec![],
                },
            ),
            queue(
                "infra",
                QueueSpec {
                    team: "infra".to_string(),
                    guaranteed_gpus: 2,
                    burst_gpus: None,
                    weight: None,
                    allowed_priority_classes: vec![],
                },
            ),
        ];
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods: vec![pod("p").gpus(1).queue("ml").priority(Some(2_000_000)).obj()],
            queues,
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        let teams: Vec<(&str, i64, i64, f64)> = s
            .teams
            .iter()
            .map(|t| (t.name.as_str(), t.guarantee, t.burst, t.weight))
            .collect();
        assert_eq!(teams, [("infra", 2000, 2000, 1.0), ("ml", 4000, 8000, 2.0)]);
        let j = &s.jobs[0];
        assert_eq!(
            (j.spec.team.as_str(), j.spec.project.as_str(), j.spec.class),
            ("ml", "ns", partita_engine::workload::Class::Production)
        );
        assert_eq!(s.job_queue.get("pod:ns/p").map(String::as_str), Some("ml"));
        assert_eq!(j.phase, Phase::Pending);
        assert_eq!(j.placed, vec![None]);
        // Submitted: when the pod was created, on the engine's clock.
        assert!(
            j.submitted > 1_767_225_600 * 1_000_000_000,
            "{}",
            j.submitted
        );
    }

    // TestSnapshotHeldJobStillCountsItsBoundPods.
    #[test]
    fn held_job_still_counts_its_bound_pods() {
        let pods = vec![
            pod("w0")
                .gpus(2)
                .group("g")
                .on("a", &[(ANNOTATION_GPUS, "0,1")])
                .obj(),
            pod("w1").group("g").ann(ANNOTATION_GPU_MEMORY, "bad").obj(),
        ];
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods,
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        assert_eq!(s.held.len(), 1, "held {:?}", s.held);
        assert_eq!(s.jobs.len(), 1, "want the bound pod given as a running job");
        assert_eq!(s.jobs[0].spec.tasks.len(), 1);
        assert_eq!(s.jobs[0].phase, Phase::Running);
        // Both pods are the job's, for the scheduler's events.
        assert_eq!(s.job_pods["group:ns/g"].len(), 2);
    }

    // TestSnapshotPhases.
    #[test]
    fn snapshot_phases() {
        let running = pod("r").gpus(1).on("a", &[(ANNOTATION_GPUS, "0")]).obj();
        let deleting = pod("d")
            .gpus(1)
            .on("a", &[(ANNOTATION_GPUS, "1")])
            .deleting()
            .obj();
        let evicted = pod("e").gpus(1).on("a", &[(ANNOTATION_GPUS, "2")]).obj();
        let assumed = pod("b").gpus(1).obj();
        let opt = SnapshotOptions {
            evicting: BTreeSet::from(["uid-e".to_string()]),
            bound: HashMap::from([(
                "uid-b".to_string(),
                Assumed {
                    node: "a".to_string(),
                    annotations: BTreeMap::from([(ANNOTATION_GPUS.to_string(), "3".to_string())]),
                },
            )]),
            ..SnapshotOptions::default()
        };
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods: vec![running, deleting, evicted, assumed],
            ..Objects::default()
        };
        let s = must_snapshot(obj, opt);
        let want = HashMap::from([
            ("pod:ns/r", Phase::Running),
            ("pod:ns/d", Phase::Terminating),
            ("pod:ns/e", Phase::Terminating),
            ("pod:ns/b", Phase::Running),
        ]);
        assert_eq!(s.jobs.len(), 4);
        for j in &s.jobs {
            assert_eq!(Some(&j.phase), want.get(j.id()), "{}", j.id());
        }
        assert_eq!(
            s.state.node_by_name("a").unwrap().fully_free_gpus(),
            4,
            "the assumed bind holds GPU 3"
        );
    }

    // An assignment unchanged since the last snapshot is handed over as
    // the same Arc; a changed one is not.
    #[test]
    fn unchanged_assignments_keep_their_arc() {
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods: vec![
                pod("r").gpus(1).on("a", &[(ANNOTATION_GPUS, "0")]).obj(),
                pod("q").gpus(1).on("a", &[(ANNOTATION_GPUS, "1")]).obj(),
            ],
            ..Objects::default()
        };
        let first = must_snapshot(obj.clone(), SnapshotOptions::default());
        let mut placed = first.placed.clone();
        // Pretend q held another GPU last time.
        let mut moved = (*placed["uid-q"]).clone();
        moved.grants[0].gpu = 5;
        placed.insert("uid-q".to_string(), Arc::new(moved));
        let opt = SnapshotOptions {
            placed: placed.clone(),
            ..SnapshotOptions::default()
        };
        let second = must_snapshot(obj, opt);
        let job = |id: &str| second.jobs.iter().find(|j| j.id() == id).unwrap();
        let r = job("pod:ns/r").placed[0].as_ref().unwrap();
        assert!(
            Arc::ptr_eq(r, &placed["uid-r"]),
            "r's assignment is a new Arc"
        );
        let q = job("pod:ns/q").placed[0].as_ref().unwrap();
        assert!(!Arc::ptr_eq(q, &placed["uid-q"]));
        assert_eq!(q.grants[0].gpu, 1);
        assert!(Arc::ptr_eq(&second.placed["uid-q"], q));
    }

    // TestFreezeBusyHidesWhatTheMIGManagerWouldDisturb.
    #[test]
    fn freeze_busy_hides_what_the_mig_manager_would_disturb() {
        let obj = Objects {
            nodes: vec![
                gpu_node("busy", 2)
                    .mig(2, &[("3g.40gb", 1), ("1g.10gb", 3)])
                    .obj(),
                gpu_node("idle", 1).mig(1, &[("1g.10gb", 2)]).obj(),
            ],
            pods: vec![
                pod("serve")
                    .mig_profile("3g.40gb")
                    .on("busy", &[(ANNOTATION_MIG_SLICE, "0:3g.40gb@4")])
                    .obj(),
                pod("want").mig_profile("1g.10gb").obj(),
            ],
            ..Objects::default()
        };
        let opt = SnapshotOptions {
            freeze_busy: true,
            ..SnapshotOptions::default()
        };
        let s = must_snapshot(obj, opt);
        let busy = s.state.node_by_name("busy").unwrap();
        let mut free_1g = 0;
        for (k, g) in busy.gpus().iter().enumerate() {
            assert_eq!(
                g.free_memory_slices() & 0x7f,
                0,
                "busy GPU {k} keeps free memory slices {:08b} the engine could carve",
                g.free_memory_slices()
            );
            for sl in g.slices() {
                if !sl.is_free() {
                    continue;
                }
                assert_eq!(
                    sl.profile(),
                    "1g.10gb",
                    "busy GPU {k}: free {} instance nobody asks for is not held",
                    sl.placement()
                );
                free_1g += 1;
            }
        }
        assert_eq!(
            free_1g, 3,
            "free 1g.10gb instances on the busy node: want the 3 a pending pod may use"
        );
        for sl in s.state.node_by_name("idle").unwrap().gpus()[0].slices() {
            assert!(sl.is_free(), "idle node holds {:?}", sl.task());
        }
        // The holds are no job's and say so.
        for a in busy.tasks() {
            assert!(a.task == "ns/serve" || is_hold(&a.task), "{}", a.task);
        }
        assert!(s.jobs.iter().all(|j| !is_hold(j.id())));
    }

    // An idle whole MIG-capable GPU of a busy node is held unless a
    // pending pod asks for whole GPUs.
    #[test]
    fn freeze_busy_holds_idle_whole_gpus_nobody_wants() {
        let nodes = vec![gpu_node("busy", 2).obj()];
        let serving = pod("serve")
            .gpus(1)
            .on("busy", &[(ANNOTATION_GPUS, "0")])
            .obj();
        let opt = SnapshotOptions {
            freeze_busy: true,
            ..SnapshotOptions::default()
        };
        let obj = Objects {
            nodes: nodes.clone(),
            pods: vec![serving.clone(), pod("mig").mig_profile("1g.10gb").obj()],
            ..Objects::default()
        };
        let s = must_snapshot(obj, opt.clone());
        let n = s.state.node_by_name("busy").unwrap();
        assert_eq!(n.fully_free_gpus(), 0);
        assert!(is_hold(n.gpus()[1].holders()[0].task()));
        let obj = Objects {
            nodes,
            pods: vec![serving, pod("whole").gpus(1).obj()],
            ..Objects::default()
        };
        let s = must_snapshot(obj, opt);
        assert_eq!(s.state.node_by_name("busy").unwrap().fully_free_gpus(), 1);
    }

    // Unschedulable nodes keep their pods, take no GPU work, and carry
    // the label the scheduler's node filter reads.
    #[test]
    fn unschedulable_nodes_are_cordoned_and_labelled() {
        let obj = Objects {
            nodes: vec![
                gpu_node("c", 2).cordoned().obj(),
                gpu_node("t", 2).taint("x").obj(),
            ],
            pods: vec![pod("r").gpus(1).on("c", &[(ANNOTATION_GPUS, "1")]).obj()],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        for name in ["c", "t"] {
            let n = s.state.node_by_name(name).unwrap();
            assert!(n.gpus().iter().all(|g| g.cordoned()), "{name}");
            assert_eq!(
                n.labels().get(LABEL_UNSCHEDULABLE).map(String::as_str),
                Some("true")
            );
            assert!(s.views[name].unschedulable);
        }
        assert_eq!(s.state.node_by_name("c").unwrap().gpus()[1].used(), 1000);
    }

    // A job held for a MIG change on its node waits outside the engine.
    #[test]
    fn a_job_waits_for_its_mig_change() {
        let obj = Objects {
            nodes: vec![
                gpu_node("m", 1)
                    .mig(1, &[])
                    .label("nvidia.com/mig.config", "all-1g.10gb")
                    .label("nvidia.com/mig.config.state", "pending")
                    .obj(),
            ],
            pods: vec![pod("p").mig_profile("1g.10gb").obj()],
            ..Objects::default()
        };
        let opt = SnapshotOptions {
            hold: HashMap::from([("pod:ns/p".to_string(), "m".to_string())]),
            ..SnapshotOptions::default()
        };
        let s = must_snapshot(obj, opt);
        assert_eq!(
            s.held.get("pod:ns/p").map(String::as_str),
            Some(
                "waiting for a MIG reconfiguration: the MIG change on node m made for it \
                 (MIG config all-1g.10gb is pending)"
            )
        );
        assert!(s.jobs.is_empty());
    }

    // The engine's clock is nanoseconds since the Unix epoch.
    #[test]
    fn engine_time_is_nanoseconds_since_the_epoch() {
        assert_eq!(engine_time(jiff::Timestamp::UNIX_EPOCH), 0);
        let t = jiff::Timestamp::from_second(1_767_225_600).unwrap();
        assert_eq!(engine_time(t), 1_767_225_600 * 1_000_000_000);
        assert_eq!(engine_time(jiff::Timestamp::MAX), Nanos::MAX);
    }

    // TestEngineOnSnapshot: the engine's cycle on a snapshot puts a gang
    // on one node with disjoint devices, never on a cordoned node.
    #[test]
    fn engine_on_snapshot() {
        let pods = vec![
            pod("w0")
                .gpus(4)
                .group("g")
                .ann(ANNOTATION_MIN_MEMBER, "2")
                .obj(),
            pod("w1")
                .gpus(4)
                .group("g")
                .ann(ANNOTATION_MIN_MEMBER, "2")
                .obj(),
            pod("blocker")
                .gpus(2)
                .on("b", &[(ANNOTATION_GPUS, "0,1")])
                .obj(),
        ];
        let obj = Objects {
            nodes: vec![
                gpu_node("a", 8).obj(),
                gpu_node("b", 8).obj(),
                gpu_node("c", 8).cordoned().obj(),
            ],
            pods,
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        let (cfg, policy) = sched::build("partita", &s.state, &[]).unwrap();
        let mut eng = Scheduler::new(cfg, policy, Rand::new(1));
        let jobs: Vec<&Job> = s.jobs.iter().collect();
        let mut input = Input::new(0, &s.state, &s.teams, &jobs);
        let d = eng.cycle(&mut input);
        assert_eq!(
            d.starts.len(),
            2,
            "starts {:?} waiting {:?}",
            d.starts,
            d.waiting
        );
        let mut seen = BTreeSet::new();
        for st in &d.starts {
            assert_ne!(st.assignment.node, "c", "placed on a cordoned node");
            for g in &st.assignment.grants {
                assert!(
                    seen.insert((st.assignment.node.clone(), g.gpu)),
                    "GPU {}/{} granted twice",
                    st.assignment.node,
                    g.gpu
                );
            }
        }
    }

    // The GPU product selector limits a pending pod's models.
    #[test]
    fn the_product_selector_limits_the_model() {
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods: vec![
                pod("p")
                    .gpus(1)
                    .node_selector(LABEL_GPU_PRODUCT, "NVIDIA-A100-SXM4-80GB")
                    .obj(),
            ],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        let why = &s.held["pod:ns/p"];
        assert!(
            why.contains(r#"gpu model "A100-80GB": no node has it"#),
            "{why}"
        );
    }
}
