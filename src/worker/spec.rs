//! The JSON the worker reads and writes in the `jobs` table: a job's
//! `spec` (what it asks for, fixed at submission) and its `runtime` (where
//! it runs and how far its clock has run: what a restarted worker needs to
//! put it back). Field names are the Go build's (`go/internal/store`,
//! `Spec` and `Runtime`); durations and times are nanoseconds of cluster
//! time, as Go's `time.Duration`.

use partita_engine::cluster::Assignment;
use partita_engine::sched::Nanos;
use partita_engine::workload::Task;
use serde::{Deserialize, Serialize};

/// What a job asks for (the `spec` column).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub tasks: Vec<Task>,
    /// This many tasks start together or not at all (0 or 1: each alone).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub gang: i32,
    /// Run time once every task is placed and ready; 0 runs until cancelled.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duration: Nanos,
    /// Fails after running this long (for trying failure handling).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fail_after: Nanos,
    /// A preempted job loses the work since its last checkpoint.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checkpoint_every: Nanos,
}

/// The worker's record of a job that holds or held resources (the
/// `runtime` column). A new job's runtime is `{}`: every field has a
/// default that means "never started".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runtime {
    /// Per task, what it holds (`None`: not placed).
    #[serde(default)]
    pub placed: Vec<Option<Assignment>>,
    /// Per task, since when it holds what it holds: a ledger row's start.
    #[serde(default)]
    pub held_since: Vec<Nanos>,
    /// Per task, when it can run (later than its start while a MIG
    /// instance is created for it).
    #[serde(default)]
    pub ready_at: Vec<Nanos>,
    /// When the job's clock started; -1 when it is not running.
    #[serde(default = "minus_one")]
    pub run_since: Nanos,
    /// Run time left when `run_since` was set (lost work included); `None`
    /// until the worker first sees the job (then the spec's duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<Nanos>,
    /// Bumps whenever the job stops holding resources; part of every
    /// ledger hold's ID, so a hold of an earlier run is never confused
    /// with a later one.
    #[serde(default)]
    pub epoch: u64,
    /// A preempted job's grace period ends then (0: not preempted).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grace_until: Nanos,
    /// When it last entered the queue.
    #[serde(default)]
    pub queued_at: Nanos,
}

impl Default for Runtime {
    fn default() -> Runtime {
        Runtime {
            placed: Vec::new(),
            held_since: Vec::new(),
            ready_at: Vec::new(),
            run_since: -1,
            remaining: None,
            epoch: 0,
            grace_until: 0,
            queued_at: 0,
        }
    }
}

impl Runtime {
    /// Makes the per-task lists as long as the job's tasks (a new job's
    /// runtime has none).
    pub fn fit_tasks(&mut self, tasks: usize) {
        self.placed.resize(tasks, None);
        self.held_since.resize(tasks, 0);
        self.ready_at.resize(tasks, 0);
    }
}

fn minus_one() -> Nanos {
    -1
}

fn is_zero(x: &Nanos) -> bool {
    *x == 0
}

fn is_zero_i32(x: &i32) -> bool {
    *x == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_jobs_empty_runtime_means_never_started() {
        let rt: Runtime = serde_json::from_str("{}").unwrap();
        assert_eq!(rt, Runtime::default());
        assert_eq!(rt.run_since, -1);
    }

    #[test]
    fn spec_reads_the_go_field_names() {
        let spec: JobSpec = serde_json::from_str(
            r#"{"tasks":[{"Name":"t0","CPUMilli":1000,"MemoryMiB":1024,
                "GPU":{"Kind":1,"Count":2,"Milli":0,"Profile":"","PeakMemoryMiB":0,"Compute":0,"Models":null}}],
                "duration":60000000000}"#,
        )
        .unwrap();
        assert_eq!(spec.tasks[0].gpu.count, 2);
        assert_eq!(spec.duration, 60 * partita_engine::sched::SECOND);
        let back = serde_json::to_string(&spec).unwrap();
        assert_eq!(serde_json::from_str::<JobSpec>(&back).unwrap(), spec);
    }
}
