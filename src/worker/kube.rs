//! The worker's world on a Kubernetes cluster (`--cluster kubernetes`,
//! issue 48 item 3): the jobs stored in PostgreSQL become pods
//! (`k8s::workloads`) that Partita's scheduler places like any other, and
//! what the pods do flows back into the same rows, events and ledger as on
//! the virtual cluster. The engine does not run here: the scheduler
//! (`partita kube`) is the one engine that places everything on the
//! cluster, whichever way the work arrived.
//!
//! This is the pure part: given the jobs and what the cluster shows of
//! their pods, it says what to create or delete and what changed. The
//! loop around it (`kube_loop`) reads the cluster and writes the database.
//!
//! A job's life here:
//! - **queued**, no pods of its run: create them (and the PodGroup of a
//!   gang). Creating is idempotent (the names are fixed per run), so a
//!   worker that restarts does not need to remember what it created.
//! - **queued**, every pod of the run bound: **running** from now; each
//!   pod's devices (the scheduler's binding annotations) are what it holds.
//! - **running**, every pod Succeeded: **succeeded**; a pod Failed:
//!   **failed** (the others are deleted).
//! - **running**, a pod gone or being deleted (the scheduler evicted it to
//!   preempt, or someone deleted it): the run ends, the rest of its pods
//!   are deleted, and the job goes back to **queued** as a new run.
//! - **cancelled** (the portal or the API): its pods are deleted.
//!
//! Whenever a run stops holding GPUs, one ledger hold per GPU grant is
//! closed, exactly as on the virtual cluster.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use partita_engine::cluster::Assignment;
use partita_engine::gpu;
use partita_engine::sched::Nanos;

use super::views::{TeamQueueView, unseen_slot};
use super::world::{
    CANCELLED, Changes, EventRow, FAILED, Hold, JobRecord, JobUpdate, QUEUED, RUNNING, SUCCEEDED,
};
use crate::accounting;
use crate::api;
use crate::k8s::devices::grants_from_annotations;
use crate::k8s::pod::task_name;
use crate::k8s::waiting;
use crate::k8s::workloads::{Placement, StoredJob, Workload, WorkloadError, workload_of};

/// What every pod of the worker's jobs has in common. Each team's pods go
/// to the namespace named after the team, under the Queue of that name.
#[derive(Debug, Clone, Default)]
pub struct PodTemplate {
    pub scheduler_name: String,
    pub image: String,
    pub command: Vec<String>,
}

impl PodTemplate {
    fn placement<'a>(&'a self, rec: &'a JobRecord) -> Placement<'a> {
        Placement {
            namespace: &rec.team,
            queue: &rec.team,
            scheduler_name: &self.scheduler_name,
            image: &self.image,
            command: &self.command,
        }
    }
}

/// What the worker knows of a node a pod ran on: for the ledger.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    /// The GPU model's catalog name ("" when the node has no GPU).
    pub model: String,
    pub tier: String,
}

/// A change to make on the cluster.
#[derive(Debug, Clone)]
pub enum Action {
    Create {
        seq: i64,
        // Boxed: a workload is large beside a deletion's names.
        workload: Box<Workload>,
    },
    /// Delete these pods (namespace, name) of the job.
    Delete {
        seq: i64,
        pods: Vec<(String, String)>,
    },
}

/// The stored jobs not finished, and what changed since last taken.
#[derive(Debug, Default)]
pub struct KubeWorld {
    jobs: BTreeMap<i64, JobRecord>,
    changes: Changes,
    /// Jobs whose objects this worker created for their current run.
    created: BTreeSet<(i64, u64)>,
}

impl KubeWorld {
    pub fn knows(&self, seq: i64) -> bool {
        self.jobs.contains_key(&seq)
    }

    /// The unfinished jobs that arrived on the cluster: their name there
    /// and their ID.
    pub fn cluster_jobs(&self) -> BTreeMap<String, String> {
        self.jobs
            .values()
            .filter_map(|r| Some((r.cluster_job.clone()?, r.id.clone())))
            .collect()
    }

    pub fn add(&mut self, mut rec: JobRecord) {
        rec.runtime.fit_tasks(rec.spec.tasks.len());
        self.jobs.insert(rec.seq, rec);
    }

    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    /// The job each pod belongs to, by the pod's task name
    /// ("namespace/name", as the scheduler names tasks).
    pub fn owners(&self, pods: &BTreeMap<String, Vec<Arc<Pod>>>) -> HashMap<String, &JobRecord> {
        let mut out = HashMap::new();
        for rec in self.jobs.values() {
            for p in Self::pods_of(rec, pods) {
                out.insert(task_name(&p), rec);
            }
        }
        out
    }

    /// Each team's queue: its queued jobs in the order the scheduler takes
    /// a team's work (higher class first, then the team's own order; a
    /// move made after a job's pods exist reorders the portal's queue but
    /// not the scheduler's, which orders pods by when they were made), each
    /// with the reason the scheduler last wrote on a pod of its current
    /// run (`k8s::waiting`). A job none of whose pods has one yet (just
    /// made, or not seen by a cycle) says so, as on the virtual cluster.
    ///
    /// The position is the job's place in that order, counted here: the
    /// scheduler writes a pod's reason only when it changes, so the
    /// position it had then would soon be stale. Like the engine's, it
    /// counts only the team's jobs that wait.
    pub fn queue_views(
        &self,
        pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    ) -> BTreeMap<String, TeamQueueView> {
        let mut queued: Vec<&JobRecord> =
            self.jobs.values().filter(|r| r.state == QUEUED).collect();
        queued.sort_by_key(|r| (r.team.as_str(), Reverse(r.class), r.queue_key, r.seq));
        let mut out: BTreeMap<String, TeamQueueView> = BTreeMap::new();
        for rec in queued {
            let reason = Self::pods_of(rec, pods)
                .iter()
                .filter(|p| rec.cluster_job.is_some() || run_of(p) == Some(rec.runtime.epoch))
                .find_map(|p| waiting::reason_of(p).map(str::to_string));
            let q = out.entry(rec.team.clone()).or_default();
            let position = q.slots.len() as i64 + 1;
            let slot = match reason {
                Some(reason) => {
                    q.waiting += 1;
                    api::QueueSlot {
                        position,
                        reason,
                        estimated_start: None,
                        wait_seconds: None,
                    }
                }
                None => api::QueueSlot {
                    position,
                    ..unseen_slot(0)
                },
            };
            q.slots.insert(rec.id.clone(), slot);
        }
        out
    }

    /// Every pod of the job (all its runs) among `pods`.
    fn pods_of(rec: &JobRecord, pods: &BTreeMap<String, Vec<Arc<Pod>>>) -> Vec<Arc<Pod>> {
        pods.get(&rec.id).cloned().unwrap_or_default()
    }

    /// Cancels a job: its pods (every run's) go, its holds close.
    pub fn cancel(
        &mut self,
        seq: i64,
        by: &str,
        now: Nanos,
        pods: &BTreeMap<String, Vec<Arc<Pod>>>,
        nodes: &BTreeMap<String, NodeFacts>,
    ) -> Option<Action> {
        let mut rec = self.jobs.remove(&seq)?;
        self.close_holds(&mut rec, now, nodes);
        let doomed = names(&Self::pods_of(&rec, pods));
        self.finish(rec, now, CANCELLED, format!("cancelled by {by}"));
        (!doomed.is_empty()).then_some(Action::Delete { seq, pods: doomed })
    }

    /// Requeues a job at someone's request: its pods go, its holds close,
    /// and it waits again as a new run.
    pub fn requeue(
        &mut self,
        seq: i64,
        by: &str,
        now: Nanos,
        pods: &BTreeMap<String, Vec<Arc<Pod>>>,
        nodes: &BTreeMap<String, NodeFacts>,
    ) -> Option<Action> {
        let mut rec = self.jobs.remove(&seq)?;
        let doomed = names(&Self::pods_of(&rec, pods));
        self.close_holds(&mut rec, now, nodes);
        if rec.cluster_job.is_some() {
            // Partita cannot make a cluster job's pods again: they go, and
            // their owner (a controller) makes new ones, a new job.
            let reason =
                format!("requeued by {by}: its pods were deleted for their owner to make again");
            self.update_with(&mut rec, now, CANCELLED, reason, Some(now), true);
            return (!doomed.is_empty()).then_some(Action::Delete { seq, pods: doomed });
        }
        rec.runtime.queued_at = now;
        self.update_with(
            &mut rec,
            now,
            QUEUED,
            format!("requeued by {by}"),
            None,
            true,
        );
        self.jobs.insert(seq, rec);
        (!doomed.is_empty()).then_some(Action::Delete { seq, pods: doomed })
    }

    /// A create the cluster refused: the job says why (once per reason)
    /// and the next look tries again.
    pub fn create_failed(&mut self, seq: i64, now: Nanos, why: &str) {
        let Some(mut rec) = self.jobs.remove(&seq) else {
            return;
        };
        self.created.remove(&(seq, rec.runtime.epoch));
        let reason = format!("the cluster refused its pods: {why}");
        if rec.reason != reason && rec.state == QUEUED {
            self.update(&mut rec, now, QUEUED, reason, None);
        }
        self.jobs.insert(seq, rec);
    }

    /// Takes up what the cluster shows: `pods` are the job's pods by job
    /// ID (every run's), `nodes` the nodes by name.
    pub fn observe(
        &mut self,
        now: Nanos,
        pods: &BTreeMap<String, Vec<Arc<Pod>>>,
        nodes: &BTreeMap<String, NodeFacts>,
        template: &PodTemplate,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        let seqs: Vec<i64> = self.jobs.keys().copied().collect();
        for seq in seqs {
            let mut rec = self.jobs.remove(&seq).expect("listed");
            let run = rec.runtime.epoch;
            let all = Self::pods_of(&rec, pods);
            // A cluster job's pods are all its own: they have no runs.
            let foreign = rec.cluster_job.is_some();
            let (current, stale): (Vec<_>, Vec<_>) = all
                .into_iter()
                .partition(|p| foreign || run_of(p) == Some(run));
            // Pods of an earlier run that are still there (evicted and
            // terminating, or left by a crash between a run's end and
            // the deletion): make sure they go.
            let leftovers: Vec<_> = stale.iter().filter(|p| !deleting(p)).cloned().collect();
            if !leftovers.is_empty() {
                actions.push(Action::Delete {
                    seq,
                    pods: names(&leftovers),
                });
            }
            let keep = if rec.state == RUNNING {
                self.observe_running(&mut rec, now, &current, nodes, &mut actions)
            } else {
                self.observe_queued(&mut rec, now, &current, template, &mut actions)
            };
            if keep {
                self.jobs.insert(seq, rec);
            }
        }
        actions
    }

    /// A queued job: create its pods, or start it once all are bound.
    /// False when the job ended (it cannot run as pods).
    fn observe_queued(
        &mut self,
        rec: &mut JobRecord,
        now: Nanos,
        pods: &[Arc<Pod>],
        template: &PodTemplate,
        actions: &mut Vec<Action>,
    ) -> bool {
        let run = rec.runtime.epoch;
        let tasks = rec.spec.tasks.len();
        let foreign = rec.cluster_job.is_some();
        if pods.len() < tasks && foreign {
            return true; // its owner makes its pods
        }
        if pods.len() < tasks {
            if !self.created.insert((rec.seq, run)) {
                return true; // made; the watch has not shown them all yet
            }
            let job = StoredJob {
                id: &rec.id,
                run,
                class: rec.class,
                spec: &rec.spec,
            };
            match workload_of(&job, &template.placement(rec)) {
                Ok(workload) => actions.push(Action::Create {
                    seq: rec.seq,
                    workload: Box::new(workload),
                }),
                Err(e) => {
                    self.refuse(rec.clone(), now, &e);
                    return false;
                }
            }
            return true;
        }
        let bound: Vec<&Arc<Pod>> = pods.iter().filter(|p| node_of(p).is_some()).collect();
        if bound.len() < tasks {
            return true;
        }
        let mut on = BTreeSet::new();
        for (i, p) in pods.iter().enumerate() {
            // Partita's pods are named by task; a cluster job's tasks are
            // its pods in name order, as when it was stored.
            let task = if foreign { Some(i) } else { task_index(p) };
            let Some(task) = task else { continue };
            let Some(node) = node_of(p) else { continue };
            let ann = p.metadata.annotations.clone().unwrap_or_default();
            // A pod whose devices cannot be read still runs; it is
            // billed for nothing rather than a guess.
            let grants = grants_from_annotations(&ann)
                .ok()
                .flatten()
                .unwrap_or_default();
            if task < rec.runtime.placed.len() {
                rec.runtime.placed[task] = Some(Assignment {
                    task: pod_key(p),
                    node: node.to_string(),
                    cpu_milli: rec.spec.tasks[task].cpu_milli,
                    memory_mib: rec.spec.tasks[task].memory_mib,
                    grants,
                });
                rec.runtime.held_since[task] = now;
                rec.runtime.ready_at[task] = now;
            }
            on.insert(node.to_string());
        }
        rec.runtime.run_since = now;
        rec.attempts += 1;
        rec.started.get_or_insert(now);
        let nodes: Vec<String> = on.into_iter().collect();
        let reason = format!("running on {}", nodes.join(", "));
        self.update(rec, now, RUNNING, reason, None);
        true
    }

    /// A running job: finished, failed, preempted, or still running.
    fn observe_running(
        &mut self,
        rec: &mut JobRecord,
        now: Nanos,
        pods: &[Arc<Pod>],
        nodes: &BTreeMap<String, NodeFacts>,
        actions: &mut Vec<Action>,
    ) -> bool {
        let tasks = rec.spec.tasks.len();
        let phase = |p: &Arc<Pod>| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default()
        };
        if let Some(failed) = pods.iter().find(|p| phase(p) == "Failed") {
            let why = failed
                .status
                .as_ref()
                .and_then(|s| s.message.clone().or(s.reason.clone()))
                .unwrap_or_else(|| "no reason given".into());
            let rest: Vec<_> = pods
                .iter()
                .filter(|p| !deleting(p) && phase(p) != "Failed")
                .cloned()
                .collect();
            if !rest.is_empty() && rec.cluster_job.is_none() {
                actions.push(Action::Delete {
                    seq: rec.seq,
                    pods: names(&rest),
                });
            }
            self.close_holds(rec, now, nodes);
            let reason = format!("pod {} failed: {why}", pod_key(failed));
            self.finish(rec.clone(), now, FAILED, reason);
            return false;
        }
        if pods.len() >= tasks && pods.iter().all(|p| phase(p) == "Succeeded") {
            self.close_holds(rec, now, nodes);
            let reason = format!("all {tasks} pods succeeded");
            self.finish(rec.clone(), now, SUCCEEDED, reason);
            return false;
        }
        let gone: Vec<String> = rec
            .runtime
            .placed
            .iter()
            .flatten()
            .filter(|a| !pods.iter().any(|p| pod_key(p) == a.task && !deleting(p)))
            .map(|a| a.task.clone())
            .collect();
        if gone.is_empty() {
            return true;
        }
        if rec.cluster_job.is_some() {
            // Not Partita's to bring back: whoever made the pods makes new
            // ones, which are a new job.
            self.close_holds(rec, now, nodes);
            let reason = format!(
                "pod {} was evicted or deleted on the cluster",
                gone.join(", ")
            );
            self.finish(rec.clone(), now, CANCELLED, reason);
            return false;
        }
        // The run is over: a pod was evicted (preemption) or deleted.
        let rest: Vec<_> = pods.iter().filter(|p| !deleting(p)).cloned().collect();
        if !rest.is_empty() {
            actions.push(Action::Delete {
                seq: rec.seq,
                pods: names(&rest),
            });
        }
        self.close_holds(rec, now, nodes);
        rec.runtime.run_since = -1;
        rec.runtime.queued_at = now;
        let reason = format!(
            "requeued: pod {} was evicted or deleted on the cluster",
            gone.join(", ")
        );
        self.update(rec, now, QUEUED, reason, None);
        true
    }

    /// A job the cluster cannot run as asked: failed, saying why.
    fn refuse(&mut self, rec: JobRecord, now: Nanos, e: &WorkloadError) {
        self.finish(rec, now, FAILED, e.to_string());
    }

    /// Ends the run's holds: one ledger row per GPU grant, and a new
    /// epoch (the next run's pods get new names).
    fn close_holds(
        &mut self,
        rec: &mut JobRecord,
        now: Nanos,
        nodes: &BTreeMap<String, NodeFacts>,
    ) {
        let rt = &mut rec.runtime;
        for task in 0..rt.placed.len() {
            let Some(a) = rt.placed[task].take() else {
                continue;
            };
            let facts = nodes.get(&a.node);
            for (gi, g) in a.grants.iter().enumerate() {
                let Some(facts) = facts.filter(|f| !f.model.is_empty()) else {
                    continue;
                };
                let (share, profile) = accounting::grant_share(&gpu::lookup(&facts.model), g);
                if share <= 0 {
                    continue;
                }
                self.changes.holds.push(Hold {
                    hold_id: format!(
                        "{}/t{task}/e{}/{}/gpu{}/{gi}",
                        rec.id, rt.epoch, a.node, g.gpu
                    ),
                    job_seq: rec.seq,
                    team_id: rec.team_id,
                    project_id: rec.project_id,
                    user_id: rec.user_id,
                    class: rec.class,
                    task: a.task.clone(),
                    node: a.node.clone(),
                    gpu: g.gpu,
                    model: facts.model.clone(),
                    mig_profile: profile,
                    share,
                    tier: facts.tier.clone(),
                    start: rt.held_since[task],
                    end: now,
                });
            }
            rt.held_since[task] = 0;
            rt.ready_at[task] = 0;
        }
        rt.epoch += 1;
        rt.run_since = -1;
    }

    fn finish(&mut self, mut rec: JobRecord, now: Nanos, state: &str, reason: String) {
        self.update(&mut rec, now, state, reason, Some(now));
    }

    fn update(
        &mut self,
        rec: &mut JobRecord,
        now: Nanos,
        state: &str,
        reason: String,
        finished: Option<Nanos>,
    ) {
        self.update_with(rec, now, state, reason, finished, false);
    }

    fn update_with(
        &mut self,
        rec: &mut JobRecord,
        now: Nanos,
        state: &str,
        reason: String,
        finished: Option<Nanos>,
        requeue_done: bool,
    ) {
        rec.state = state.to_string();
        rec.reason = reason.clone();
        self.changes.jobs.retain(|u| u.seq != rec.seq);
        self.changes.jobs.push(JobUpdate {
            seq: rec.seq,
            state: state.to_string(),
            reason: reason.clone(),
            started: rec.started,
            finished,
            attempts: rec.attempts,
            runtime: rec.runtime.clone(),
            requeue_done,
        });
        self.changes.events.push(EventRow {
            job_seq: rec.seq,
            at: now,
            state: state.to_string(),
            reason,
        });
    }
}

/// "namespace/name", the task name the scheduler gives a pod.
pub fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or(""),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

fn names(pods: &[Arc<Pod>]) -> Vec<(String, String)> {
    pods.iter()
        .map(|p| {
            (
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn deleting(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn run_of(p: &Pod) -> Option<u64> {
    p.metadata
        .labels
        .as_ref()?
        .get(crate::k8s::workloads::LABEL_RUN)?
        .parse()
        .ok()
}

/// The task a pod runs: the number after its name's last '-'.
fn task_index(p: &Pod) -> Option<usize> {
    p.metadata.name.as_deref()?.rsplit('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::spec::{JobSpec, Runtime};
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use partita_engine::sched::SECOND;
    use partita_engine::workload::{Class, Demand, Kind, Task};

    const H100: &str = "NVIDIA-H100-80GB-HBM3";

    fn record(seq: i64, gpus_per_task: i32, tasks: usize) -> JobRecord {
        let task = |i: usize| Task {
            name: format!("t{i}"),
            cpu_milli: 1000,
            memory_mib: 1024,
            gpu: Demand {
                kind: Kind::WholeGpus,
                count: gpus_per_task,
                ..Demand::default()
            },
        };
        JobRecord {
            seq,
            id: format!("J{seq}"),
            team: "search".into(),
            team_id: 1,
            project: "default".into(),
            project_id: 1,
            user_id: 1,
            class: Class::Batch,
            state: QUEUED.into(),
            reason: String::new(),
            spec: JobSpec {
                tasks: (0..tasks).map(task).collect(),
                gang: tasks as i32,
                ..JobSpec::default()
            },
            submitted: 0,
            queue_key: 0,
            started: None,
            attempts: 0,
            runtime: Runtime::default(),
            cluster_job: None,
        }
    }

    fn nodes() -> BTreeMap<String, NodeFacts> {
        ["n1", "n2"]
            .into_iter()
            .map(|n| {
                (
                    n.to_string(),
                    NodeFacts {
                        model: gpu::lookup(H100).name.clone(),
                        tier: "on-demand".into(),
                    },
                )
            })
            .collect()
    }

    fn at() -> PodTemplate {
        PodTemplate {
            scheduler_name: "partita".into(),
            image: "pause".into(),
            command: Vec::new(),
        }
    }

    /// The cluster as the test plays it: the pods created, by job ID.
    #[derive(Default)]
    struct Cluster {
        pods: BTreeMap<String, Vec<Arc<Pod>>>,
    }

    impl Cluster {
        fn apply(&mut self, actions: &[Action]) {
            for a in actions {
                match a {
                    Action::Create { workload, .. } => {
                        for p in &workload.pods {
                            let id = p.metadata.labels.as_ref().unwrap()
                                [crate::k8s::workloads::LABEL_JOB_ID]
                                .clone();
                            self.pods.entry(id).or_default().push(Arc::new(p.clone()));
                        }
                    }
                    Action::Delete { pods, .. } => {
                        for list in self.pods.values_mut() {
                            list.retain(|p| {
                                !pods.iter().any(|(ns, n)| {
                                    p.metadata.namespace.as_deref() == Some(ns)
                                        && p.metadata.name.as_deref() == Some(n)
                                })
                            });
                        }
                    }
                }
            }
        }

        fn edit(&mut self, job: &str, f: impl Fn(usize, &mut Pod)) {
            for (i, p) in self.pods.get_mut(job).unwrap().iter_mut().enumerate() {
                let mut q = (**p).clone();
                f(i, &mut q);
                *p = Arc::new(q);
            }
        }

        fn bind(&mut self, job: &str) {
            self.edit(job, |i, p| {
                p.spec.as_mut().unwrap().node_name = Some(format!("n{}", i + 1));
                p.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(crate::k8s::names::ANNOTATION_GPUS.into(), "0,1".into());
            });
        }

        fn phase(&mut self, job: &str, phase: &str) {
            self.edit(job, |_, p| {
                p.status = Some(PodStatus {
                    phase: Some(phase.into()),
                    ..PodStatus::default()
                })
            });
        }
    }

    #[test]
    fn a_gang_is_created_starts_when_bound_and_bills_each_gpu() {
        let mut w = KubeWorld::default();
        let mut c = Cluster::default();
        w.add(record(1, 2, 2));
        let acts = w.observe(0, &c.pods, &nodes(), &at());
        assert_eq!(acts.len(), 1, "{acts:?}");
        c.apply(&acts);
        assert_eq!(c.pods["J1"].len(), 2);
        // Not bound yet: nothing to do, and nothing created twice.
        assert!(w.observe(SECOND, &c.pods, &nodes(), &at()).is_empty());
        assert!(w.take_changes().is_empty());
        c.bind("J1");
        assert!(w.observe(10 * SECOND, &c.pods, &nodes(), &at()).is_empty());
        let ch = w.take_changes();
        assert_eq!(ch.jobs.len(), 1);
        assert_eq!(ch.jobs[0].state, RUNNING);
        assert_eq!(ch.jobs[0].started, Some(10 * SECOND));
        assert_eq!(ch.jobs[0].reason, "running on n1, n2");
        c.phase("J1", "Succeeded");
        assert!(
            w.observe(3610 * SECOND, &c.pods, &nodes(), &at())
                .is_empty()
        );
        let ch = w.take_changes();
        assert_eq!(ch.jobs[0].state, SUCCEEDED);
        assert_eq!(ch.jobs[0].finished, Some(3610 * SECOND));
        // Two tasks of two whole GPUs: four holds of an hour each.
        assert_eq!(ch.holds.len(), 4, "{:?}", ch.holds);
        for h in &ch.holds {
            assert_eq!(h.share, accounting::SHARE_UNIT);
            assert_eq!(h.end - h.start, 3600 * SECOND);
            assert_eq!(h.model, gpu::lookup(H100).name);
        }
        assert!(!w.knows(1));
    }

    #[test]
    fn an_evicted_pod_ends_the_run_and_the_job_comes_back_as_new_pods() {
        let mut w = KubeWorld::default();
        let mut c = Cluster::default();
        w.add(record(2, 1, 2));
        c.apply(&w.observe(0, &c.pods, &nodes(), &at()));
        c.bind("J2");
        w.observe(SECOND, &c.pods, &nodes(), &at());
        w.take_changes();
        // The scheduler evicts task 0 to preempt: its pod is deleting.
        c.edit("J2", |i, p| {
            if i == 0 {
                p.metadata.deletion_timestamp =
                    Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
            }
        });
        let acts = w.observe(61 * SECOND, &c.pods, &nodes(), &at());
        let Action::Delete { pods, .. } = &acts[0] else {
            panic!("{acts:?}")
        };
        assert_eq!(pods, &[("search".to_string(), "job-j2-0-1".to_string())]);
        let ch = w.take_changes();
        assert_eq!(ch.jobs[0].state, QUEUED);
        assert!(
            ch.jobs[0].reason.contains("search/job-j2-0-0"),
            "{}",
            ch.jobs[0].reason
        );
        assert_eq!(ch.jobs[0].runtime.epoch, 1);
        // Two pods bound with two GPUs each (the test's binding).
        assert_eq!(ch.holds.len(), 4);
        assert!(ch.holds.iter().all(|h| h.end - h.start == 60 * SECOND));
        // The old pods go; the next look creates run 1.
        c.pods.clear();
        let acts = w.observe(62 * SECOND, &c.pods, &nodes(), &at());
        let Action::Create { workload, .. } = &acts[0] else {
            panic!("{acts:?}")
        };
        assert_eq!(
            workload.pods[0].metadata.name.as_deref(),
            Some("job-j2-1-0")
        );
    }

    #[test]
    fn a_failed_pod_fails_the_job_and_cancel_deletes_the_pods() {
        let mut w = KubeWorld::default();
        let mut c = Cluster::default();
        w.add(record(3, 1, 2));
        w.add(record(4, 1, 1));
        c.apply(&w.observe(0, &c.pods, &nodes(), &at()));
        c.bind("J3");
        c.bind("J4");
        w.observe(SECOND, &c.pods, &nodes(), &at());
        w.take_changes();
        c.edit("J3", |i, p| {
            if i == 1 {
                p.status = Some(PodStatus {
                    phase: Some("Failed".into()),
                    message: Some("OOMKilled".into()),
                    ..PodStatus::default()
                });
            }
        });
        let acts = w.observe(2 * SECOND, &c.pods, &nodes(), &at());
        assert!(matches!(&acts[0], Action::Delete { seq: 3, pods } if pods.len() == 1));
        let ch = w.take_changes();
        let j3 = ch.jobs.iter().find(|u| u.seq == 3).unwrap();
        assert_eq!(j3.state, FAILED);
        assert_eq!(j3.reason, "pod search/job-j3-0-1 failed: OOMKilled");
        let act = w.cancel(4, "leo", 3 * SECOND, &c.pods, &nodes()).unwrap();
        assert!(matches!(act, Action::Delete { seq: 4, ref pods } if pods.len() == 1));
        let ch = w.take_changes();
        assert_eq!(ch.jobs[0].state, CANCELLED);
        assert_eq!(ch.jobs[0].reason, "cancelled by leo");
        assert_eq!(ch.holds.len(), 2, "J4's task held two GPUs");
    }

    #[test]
    fn a_job_pods_cannot_express_fails_with_the_reason() {
        let mut w = KubeWorld::default();
        let mut rec = record(5, 1, 1);
        rec.spec.tasks[0].gpu = Demand {
            kind: Kind::Fraction,
            milli: 250,
            ..Demand::default()
        };
        w.add(rec);
        assert!(w.observe(0, &BTreeMap::new(), &nodes(), &at()).is_empty());
        let ch = w.take_changes();
        assert_eq!(ch.jobs[0].state, FAILED);
        assert!(
            ch.jobs[0].reason.contains("250 thousandths"),
            "{}",
            ch.jobs[0].reason
        );
    }
}
