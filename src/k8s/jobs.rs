//! Pods into the engine's jobs (port of go/internal/kube/jobs.go).
//!
//! A job is one pod, or the pods of a gang: those sharing the label
//! partita.dev/pod-group (or scheduling.x-k8s.io/pod-group) in one
//! namespace. The gang size is its PodGroup's minMember, else the pods'
//! partita.dev/min-member annotation, else 1 (no gang). A job's team is
//! its Queue; a Queue is the engine's team.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff;
use partita_engine::cluster::Assignment;
use partita_engine::placement::capacity_of;
use partita_engine::quote::quote;
use partita_engine::sched::{INVALID_SPEC, Job, Nanos, Phase, Team, WaitReason};
use partita_engine::workload::{self, Capacity, Class, Task};

use super::names::{
    ANNOTATION_ESTIMATED_RUNTIME, ANNOTATION_LAST_CHECKPOINT, ANNOTATION_MIN_MEMBER, DEFAULT_QUEUE,
    LABEL_COSCHEDULING_POD_GROUP, LABEL_POD_GROUP, LABEL_QUEUE,
};
use super::pod::{
    PodError, annotations_of, check_constraints, class_of, duration_annotation, labels_of, name_of,
    namespace_of, pod_requests, task_name, task_of, uid_of,
};
use super::resources::{PodGroup, Queue};
use super::snapshot::{
    Objects, PHASE_FAILED, PHASE_SUCCEEDED, Snapshot, SnapshotOptions, engine_time, phase,
};

/// A job in the making: its unfinished pods and what they ask.
pub(crate) struct Group {
    /// The engine's job ID (`job_id`).
    pub(crate) id: String,
    pub(crate) namespace: String,
    /// The pod group's name; "" for a lone pod.
    pub(crate) name: String,
    pub(crate) members: Vec<Member>,
    /// Members that finished successfully (they count toward the gang).
    pub(crate) succeeded: i64,
}

/// One unfinished pod of a group.
#[derive(Clone)]
pub(crate) struct Member {
    pub(crate) pod: Arc<Pod>,
    /// The node the pod is bound to; None while pending.
    pub(crate) bound: Option<String>,
    pub(crate) task: Task,
    /// Why a pending pod cannot be scheduled as it is.
    pub(crate) task_err: Option<PodError>,
}

/// The pod's gang name, or "".
pub fn group_name(p: &Pod) -> &str {
    let labels = labels_of(p);
    match labels.get(LABEL_POD_GROUP) {
        Some(g) if !g.is_empty() => g,
        _ => labels
            .get(LABEL_COSCHEDULING_POD_GROUP)
            .map_or("", String::as_str),
    }
}

/// The engine's ID for the job a pod belongs to: "group:<ns>/<group>" for
/// a gang's pods, "pod:<ns>/<name>" for a lone pod.
pub fn job_id(p: &Pod) -> String {
    match group_name(p) {
        "" => format!("pod:{}/{}", namespace_of(p), name_of(p)),
        g => format!("group:{}/{g}", namespace_of(p)),
    }
}

/// Gathers the pods of the scheduler named `scheduler_name` into jobs, in
/// ID order, each job's members in name order. `bound` gives the node of
/// each bound pod by UID.
pub(crate) fn group_pods(
    pods: &[Arc<Pod>],
    scheduler_name: &str,
    bound: &HashMap<String, String>,
) -> Vec<Group> {
    let mut by_id: BTreeMap<String, Group> = BTreeMap::new();
    for p in pods {
        let scheduler = p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
        if scheduler.unwrap_or("") != scheduler_name {
            continue;
        }
        let id = job_id(p);
        let g = by_id.entry(id.clone()).or_insert_with(|| Group {
            id,
            namespace: namespace_of(p).to_string(),
            name: group_name(p).to_string(),
            members: Vec::new(),
            succeeded: 0,
        });
        match phase(p) {
            PHASE_SUCCEEDED => {
                g.succeeded += 1;
                continue;
            }
            PHASE_FAILED => continue,
            _ => {}
        }
        let bound = bound.get(uid_of(p)).cloned();
        if bound.is_none() && p.metadata.deletion_timestamp.is_some() {
            continue; // deleted before it ran
        }
        let (task, task_err) = match task_of(p) {
            Ok(t) => {
                // Node constraints matter only to a pod still to place.
                let err = if bound.is_none() {
                    check_constraints(p).err()
                } else {
                    None
                };
                (t, err)
            }
            // A bound pod counts with what it holds, readable or not.
            Err(_) if bound.is_some() => {
                let (cpu_milli, memory_mib) = pod_requests(p);
                let t = Task {
                    name: task_name(p),
                    cpu_milli,
                    memory_mib,
                    ..Task::default()
                };
                (t, None)
            }
            Err(e) => (Task::default(), Some(e)),
        };
        g.members.push(Member {
            pod: p.clone(),
            bound,
            task,
            task_err,
        });
    }
    let mut out: Vec<Group> = by_id
        .into_values()
        .filter(|g| !g.members.is_empty())
        .collect();
    for g in &mut out {
        g.members
            .sort_by(|a, b| name_of(&a.pod).cmp(name_of(&b.pod)));
    }
    out
}

impl Group {
    /// The members not bound yet.
    pub(crate) fn pending(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| m.bound.is_none())
    }

    fn has_pending(&self) -> bool {
        self.pending().next().is_some()
    }

    /// The group without its pending pods, or None when none is bound.
    fn bound_part(&self) -> Option<Group> {
        let members: Vec<Member> = self
            .members
            .iter()
            .filter(|m| m.bound.is_some())
            .cloned()
            .collect();
        if members.is_empty() {
            return None;
        }
        Some(Group {
            id: self.id.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            members,
            succeeded: self.succeeded,
        })
    }
}

/// Turns groups into the snapshot's engine jobs; groups that cannot be
/// given to the engine go to `held` with the reason.
pub(crate) fn build_jobs(
    s: &mut Snapshot,
    groups: Vec<Group>,
    obj: &Objects,
    opt: &SnapshotOptions,
) {
    let mut queues: HashMap<&str, &Queue> = HashMap::new();
    for q in &obj.queues {
        if validate_queue(q).is_ok() {
            queues.insert(q.metadata.name.as_deref().unwrap_or(""), &**q);
            s.teams.push(team_of(q));
        }
    }
    s.teams.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pod_groups: HashMap<String, &PodGroup> = HashMap::new();
    for pg in &obj.pod_groups {
        let ns = pg.metadata.namespace.as_deref().unwrap_or("");
        let name = pg.metadata.name.as_deref().unwrap_or("");
        pod_groups.insert(format!("{ns}/{name}"), &**pg);
    }
    // What the cluster could ever offer one task (as the engine's own
    // validation uses it), so that jobs that can never run are held back
    // with the reason rather than cached by the engine as invalid
    // forever: a Kubernetes cluster grows.
    let capacity = capacity_of(&s.state);
    let ctx = Context {
        queues: &queues,
        capacity: &capacity,
        opt,
    };
    for g in groups {
        let pg = pod_groups
            .get(&format!("{}/{}", g.namespace, g.name))
            .copied();
        let mut job = job_of(s, &g, pg, &ctx);
        if job.is_ok()
            && g.has_pending()
            && let Some(node) = opt.hold.get(&g.id)
            && let Some(v) = s.views.get(node)
            && v.mig_changing
        {
            job = Err(format!(
                "{}: the MIG change on node {node} made for it ({})",
                WaitReason::Reconfig.as_str(),
                v.reason
            ));
        }
        s.job_pods.insert(
            g.id.clone(),
            g.members.iter().map(|m| m.pod.clone()).collect(),
        );
        let job = match job {
            Ok(j) => j,
            Err(why) => {
                s.held.insert(g.id.clone(), why);
                // What its bound pods hold still counts (quota, fairness,
                // preemption): the engine gets the bound part alone.
                let Some(bound) = g.bound_part() else {
                    continue;
                };
                match job_of(s, &bound, pg, &ctx) {
                    Ok(j) => j,
                    Err(_) => continue,
                }
            }
        };
        s.job_queue.insert(g.id.clone(), job.spec.team.clone());
        s.jobs.push(job);
    }
}

/// What `job_of` reads besides the group.
struct Context<'a> {
    queues: &'a HashMap<&'a str, &'a Queue>,
    capacity: &'a Capacity,
    opt: &'a SnapshotOptions,
}

/// A queue as the engine's team: quantities in GPU milli; a weight that is
/// not above 0 is 1.
pub fn team_of(q: &Queue) -> Team {
    let w = q.spec.weight.unwrap_or(0.0);
    let guarantee = q.spec.guaranteed_gpus;
    let burst = q.spec.burst_gpus.unwrap_or(0).max(guarantee);
    Team {
        name: q.metadata.name.clone().unwrap_or_default(),
        guarantee: guarantee.saturating_mul(1000),
        burst: burst.saturating_mul(1000),
        // `>` is false for NaN too.
        weight: if w > 0.0 { w } else { 1.0 },
    }
}

/// What the CRD schema checks of a Queue (Go's Queue.Validate): an object
/// that slipped past it (an older CRD) is not a team.
pub fn validate_queue(q: &Queue) -> Result<(), String> {
    let name = q.metadata.name.as_deref().unwrap_or("");
    let s = &q.spec;
    let burst = s.burst_gpus.unwrap_or(0);
    let weight = s.weight.unwrap_or(0.0);
    if s.guaranteed_gpus < 0 {
        return Err(format!(
            "queue {name}: spec.guaranteedGPUs {} is negative",
            s.guaranteed_gpus
        ));
    }
    if burst < 0 {
        return Err(format!("queue {name}: spec.burstGPUs {burst} is negative"));
    }
    if burst != 0 && burst < s.guaranteed_gpus {
        return Err(format!(
            "queue {name}: spec.burstGPUs {burst} is below spec.guaranteedGPUs {}",
            s.guaranteed_gpus
        ));
    }
    if weight < 0.0 {
        return Err(format!("queue {name}: spec.weight {weight} is negative"));
    }
    Ok(())
}

/// What the CRD schema checks of a PodGroup (Go's PodGroup.Validate).
pub fn validate_pod_group(pg: &PodGroup) -> Result<(), String> {
    if pg.spec.min_member < 1 {
        return Err(format!(
            "podgroup {}/{}: spec.minMember {} must be at least 1",
            pg.metadata.namespace.as_deref().unwrap_or(""),
            pg.metadata.name.as_deref().unwrap_or(""),
            pg.spec.min_member
        ));
    }
    Ok(())
}

/// Builds a group's job, or says why its pending pods wait outside the
/// engine.
fn job_of(
    s: &mut Snapshot,
    g: &Group,
    pg: Option<&PodGroup>,
    ctx: &Context<'_>,
) -> Result<Job, String> {
    let pending = g.pending().count();
    for m in g.pending() {
        if let Some(e) = &m.task_err {
            return Err(format!("pod {}: {e}", name_of(&m.pod)));
        }
    }
    let min_member = match min_member(g, pg) {
        Ok(n) => n,
        Err(e) if pending > 0 => return Err(e),
        Err(_) => 0,
    };
    let exist = g.members.len() as i64 + g.succeeded;
    if pending > 0 && exist < min_member {
        return Err(format!("gang: {exist} of {min_member} pods exist"));
    }
    let (queue, why) = queue_of(g, pg, ctx.queues);
    if let Some(why) = why
        && pending > 0
    {
        return Err(why);
    }
    let gang = (min_member - g.succeeded).clamp(0, g.members.len() as i64);
    let mut spec = workload::Job {
        id: g.id.clone(),
        team: queue,
        project: g.namespace.clone(),
        class: Class::BestEffort,
        tasks: Vec::with_capacity(g.members.len()),
        gang_size: i32::try_from(gang).unwrap_or(i32::MAX),
    };
    let mut submitted: Nanos = 0;
    let mut estimate: Nanos = 0;
    let mut placed = Vec::with_capacity(g.members.len());
    let mut started: Option<Nanos> = None;
    let mut checkpoint: Option<Nanos> = None;
    for m in &g.members {
        spec.class = spec.class.max(class_of(&m.pod));
        spec.tasks.push(m.task.clone());
        let created = m
            .pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| engine_time(t.0));
        if submitted == 0 || created < submitted {
            submitted = created;
        }
        let ann = annotations_of(&m.pod);
        if let Ok(est) = duration_annotation(ann, ANNOTATION_ESTIMATED_RUNTIME) {
            estimate = estimate.max(est);
        }
        let Some(node) = &m.bound else {
            placed.push(None);
            continue;
        };
        placed.push(Some(placed_of(s, m, node, &ctx.opt.placed)));
        if let Some(t) = start_time(&m.pod)
            && started.is_none_or(|st| t < st)
        {
            started = Some(t);
        }
        let saved = ann
            .get(ANNOTATION_LAST_CHECKPOINT)
            .and_then(|text| text.parse::<jiff::Timestamp>().ok());
        if let Some(t) = saved.map(engine_time)
            && checkpoint.is_none_or(|c| t > c)
        {
            checkpoint = Some(t);
        }
    }
    if pending > 0 {
        spec.validate(Some(ctx.capacity))
            .map_err(|e| format!("{INVALID_SPEC}: {e}"))?;
    }
    let mut j = Job::new(spec, submitted);
    j.placed = placed;
    j.estimate = estimate;
    if let Some(st) = started {
        j.started = st;
        j.checkpoint = checkpoint.filter(|&c| c > st).unwrap_or(st);
    }
    j.phase = phase_of(g, ctx.opt);
    Ok(j)
}

/// What a bound member holds in the snapshot: the last snapshot's Arc when
/// nothing changed (the engine's caches key on it). Its node may be gone
/// or it could not be accounted: then it holds nothing, but it is not
/// pending either.
fn placed_of(
    s: &mut Snapshot,
    m: &Member,
    node: &str,
    prev: &HashMap<String, Arc<Assignment>>,
) -> Arc<Assignment> {
    let task = task_name(&m.pod);
    let held = s
        .state
        .node_by_name(node)
        .and_then(|n| n.tasks().iter().find(|a| a.task == task).cloned());
    let a = held.unwrap_or_else(|| {
        Arc::new(Assignment {
            task,
            node: node.to_string(),
            ..Assignment::default()
        })
    });
    let uid = uid_of(&m.pod).to_string();
    let a = match prev.get(&uid) {
        Some(p) if **p == *a => p.clone(),
        _ => a,
    };
    s.placed.insert(uid, a.clone());
    a
}

/// Terminating once any bound member is being deleted (evicted), Running
/// when every member is bound, Pending otherwise.
fn phase_of(g: &Group, opt: &SnapshotOptions) -> Phase {
    let mut all = true;
    for m in &g.members {
        if m.bound.is_none() {
            all = false;
            continue;
        }
        if m.pod.metadata.deletion_timestamp.is_some() || opt.evicting.contains(uid_of(&m.pod)) {
            return Phase::Terminating;
        }
    }
    if all { Phase::Running } else { Phase::Pending }
}

/// The gang size: the PodGroup's, else the largest
/// partita.dev/min-member annotation of the group's pods, else 1.
fn min_member(g: &Group, pg: Option<&PodGroup>) -> Result<i64, String> {
    if g.name.is_empty() {
        return Ok(1);
    }
    if let Some(pg) = pg {
        validate_pod_group(pg)?;
        return Ok(i64::from(pg.spec.min_member));
    }
    let mut most = 1;
    for m in &g.members {
        let Some(text) = annotations_of(&m.pod).get(ANNOTATION_MIN_MEMBER) else {
            continue;
        };
        match text.trim().parse::<i64>() {
            Ok(n) if n >= 1 => most = most.max(n),
            _ => {
                return Err(format!(
                    "pod {}: annotation {ANNOTATION_MIN_MEMBER}={}: want a whole number of pods, at least 1",
                    name_of(&m.pod),
                    quote(text)
                ));
            }
        }
    }
    Ok(most)
}

/// The group's queue: the pods' partita.dev/queue label, else the
/// PodGroup's, else `DEFAULT_QUEUE`; and why its pending pods may not use
/// it: a named queue must exist, and pending pods must use a priority
/// class it allows.
fn queue_of(
    g: &Group,
    pg: Option<&PodGroup>,
    queues: &HashMap<&str, &Queue>,
) -> (String, Option<String>) {
    let mut name = "";
    for m in &g.members {
        let q = labels_of(&m.pod)
            .get(LABEL_QUEUE)
            .map_or("", String::as_str);
        if q.is_empty() {
            continue;
        }
        if !name.is_empty() && q != name {
            return (
                String::new(),
                Some(format!("the group's pods name two queues, {name} and {q}")),
            );
        }
        name = q;
    }
    if name.is_empty()
        && let Some(q) = pg.and_then(|pg| pg.spec.queue.as_deref())
    {
        name = q;
    }
    if name.is_empty() {
        name = DEFAULT_QUEUE;
    }
    let Some(q) = queues.get(name) else {
        if name == DEFAULT_QUEUE {
            return (name.to_string(), None); // no Queue object: no quota
        }
        return (
            name.to_string(),
            Some(format!(
                "queue {} does not exist (or is invalid)",
                quote(name)
            )),
        );
    };
    let allowed = &q.spec.allowed_priority_classes;
    if !allowed.is_empty() {
        for m in g.pending() {
            let pc = m
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref())
                .unwrap_or("");
            if !allowed.iter().any(|a| a == pc) {
                return (
                    name.to_string(),
                    Some(format!(
                        "pod {}: priority class {} is not allowed in queue {name} (allowed: {})",
                        name_of(&m.pod),
                        quote(pc),
                        allowed.join(", ")
                    )),
                );
            }
        }
    }
    (name.to_string(), None)
}

/// When a bound pod started, on the engine's clock: its status start
/// time, else when it was bound (its PodScheduled condition), else when it
/// was created; None when the pod says none of these.
pub fn start_time(p: &Pod) -> Option<Nanos> {
    let status = p.status.as_ref();
    if let Some(t) = status.and_then(|s| s.start_time.as_ref()) {
        return Some(engine_time(t.0));
    }
    for c in status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
    {
        if c.type_ == "PodScheduled"
            && c.status == "True"
            && let Some(t) = &c.last_transition_time
        {
            return Some(engine_time(t.0));
        }
    }
    p.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| engine_time(t.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::fixtures::{gpu_node, must_snapshot, pod, pod_group, queue};
    use crate::k8s::names::{ANNOTATION_GPU_MEMORY, ANNOTATION_GPUS};
    use crate::k8s::resources::QueueSpec;
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ids(jobs: &[Job]) -> Vec<&str> {
        jobs.iter().map(Job::id).collect()
    }

    #[test]
    fn group_names_and_job_ids() {
        let p = pod("p").obj();
        assert_eq!((group_name(&p), job_id(&p).as_str()), ("", "pod:ns/p"));
        let p = pod("p").group("g").obj();
        assert_eq!((group_name(&p), job_id(&p).as_str()), ("g", "group:ns/g"));
        let p = pod("p").label(LABEL_COSCHEDULING_POD_GROUP, "c").obj();
        assert_eq!(job_id(&p), "group:ns/c");
        // Partita's label wins; an empty one does not count.
        let p = pod("p")
            .group("g")
            .label(LABEL_COSCHEDULING_POD_GROUP, "c")
            .obj();
        assert_eq!(group_name(&p), "g");
        let p = pod("p")
            .group("")
            .label(LABEL_COSCHEDULING_POD_GROUP, "c")
            .obj();
        assert_eq!(group_name(&p), "c");
    }

    // TestAPodGroupMissingFromTheCacheIsAskedFor, its snapshot: a gang
    // sized by its PodGroup is one job of that size; a group without
    // PodGroup nor annotation is a gang of one; one sized by annotation
    // waits for its pods. (Asking the API server for a PodGroup missing
    // from the cache is the scheduler's.)
    #[test]
    fn pod_groups_size_gangs() {
        let obj = Objects {
            nodes: vec![gpu_node("n1", 4).obj(), gpu_node("n2", 4).obj()],
            pods: vec![
                pod("big-0").gpus(4).group("big").obj(),
                pod("big-1").gpus(4).group("big").obj(),
                pod("solo-0").gpus(1).group("solo").obj(),
                pod("ann-0")
                    .gpus(1)
                    .group("ann")
                    .ann(ANNOTATION_MIN_MEMBER, "2")
                    .obj(),
                pod("plain").gpus(1).obj(),
            ],
            pod_groups: vec![pod_group("big", 2, "")],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        assert_eq!(
            ids(&s.jobs),
            ["group:ns/big", "group:ns/solo", "pod:ns/plain"]
        );
        let gangs: Vec<i32> = s.jobs.iter().map(|j| j.spec.gang_size).collect();
        assert_eq!(gangs, [2, 1, 1]);
        assert_eq!(
            s.held.get("group:ns/ann").map(String::as_str),
            Some("gang: 1 of 2 pods exist")
        );
        // The gang's tasks are its pods in name order.
        let tasks: Vec<&str> = s.jobs[0]
            .spec
            .tasks
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(tasks, ["ns/big-0", "ns/big-1"]);
        let pods: Vec<&str> = s.job_pods["group:ns/big"]
            .iter()
            .map(|p| name_of(p))
            .collect();
        assert_eq!(pods, ["big-0", "big-1"]);
    }

    /// A case of `held_reasons`: its name, the pods and PodGroups, the
    /// reason the group is held.
    type HeldCase = (
        &'static str,
        Vec<Arc<Pod>>,
        Vec<Arc<PodGroup>>,
        &'static str,
    );

    // Why a group waits outside the engine, in the Go build's words.
    #[test]
    fn held_reasons() {
        let cases: Vec<HeldCase> = vec![
            (
                "a bad min-member annotation",
                vec![
                    pod("w0")
                        .gpus(1)
                        .group("g")
                        .ann(ANNOTATION_MIN_MEMBER, "two")
                        .obj(),
                ],
                vec![],
                r#"pod w0: annotation partita.dev/min-member="two": want a whole number of pods, at least 1"#,
            ),
            (
                "an invalid PodGroup",
                vec![pod("w0").gpus(1).group("g").obj()],
                vec![pod_group("g", 0, "")],
                "podgroup ns/g: spec.minMember 0 must be at least 1",
            ),
            (
                "two queues",
                vec![
                    pod("w0").gpus(1).group("g").queue("a").obj(),
                    pod("w1").gpus(1).group("g").queue("b").obj(),
                ],
                vec![],
                "the group's pods name two queues, a and b",
            ),
            (
                "the PodGroup's queue",
                vec![pod("w0").gpus(1).group("g").obj()],
                vec![pod_group("g", 1, "nope")],
                r#"queue "nope" does not exist (or is invalid)"#,
            ),
            (
                "a pod's error",
                vec![pod("w0").group("g").ann(ANNOTATION_GPU_MEMORY, "-1").obj()],
                vec![],
                r#"pod w0: annotation partita.dev/gpu-memory="-1": must be positive"#,
            ),
            (
                "more GPUs than any node",
                vec![pod("p").gpus(9).obj()],
                vec![],
                "invalid: can never run on this cluster: job pod:ns/p: task ns/p: asks for 9 GPUs but the largest node has 8 (H100-80GB)",
            ),
        ];
        for (name, pods, pod_groups, want) in cases {
            let obj = Objects {
                nodes: vec![gpu_node("a", 8).obj()],
                pods,
                pod_groups,
                ..Objects::default()
            };
            let s = must_snapshot(obj, SnapshotOptions::default());
            let held: Vec<&str> = s.held.values().map(String::as_str).collect();
            assert_eq!(held, [want], "{name}");
            assert!(s.jobs.is_empty(), "{name}");
        }
    }

    // A running job's start, checkpoint and estimate come from its pods.
    #[test]
    fn start_checkpoint_and_estimate() {
        let at = |s: i64| Time(jiff::Timestamp::from_second(s).unwrap());
        let mut started = pod("w0")
            .gpus(1)
            .group("g")
            .on("a", &[(ANNOTATION_GPUS, "0")])
            .ann(ANNOTATION_LAST_CHECKPOINT, "2026-01-02T00:00:00Z")
            .ann(ANNOTATION_ESTIMATED_RUNTIME, "2h")
            .pod();
        started.status.as_mut().unwrap().start_time = Some(at(1_767_300_000));
        let mut scheduled = pod("w1")
            .gpus(1)
            .group("g")
            .on("a", &[(ANNOTATION_GPUS, "1")])
            .ann(ANNOTATION_ESTIMATED_RUNTIME, "bad")
            .pod();
        scheduled.status.as_mut().unwrap().conditions = Some(vec![PodCondition {
            type_: "PodScheduled".to_string(),
            status: "True".to_string(),
            last_transition_time: Some(at(1_767_250_000)),
            ..PodCondition::default()
        }]);
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods: vec![Arc::new(started), Arc::new(scheduled)],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        let j = &s.jobs[0];
        let sec = 1_000_000_000;
        assert_eq!(j.phase, Phase::Running);
        assert_eq!(j.started, 1_767_250_000 * sec, "the earlier of the two");
        assert_eq!(
            j.checkpoint,
            1_767_312_000 * sec,
            "the checkpoint annotation"
        );
        assert_eq!(j.estimate, 2 * 3600 * sec);
        assert!(j.submitted > 1_767_225_600 * sec);
        assert!(j.complete());
    }

    // A pending pod being deleted is no job; a bound one is terminating.
    #[test]
    fn deleted_pending_pods_are_dropped() {
        let obj = Objects {
            nodes: vec![gpu_node("a", 8).obj()],
            pods: vec![pod("gone").gpus(1).deleting().obj()],
            ..Objects::default()
        };
        let s = must_snapshot(obj, SnapshotOptions::default());
        assert!(s.jobs.is_empty() && s.held.is_empty() && s.job_pods.is_empty());
    }

    #[test]
    fn queue_validation_is_the_crds() {
        let spec = |g, b, w| QueueSpec {
            team: "t".to_string(),
            guaranteed_gpus: g,
            burst_gpus: b,
            weight: w,
            allowed_priority_classes: vec![],
        };
        for (s, want) in [
            (spec(2, None, None), Ok(())),
            (spec(2, Some(0), Some(1.5)), Ok(())),
            (
                spec(-1, None, None),
                Err("queue q: spec.guaranteedGPUs -1 is negative"),
            ),
            (
                spec(0, Some(-2), None),
                Err("queue q: spec.burstGPUs -2 is negative"),
            ),
            (
                spec(4, Some(2), None),
                Err("queue q: spec.burstGPUs 2 is below spec.guaranteedGPUs 4"),
            ),
            (
                spec(1, None, Some(-0.5)),
                Err("queue q: spec.weight -0.5 is negative"),
            ),
        ] {
            assert_eq!(validate_queue(&queue("q", s)), want.map_err(str::to_string));
        }
        let t = team_of(&queue("q", spec(2, None, Some(f64::NAN))));
        assert_eq!((t.guarantee, t.burst, t.weight), (2000, 2000, 1.0));
    }
}
