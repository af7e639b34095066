//! The scheduler's view of the world and what it tells the world to do:
//! the types a world (the mixed simulator, the standalone server, the
//! Kubernetes scheduler) builds each cycle and carries out after it.
//! Ported from the Go build's `engine/sched/types.go`; the names are Go's
//! in snake case.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cluster::{Assignment, State};
use crate::gpu::Layout;
use crate::workload;

/// Simulated time and durations, in nanoseconds (Go's `time.Duration`):
/// the engine reads no clock; the world says what time it is.
pub type Nanos = i64;

/// One second in `Nanos`.
pub const SECOND: Nanos = 1_000_000_000;
/// One minute in `Nanos`.
pub const MINUTE: Nanos = 60 * SECOND;
/// One hour in `Nanos`.
pub const HOUR: Nanos = 60 * MINUTE;

/// A tenant: a queue with a guaranteed share of the cluster. Quantities
/// are GPU milli (a MIG slice counts its compute share).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Team {
    pub name: String,
    /// Always obtainable: when the team asks for it, borrowers are
    /// preempted to make room.
    pub guarantee: i64,
    /// The most the team may hold, borrowed capacity included (at least
    /// `guarantee`). Above its guarantee it uses what others leave idle.
    pub burst: i64,
    pub weight: f64,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Phase {
    /// Waiting in its team's queue.
    #[default]
    Pending,
    /// All its tasks (or, without gangs, some) hold resources.
    Running,
    /// Preempted, in its grace period; still holds its resources.
    Terminating,
}

/// The scheduler's view of one job. The world owns it and keeps it
/// current; the scheduler only reads it, but for a mark of its own (which
/// scheduler indexed the job, and where its cache of the job is). The
/// mark is why a `Job` is built with `Job::new` and why a clone starts
/// without it: a copy is a job the scheduler has not seen.
#[derive(Debug, Default)]
pub struct Job {
    pub spec: workload::Job,
    pub submitted: Nanos,
    pub phase: Phase,
    /// Per task, what it holds; `None` for a task not started. Shared
    /// (`Arc`) so that the scheduler can tell a placement that stayed the
    /// same from a new one by identity, as the Go build compares pointers,
    /// without comparing assignments: set a new `Arc` whenever a task's
    /// place changes.
    pub placed: Vec<Option<Arc<Assignment>>>,
    /// When the job (the whole gang) started running.
    pub started: Nanos,
    /// Its last checkpoint (`started` when none): what a preemption loses
    /// is the work since then.
    pub checkpoint: Nanos,
    /// The declared run time (0 when unknown), used to judge whether a job
    /// can run before a reserved gang starts.
    pub estimate: Nanos,
    /// Which scheduler indexed the job (its token), and at which slot and
    /// epoch of its table (`table.rs`). Atomic only so that `Job` is
    /// `Sync`; read and written with relaxed ordering, as plain memory.
    owner: AtomicU64,
    mark: AtomicU64,
}

/// How many jobs ahead the passes over a backlog read the next job's mark
/// (and the world its next record): the jobs lie spread over the world's
/// memory and each first read is a cache miss, a third of a week-1000
/// cycle; read early, the load overlaps the work on the jobs before it.
/// (16 measured the same as 8; also reading the job's class and tasks,
/// slower.)
pub(crate) const READ_AHEAD: usize = 8;

impl Job {
    /// A pending job with `spec`'s tasks none of them placed, submitted at
    /// `submitted`.
    pub fn new(spec: workload::Job, submitted: Nanos) -> Job {
        let placed = vec![None; spec.tasks.len()];
        Job {
            spec,
            submitted,
            placed,
            ..Job::default()
        }
    }

    /// The job's ID.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The GPU milli the job holds now on `st`.
    pub fn held(&self, st: &State) -> i64 {
        let mut total = 0;
        for a in self.placed.iter().flatten() {
            if let Some(n) = st.node_by_name(&a.node) {
                total += i64::from(a.gpu_milli(n));
            }
        }
        total
    }

    /// Whether every task holds its resources.
    pub fn complete(&self) -> bool {
        !self.placed.is_empty() && self.placed.iter().all(Option::is_some)
    }

    /// The scheduler's mark: its token and the slot and epoch.
    pub(super) fn mark(&self) -> (u64, u64) {
        (
            self.owner.load(Ordering::Relaxed),
            self.mark.load(Ordering::Relaxed),
        )
    }

    /// Reads the job's mark ahead of its use (`READ_AHEAD`).
    pub(super) fn touch(&self) {
        std::hint::black_box(self.mark.load(Ordering::Relaxed));
    }

    pub(super) fn set_mark(&self, owner: u64, mark: u64) {
        self.owner.store(owner, Ordering::Relaxed);
        self.mark.store(mark, Ordering::Relaxed);
    }
}

impl Clone for Job {
    /// A copy without the scheduler's mark: to the scheduler it is a job
    /// not seen before (two jobs with one mark would share one cache).
    fn clone(&self) -> Job {
        Job {
            spec: self.spec.clone(),
            submitted: self.submitted,
            phase: self.phase,
            placed: self.placed.clone(),
            started: self.started,
            checkpoint: self.checkpoint,
            estimate: self.estimate,
            owner: AtomicU64::new(0),
            mark: AtomicU64::new(0),
        }
    }
}

/// One cycle's view of the world.
#[derive(Debug)]
pub struct Input<'a> {
    pub now: Nanos,
    /// Read only, and must not change while the cycle runs: the scheduler
    /// plans on a copy sharing its nodes and keeps nothing of it after.
    pub cluster: &'a State,
    pub teams: &'a [Team],
    /// Every job not finished, in any phase. Their order is the order in
    /// which the scheduler meets candidates (victims are then ranked by a
    /// total order, so it rarely matters); keep it stable, as the Go
    /// build's worlds do (arrival order).
    pub jobs: &'a [&'a Job],
    /// When set, limits the cycle to these pending jobs, in this order,
    /// with no queue positions computed: a world calls it when jobs
    /// arrived and nothing was freed, so the jobs already waiting would
    /// find nothing new. Full cycles (`None`) run when resources free up
    /// and now and then.
    pub only: Option<&'a [String]>,
    /// Says that `changed` and `gone` list every difference from the
    /// previous cycle's input to this scheduler: `changed` the jobs that
    /// are new or whose phase, placed, started, estimate, submitted or
    /// spec changed, `gone` the jobs of the previous input not in this one
    /// (each at most once in either list; a job both gone and changed is
    /// only gone). `jobs` carries every job as always; the scheduler then
    /// reads no other job to take its sums and order its queue (reading
    /// the unchanged jobs was about a third of a week of 1,000 GPUs in the
    /// Go build: docs/mixed.md, "Simulation speed"). Only one scheduler
    /// may be given a world's jobs this way. A world that cannot say
    /// leaves it false, and the scheduler reads every job. (`checkpoint`
    /// may change without a listing: it is read where it is used.)
    pub incremental: bool,
    pub changed: &'a [&'a Job],
    pub gone: &'a [&'a Job],
    /// The `waiting` list of an earlier decision that the world reads no
    /// more, for a full cycle to clear and fill again (each full cycle of
    /// a busy week fills one of thousands of entries). A full cycle
    /// takes it, leaving `None`; a light cycle leaves it.
    pub waiting: Option<Waiting>,
}

impl<'a> Input<'a> {
    /// A full, non-incremental input of `jobs` at `now`.
    pub fn new(
        now: Nanos,
        cluster: &'a State,
        teams: &'a [Team],
        jobs: &'a [&'a Job],
    ) -> Input<'a> {
        Input {
            now,
            cluster,
            teams,
            jobs,
            only: None,
            incremental: false,
            changed: &[],
            gone: &[],
            waiting: None,
        }
    }
}

/// The pending jobs left waiting, in the order the cycle considered them:
/// each job by its position in `Input::jobs`, with its wait. (The Go build
/// keyed a map by job ID; a full cycle of a backlog filled one of
/// thousands of entries, and hashing and counting references to the IDs
/// was a fifth of a gang-drf run here. `Decision::waits_by_id` gives the
/// map.)
pub type Waiting = Vec<(usize, Wait)>;

/// What the world must do. Starts are given in order; the world applies
/// them to its cluster as they are (the scheduler checked them on its
/// copy). The Go build's worlds apply starts, then migrations, then
/// reconfigurations, then preemptions.
#[derive(Debug, Default, PartialEq)]
pub struct Decision {
    pub starts: Vec<Start>,
    pub preemptions: Vec<Preemption>,
    pub reconfigs: Vec<Reconfig>,
    pub migrations: Vec<Migration>,
    /// For every pending job left waiting (by its position in
    /// `Input::jobs`), its position in its team's queue (1 = next; 0 in a
    /// cycle limited by `Input::only`) and why it waits.
    pub waiting: Waiting,
    /// Claims within their team's guarantee that wait for a timer of the
    /// scheduler's own: the world gives each a cycle at `at`, as a
    /// scheduler's backoff queue would, instead of leaving it to its next
    /// periodic look. A world that cycles every few seconds anyway may
    /// ignore them.
    pub retries: Vec<Retry>,
}

impl Decision {
    /// The waits by job ID; `jobs` is the input the decision was made
    /// for.
    pub fn waits_by_id<'j>(&self, jobs: &[&'j Job]) -> BTreeMap<&'j str, Wait> {
        self.waiting
            .iter()
            .map(|(i, w)| (jobs[*i].id(), w.clone()))
            .collect()
    }
}

/// Asks for a cycle of `job` at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    pub job: String,
    pub at: Nanos,
}

/// Starts one task of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub job: String,
    pub task: usize,
    pub assignment: Assignment,
    /// The assignment uses a MIG instance that does not exist yet: the
    /// world creates it first, which takes the MIG reconfiguration delay.
    pub creates: bool,
}

/// Moves one task of a running service to another node, make before
/// break: the world allocates `to` at once (creating its instance first
/// when `creates`) and releases what the task held before only when the
/// new place is ready. No work is lost; the job keeps running.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    pub job: String,
    pub task: usize,
    pub to: Assignment,
    pub creates: bool,
    /// The job it makes room for (Go's `For`).
    pub for_job: String,
}

/// Evicts a running job: it gets `grace` to checkpoint and exit, then goes
/// back to its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    pub job: String,
    /// The job it makes room for.
    pub for_job: String,
    pub reason: String,
    pub grace: Nanos,
}

/// Re-partitions one GPU: MIG mode and, with MIG on, the layout of its
/// free region. Instances in use are kept as they are. The world cordons
/// the GPU until the change is done, except for an `add`, which only
/// creates instances in free space: the GPU goes on taking work, and only
/// a task placed on a new instance waits for it to be ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconfig {
    pub node: String,
    pub gpu: usize,
    pub mig: bool,
    pub layout: Layout,
    pub add: bool,
    /// The job it is for ("warm pool" for instances made ahead of demand).
    pub for_job: String,
}

/// Why a pending job waits, and its place in its team's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub position: usize,
    pub reason: WaitReason,
}

/// Why a job waits; the portal shows the text (`as_str`, the Go build's
/// `Wait*` constants).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitReason {
    Quota,
    Gang,
    NoRoom,
    NoSlice,
    Reconfig,
    Preempting,
    Moving,
    Reserved,
    Priority,
    ProdReserve,
    /// Can never run on this cluster: the whole text, `INVALID_SPEC`
    /// followed by ": " and the validation error.
    Invalid(Arc<str>),
}

/// The text of `WaitReason::Invalid` before the error.
pub const INVALID_SPEC: &str = "invalid: can never run on this cluster";

impl WaitReason {
    /// The text the Go build gives.
    pub fn as_str(&self) -> &str {
        match self {
            WaitReason::Quota => "quota: the team is at its limit",
            WaitReason::Gang => "gang: not all tasks fit at once",
            WaitReason::NoRoom => "no room: no node fits the job",
            WaitReason::NoSlice => "no fitting MIG slice yet",
            WaitReason::Reconfig => "waiting for a MIG reconfiguration",
            WaitReason::Preempting => "waiting for preempted jobs to exit",
            WaitReason::Moving => "waiting for services to move off its node",
            WaitReason::Reserved => "the free GPUs are reserved for an older gang",
            WaitReason::Priority => "higher-priority jobs go first",
            WaitReason::ProdReserve => "the last free GPUs are kept for production",
            WaitReason::Invalid(text) => text,
        }
    }

    /// `Invalid` for a job refused with `err`.
    pub fn invalid(err: impl fmt::Display) -> WaitReason {
        WaitReason::Invalid(format!("{INVALID_SPEC}: {err}").into())
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
