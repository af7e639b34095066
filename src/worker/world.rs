//! The virtual cluster and the jobs on it, in memory: the port of the Go
//! build's standalone world (`go/internal/standalone`, `apply.go`,
//! `ops.go`, `recover.go`), without I/O. The worker (`mod.rs`) feeds it
//! what it reads from PostgreSQL, advances it to the cluster time of each
//! tick, runs a scheduling cycle, and takes its `Changes` (job states,
//! events, ledger holds) to write them in one transaction.
//!
//! A decision is carried out as the mixed simulator does
//! (`engine/src/sim/mixed/apply.rs`): starts first, then MIG changes,
//! then preemptions with a grace period. Timers (a job's end, a grace
//! period's end, a MIG instance ready, a GPU's change done) fire at their
//! own cluster times, in order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use partita_engine::cluster::{Assignment, State};
use partita_engine::sched::{
    Decision, Input, Nanos, Phase, Preemption, Reconfig, SECOND, Scheduler, Start, Team, Wait,
};
use partita_engine::workload::{self, Class};

use super::spec::{JobSpec, Runtime};
use crate::accounting;
use crate::metrics::WorkerMetrics;

/// The states of `jobs.state` (migrations/0002_jobs.sql).
pub const QUEUED: &str = "queued";
pub const ADMITTED: &str = "admitted";
pub const RUNNING: &str = "running";
pub const PREEMPTED: &str = "preempted";
pub const SUCCEEDED: &str = "succeeded";
pub const FAILED: &str = "failed";
pub const CANCELLED: &str = "cancelled";

/// A job as the worker reads it from the database.
#[derive(Debug, Clone)]
pub struct JobRecord {
    pub seq: i64,
    pub id: String,
    pub team: String,
    pub team_id: i64,
    pub project: String,
    pub project_id: i64,
    pub user_id: i64,
    pub class: Class,
    pub state: String,
    pub reason: String,
    pub spec: JobSpec,
    pub submitted: Nanos,
    /// Its place in its team's queue: the submission time unless the team
    /// moved it (migrations/0013_team_queue_order.sql). The scheduler
    /// orders by it.
    pub queue_key: Nanos,
    pub started: Option<Nanos>,
    pub attempts: i32,
    pub runtime: Runtime,
    /// For a job that arrived on a Kubernetes cluster (kubectl), its name
    /// there (migrations/0014_cluster_jobs.sql); None for the API's.
    pub cluster_job: Option<String>,
}

/// A job's new row (the columns the worker owns).
#[derive(Debug, Clone, PartialEq)]
pub struct JobUpdate {
    pub seq: i64,
    pub state: String,
    pub reason: String,
    pub started: Option<Nanos>,
    pub finished: Option<Nanos>,
    pub attempts: i32,
    pub runtime: Runtime,
    /// The job's requeue request was carried out: clear it.
    pub requeue_done: bool,
}

/// A `job_events` row.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub job_seq: i64,
    pub at: Nanos,
    pub state: String,
    pub reason: String,
}

/// A finished hold: one task's use of one GPU from `start` to `end`
/// (cluster time): a `usage_ledger` row before its price.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub hold_id: String,
    pub job_seq: i64,
    pub team_id: i64,
    pub project_id: i64,
    pub user_id: i64,
    pub class: Class,
    pub task: String,
    pub node: String,
    pub gpu: i32,
    pub model: String,
    pub mig_profile: Option<String>,
    /// The part of the GPU held, in 1/7000 GPU (`accounting::SHARE_UNIT`:
    /// a MIG slice of k compute slices k x 1000, a share of m milli 7m),
    /// so seven 1g slices are exactly one GPU.
    pub share: i64,
    pub tier: String,
    pub start: Nanos,
    pub end: Nanos,
}

/// What the world changed since its changes were last taken.
#[derive(Debug, Default)]
pub struct Changes {
    pub jobs: Vec<JobUpdate>,
    pub events: Vec<EventRow>,
    pub holds: Vec<Hold>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.events.is_empty() && self.holds.is_empty()
    }
}

/// The world's record of an unfinished job.
#[derive(Debug)]
struct WJob {
    rec: JobRecord,
    /// The scheduler's view of it.
    job: workload_job::Job,
    finished: Option<Nanos>,
    done: bool,
    requeue_done: bool,
}

/// The scheduler's job type, named apart from the workload's.
mod workload_job {
    pub use partita_engine::sched::Job;
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// The job's run time (or its fail_after) is over.
    End { seq: i64, epoch: u64 },
    /// A preempted job's grace period is over.
    Grace { seq: i64, epoch: u64 },
    /// A MIG instance a task of the job waits for is ready.
    Ready { seq: i64, epoch: u64 },
    /// A GPU's MIG change is done.
    Uncordon {
        node: String,
        gpu: usize,
        for_job: String,
    },
}

/// The virtual cluster and its unfinished jobs.
pub struct World {
    st: State,
    sch: Scheduler,
    teams: Vec<Team>,
    /// Unfinished jobs by `seq`: submission order, which is the order the
    /// scheduler meets them in.
    jobs: BTreeMap<i64, WJob>,
    seq_of: BTreeMap<String, i64>,
    /// Due at (cluster time, then the order they were set).
    timers: BTreeMap<(Nanos, u64), Timer>,
    timer_seq: u64,
    /// GPUs with MIG instances being added in free space, and when they
    /// are ready: a task placed on one waits until then.
    adding: BTreeMap<(String, i32), Nanos>,
    /// The cluster time of the world's last change.
    now: Nanos,
    reconfig_delay: Nanos,
    dirty: BTreeSet<i64>,
    events: Vec<EventRow>,
    holds: Vec<Hold>,
    /// Jobs a MIG change was made for that is now done: they get a cycle
    /// of their own first, as the mixed simulator gives them (`room_ready`
    /// in `engine/src/sim/mixed/world.rs`): the scheduler places a job on
    /// the instances changed for it in such a cycle.
    room_ready: Vec<String>,
    /// Why each pending job waits and its place in its team's queue, as
    /// the last full cycle said (a cycle limited to a few jobs computes no
    /// positions): what the published queue shows.
    waits: BTreeMap<i64, Wait>,
    /// Where the world's events are counted, when this process exposes
    /// the worker's metrics.
    metrics: Option<Arc<WorkerMetrics>>,
    /// Recovery notes for the log.
    pub recovered: Vec<String>,
}

impl World {
    /// A world on `st` with scheduler `sch`, at cluster time `now`.
    pub fn new(st: State, sch: Scheduler, now: Nanos, reconfig_delay: Nanos) -> World {
        World {
            st,
            sch,
            teams: Vec::new(),
            jobs: BTreeMap::new(),
            seq_of: BTreeMap::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            adding: BTreeMap::new(),
            now,
            reconfig_delay,
            dirty: BTreeSet::new(),
            events: Vec::new(),
            holds: Vec::new(),
            room_ready: Vec::new(),
            waits: BTreeMap::new(),
            metrics: None,
            recovered: Vec::new(),
        }
    }

    /// Counts the world's events (starts, ends, preemptions, MIG changes,
    /// cycles) into `m`.
    pub fn set_metrics(&mut self, m: Option<Arc<WorkerMetrics>>) {
        self.metrics = m;
    }

    pub fn teams(&self) -> &[Team] {
        &self.teams
    }

    pub fn reconfig_delay(&self) -> Nanos {
        self.reconfig_delay
    }

    /// The unfinished jobs in submission order: each one's record and the
    /// scheduler's view of it.
    pub fn jobs(&self) -> impl Iterator<Item = (&JobRecord, &workload_job::Job)> {
        self.jobs
            .values()
            .filter(|j| !j.done)
            .map(|j| (&j.rec, &j.job))
    }

    /// Why a pending job waits, as the last full cycle said.
    pub fn wait(&self, seq: i64) -> Option<&Wait> {
        self.waits.get(&seq)
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The cluster (read only).
    pub fn cluster(&self) -> &State {
        &self.st
    }

    pub fn set_teams(&mut self, teams: Vec<Team>) {
        self.teams = teams;
    }

    /// Whether the world has the job (unfinished).
    pub fn knows(&self, seq: i64) -> bool {
        self.jobs.contains_key(&seq)
    }

    /// Whether any job waits for a start.
    pub fn any_pending(&self) -> bool {
        self.jobs
            .values()
            .any(|j| !j.done && j.job.phase == Phase::Pending)
    }

    /// The next timer's cluster time.
    pub fn next_timer(&self) -> Option<Nanos> {
        self.timers.keys().next().map(|&(at, _)| at)
    }

    /// Takes up a job read from the database: a queued one waits for a
    /// start; one that holds resources (admitted, running, preempted: a
    /// restart or a takeover) is put back where its runtime says, as Go's
    /// `recover.go` does.
    pub fn add(&mut self, mut rec: JobRecord) {
        let tasks = rec.spec.tasks.len();
        rec.runtime.fit_tasks(tasks);
        if rec.runtime.remaining.is_none() {
            rec.runtime.remaining = Some(rec.spec.duration);
        }
        // The cluster knows a task by its name on a node, so names must
        // differ between jobs: whatever the spec calls them ("0", "t0"),
        // the worker names them "<job>-<i>", as the Go build's server did
        // at submission. (Two jobs' "t0" on one node: the second could
        // never be placed there.)
        let mut tasks = rec.spec.tasks.clone();
        for (i, t) in tasks.iter_mut().enumerate() {
            t.name = format!("{}-{i}", rec.id);
        }
        let spec = workload::Job {
            id: rec.id.clone(),
            team: rec.team.clone(),
            project: rec.project.clone(),
            class: rec.class,
            tasks,
            gang_size: rec.spec.gang,
        };
        let mut job = workload_job::Job::new(spec, rec.queue_key);
        job.estimate = rec.spec.duration;
        let seq = rec.seq;
        let holds = rec.state != QUEUED;
        self.seq_of.insert(rec.id.clone(), seq);
        self.jobs.insert(
            seq,
            WJob {
                rec,
                job,
                finished: None,
                done: false,
                requeue_done: false,
            },
        );
        if holds {
            self.replace(seq);
        }
    }

    /// Puts a job back on the cluster where its runtime says it was.
    fn replace(&mut self, seq: i64) {
        let placed = self.jobs[&seq].rec.runtime.placed.clone();
        for (task, a) in placed.iter().enumerate() {
            let Some(a) = a else { continue };
            if let Err(why) = self.readopt(a) {
                let id = self.jobs[&seq].rec.id.clone();
                self.recovered
                    .push(format!("job {id}: placement lost ({why}); requeued"));
                self.requeue_now(seq, &format!("placement lost on restart: {why}"));
                return;
            }
            self.jobs.get_mut(&seq).expect("job").job.placed[task] = Some(Arc::new(a.clone()));
        }
        let j = self.jobs.get_mut(&seq).expect("job");
        let id = j.rec.id.clone();
        let state = j.rec.state.clone();
        if !j.job.complete() {
            // Replicas, some still waiting: the job stays pending.
            self.recovered.push(format!(
                "job {id} ({state}): partly placed, waits for the rest"
            ));
            return;
        }
        let rt = j.rec.runtime.clone();
        let epoch = rt.epoch;
        if state == PREEMPTED {
            j.job.phase = Phase::Terminating;
            let at = rt.grace_until.max(self.now);
            self.after(at, Timer::Grace { seq, epoch });
            self.recovered.push(format!(
                "job {id}: preempted, grace ends at {}s",
                at / SECOND
            ));
            return;
        }
        j.job.phase = Phase::Running;
        let started = j.rec.started.unwrap_or(self.now);
        j.job.started = started;
        j.job.checkpoint = started;
        if rt.run_since >= 0 {
            self.set_end(seq);
            self.recovered
                .push(format!("job {id}: running, its clock carries on"));
            return;
        }
        let ready = rt.ready_at.iter().copied().fold(self.now, Nanos::max);
        self.after(ready, Timer::Ready { seq, epoch });
        self.recovered.push(format!(
            "job {id} ({state}): placed, runs when its MIG instances are ready"
        ));
    }

    /// Allocates a stored assignment again, switching each GPU's MIG mode
    /// to what its grant needs (a fresh cluster starts in the scenario's).
    fn readopt(&mut self, a: &Assignment) -> Result<(), String> {
        let Some(n) = self.st.node_by_name(&a.node) else {
            return Err(format!("node {} is not in the cluster", a.node));
        };
        let mut switch = Vec::new();
        for g in &a.grants {
            let Some(d) = usize::try_from(g.gpu).ok().and_then(|i| n.gpus().get(i)) else {
                return Err(format!("node {} has no GPU {}", a.node, g.gpu));
            };
            if d.mig() != g.slice.is_some() {
                switch.push((g.gpu as usize, g.slice.is_some()));
            }
        }
        for (gpu, on) in switch {
            self.st
                .set_mig(&a.node, gpu, on)
                .map_err(|e| e.to_string())?;
        }
        self.st.allocate(a).map_err(|e| e.to_string())
    }

    /// Fires every timer due by `now`, each at its own time, then moves
    /// the world's clock to `now`; says whether any fired.
    pub fn advance(&mut self, now: Nanos) -> bool {
        let mut fired = false;
        while let Some(entry) = self.timers.first_entry() {
            let at = entry.key().0;
            if at > now {
                break;
            }
            let t = entry.remove();
            // Whole seconds, as every recorded time (clock.rs).
            self.now = self.now.max(at + (SECOND - at.rem_euclid(SECOND)) % SECOND);
            self.fire(t);
            fired = true;
        }
        self.now = self.now.max(now);
        fired
    }

    fn after(&mut self, at: Nanos, t: Timer) {
        self.timer_seq += 1;
        self.timers.insert((at, self.timer_seq), t);
    }

    /// The job `seq`, if unfinished and of `epoch` (a timer set before the
    /// job stopped is stale).
    fn current(&self, seq: i64, epoch: u64) -> bool {
        self.jobs
            .get(&seq)
            .is_some_and(|j| !j.done && j.rec.runtime.epoch == epoch)
    }

    fn fire(&mut self, t: Timer) {
        match t {
            Timer::End { seq, epoch } if self.current(seq, epoch) => self.end(seq),
            Timer::Grace { seq, epoch } if self.current(seq, epoch) => self.grace_over(seq),
            Timer::Ready { seq, epoch } if self.current(seq, epoch) => self.maybe_run(seq),
            Timer::Uncordon { node, gpu, for_job } => {
                if let Err(e) = self.st.cordon(&node, gpu, false) {
                    tracing::error!(%node, gpu, error = %e, "uncordon");
                }
                self.room_ready.push(for_job);
            }
            _ => {} // stale
        }
    }

    /// Runs a scheduling cycle at the world's time and carries out its
    /// decision.
    pub fn cycle(&mut self) {
        self.checkpoints();
        let mut only = std::mem::take(&mut self.room_ready);
        only.retain(|id| {
            self.seq_of
                .get(id)
                .is_some_and(|s| self.jobs[s].job.phase == Phase::Pending)
        });
        only.dedup();
        if !only.is_empty() {
            self.cycle_of(Some(&only));
        }
        self.cycle_of(None);
    }

    /// A cycle of every job (`only` none) or of the pending jobs `only`.
    fn cycle_of(&mut self, only: Option<&[String]>) {
        let began = std::time::Instant::now();
        let seqs: Vec<i64> = self
            .jobs
            .iter()
            .filter(|(_, j)| !j.done)
            .map(|(&s, _)| s)
            .collect();
        let decision = {
            let jobs: Vec<&workload_job::Job> = seqs.iter().map(|s| &self.jobs[s].job).collect();
            let mut input = Input::new(self.now, &self.st, &self.teams, &jobs);
            input.only = only;
            self.sch.cycle(&mut input)
        };
        if let Some(m) = &self.metrics {
            m.cycle(began.elapsed());
        }
        self.apply(decision, &seqs, only.is_none());
    }

    /// Sets each running job's last checkpoint: the scheduler picks
    /// victims by the work they would lose.
    fn checkpoints(&mut self) {
        for j in self.jobs.values_mut() {
            let every = j.rec.spec.checkpoint_every;
            if j.job.phase == Phase::Running && every > 0 && self.now > j.job.started {
                j.job.checkpoint = self.now - (self.now - j.job.started) % every;
            }
        }
    }

    fn apply(&mut self, d: Decision, seqs: &[i64], full: bool) {
        let Decision {
            starts,
            preemptions,
            reconfigs,
            migrations,
            waiting,
            retries: _, // the worker cycles every tick anyway
        } = d;
        let mut started: Vec<i64> = Vec::new();
        for s in starts {
            if let Some(seq) = self.start(s)
                && started.last() != Some(&seq)
            {
                started.push(seq);
            }
        }
        for seq in started {
            self.admit(seq);
        }
        if !migrations.is_empty() {
            // The preset is built with moves off (mod.rs); none comes.
            tracing::warn!(count = migrations.len(), "moves are not carried out");
        }
        for rc in &reconfigs {
            self.reconfigure(rc);
        }
        for p in &preemptions {
            self.preempt(p);
        }
        if full {
            self.waits.clear();
        }
        // Why each job waits: kept here and published with the queue
        // (`views.rs`), not written on the job's row, as the Go build keeps
        // it in memory. It changes with every cycle for thousands of jobs;
        // writing it cost a row update per waiting job, as much again as
        // storing its submission.
        for (i, wait) in waiting {
            let Some(j) = seqs.get(i).and_then(|s| self.jobs.get(s)) else {
                continue;
            };
            if full {
                self.waits.insert(j.rec.seq, wait);
            }
        }
    }

    /// Allocates one task's resources; returns the job's seq, or `None`
    /// when the start could not be carried out.
    fn start(&mut self, s: Start) -> Option<i64> {
        let seq = *self.seq_of.get(&s.job)?;
        let now = self.now;
        let j = self.jobs.get(&seq)?;
        if j.done || j.job.phase != Phase::Pending || s.task >= j.job.placed.len() {
            tracing::error!(job = %s.job, "start: the job is not pending");
            return None;
        }
        if let Err(e) = self.st.allocate(&s.assignment) {
            tracing::error!(job = %s.job, task = s.task, error = %e, "start: allocate");
            return None;
        }
        let mut ready = now;
        if s.creates {
            // The MIG instance must be created first.
            ready += self.reconfig_delay;
            if let Some(m) = &self.metrics {
                m.reconfigured();
            }
        }
        for g in s.assignment.grants.iter().filter(|g| g.slice.is_some()) {
            if let Some(&at) = self.adding.get(&(s.assignment.node.clone(), g.gpu)) {
                ready = ready.max(at);
            }
        }
        let j = self.jobs.get_mut(&seq)?;
        j.job.placed[s.task] = Some(Arc::new(s.assignment.clone()));
        let rt = &mut j.rec.runtime;
        rt.placed[s.task] = Some(s.assignment);
        rt.held_since[s.task] = now;
        rt.ready_at[s.task] = ready;
        let epoch = rt.epoch;
        if ready > now {
            self.after(ready, Timer::Ready { seq, epoch });
        }
        self.dirty.insert(seq);
        Some(seq)
    }

    /// Records a job's admission once its starts are carried out, and
    /// starts its clock when it is complete and ready.
    fn admit(&mut self, seq: i64) {
        let now = self.now;
        let j = self.jobs.get_mut(&seq).expect("job");
        if j.rec.state == QUEUED {
            j.rec.attempts += 1;
            j.rec.started = Some(now);
            let placed = j.job.placed.iter().filter(|p| p.is_some()).count();
            let total = j.job.placed.len();
            let reason = if placed < total {
                format!("{placed} of {total} tasks placed; the others wait for room")
            } else {
                format!("all {total} tasks placed")
            };
            self.record(seq, ADMITTED, None, reason);
        }
        let j = self.jobs.get_mut(&seq).expect("job");
        if j.job.complete() && j.job.phase == Phase::Pending {
            j.job.phase = Phase::Running;
            j.job.started = now;
            j.job.checkpoint = now;
            if let Some(m) = &self.metrics {
                // A job new to its queue has no queued_at of its own.
                let since = j.rec.runtime.queued_at.max(j.rec.submitted);
                let wait = (now - since).max(0) as f64 / SECOND as f64;
                m.started(&j.rec.team, j.rec.class.as_str(), wait);
            }
            self.maybe_run(seq);
        }
    }

    /// Starts the clock of a job whose tasks are all placed and ready.
    fn maybe_run(&mut self, seq: i64) {
        let now = self.now;
        let j = &self.jobs[&seq];
        if j.job.phase != Phase::Running || j.rec.runtime.run_since >= 0 {
            return;
        }
        if j.rec.runtime.ready_at.iter().any(|&r| r > now) {
            return;
        }
        let text = placement_text(&j.rec.runtime.placed);
        self.jobs.get_mut(&seq).expect("job").rec.runtime.run_since = now;
        self.record(seq, RUNNING, None, format!("on {text}"));
        self.set_end(seq);
    }

    /// Sets the timer of a running job's end: its remaining run time, or
    /// its fail_after when that comes first; none for a job that runs
    /// until cancelled.
    fn set_end(&mut self, seq: i64) {
        let j = &self.jobs[&seq];
        let rt = &j.rec.runtime;
        let mut at = None;
        if j.rec.spec.duration > 0 {
            at = Some(rt.run_since + rt.remaining.unwrap_or(j.rec.spec.duration));
        }
        let fail = j.rec.spec.fail_after;
        if fail > 0 && at.is_none_or(|a| rt.run_since + fail < a) {
            at = Some(rt.run_since + fail);
        }
        let epoch = rt.epoch;
        if let Some(at) = at {
            self.after(at.max(self.now), Timer::End { seq, epoch });
        }
    }

    /// Finishes a job whose run time is over.
    fn end(&mut self, seq: i64) {
        let j = &self.jobs[&seq];
        let rt = &j.rec.runtime;
        if rt.run_since < 0 || j.job.phase == Phase::Pending {
            return;
        }
        let ran = self.now - rt.run_since;
        let remaining = rt.remaining.unwrap_or(0);
        let (fail, duration) = (j.rec.spec.fail_after, j.rec.spec.duration);
        let (state, reason) = if fail > 0 && ran >= fail && (duration == 0 || ran < remaining) {
            (
                FAILED,
                format!(
                    "exited with an error after running {} (fail_after)",
                    secs(ran)
                ),
            )
        } else {
            (SUCCEEDED, format!("ran its {}", secs(duration)))
        };
        self.stop(seq);
        self.finish(seq, state, reason);
    }

    /// Releases everything a job holds and closes its ledger holds.
    fn stop(&mut self, seq: i64) {
        let now = self.now;
        let j = self.jobs.get_mut(&seq).expect("job");
        let rt = &mut j.rec.runtime;
        for task in 0..rt.placed.len() {
            let Some(a) = rt.placed[task].take() else {
                continue;
            };
            j.job.placed[task] = None;
            if let Some(n) = self.st.node_by_name(&a.node) {
                for (gi, g) in a.grants.iter().enumerate() {
                    let Some(d) = usize::try_from(g.gpu).ok().and_then(|i| n.gpus().get(i)) else {
                        continue;
                    };
                    let (share, profile) = accounting::grant_share(d.model(), g);
                    if share <= 0 {
                        continue;
                    }
                    self.holds.push(Hold {
                        // The job, the task, the run (epoch), the node, the
                        // GPU and the grant: unique, so a retried write of
                        // the same hold is not a second row.
                        hold_id: format!(
                            "{}/t{task}/e{}/{}/gpu{}/{gi}",
                            j.rec.id, rt.epoch, a.node, g.gpu
                        ),
                        job_seq: seq,
                        team_id: j.rec.team_id,
                        project_id: j.rec.project_id,
                        user_id: j.rec.user_id,
                        class: j.rec.class,
                        task: a.task.clone(),
                        node: a.node.clone(),
                        gpu: g.gpu,
                        model: d.model().name.clone(),
                        mig_profile: profile,
                        share,
                        tier: n.tier().as_str().to_string(),
                        start: rt.held_since[task],
                        end: now,
                    });
                }
            }
            if let Err(e) = self.st.release(&a.node, &a.task) {
                tracing::error!(task = %a.task, error = %e, "release");
            }
        }
        rt.epoch += 1;
        rt.run_since = -1;
        rt.ready_at.iter_mut().for_each(|r| *r = 0);
        rt.held_since.iter_mut().for_each(|r| *r = 0);
        self.dirty.insert(seq);
    }

    /// Ends a job for good.
    fn finish(&mut self, seq: i64, state: &str, reason: String) {
        let now = self.now;
        let j = self.jobs.get_mut(&seq).expect("job");
        j.finished = Some(now);
        j.done = true;
        if let Some(m) = &self.metrics {
            m.finished(&j.rec.team, j.rec.class.as_str(), state);
        }
        self.record(seq, state, None, reason);
    }

    fn preempt(&mut self, p: &Preemption) {
        let Some(&seq) = self.seq_of.get(&p.job) else {
            return;
        };
        let now = self.now;
        let j = self.jobs.get_mut(&seq).expect("job");
        if j.done || j.job.phase != Phase::Running {
            return;
        }
        j.job.phase = Phase::Terminating;
        j.rec.runtime.grace_until = now + p.grace;
        let epoch = j.rec.runtime.epoch;
        let reason = format!(
            "{}, for job {}; {} to checkpoint and exit",
            p.reason,
            p.for_job,
            secs(p.grace)
        );
        if let Some(m) = &self.metrics {
            m.preempted(&j.rec.team, j.rec.class.as_str());
        }
        self.record(seq, PREEMPTED, None, reason);
        self.after(now + p.grace, Timer::Grace { seq, epoch });
    }

    /// Releases a preempted job and puts it back in its queue.
    fn grace_over(&mut self, seq: i64) {
        if self.jobs[&seq].job.phase != Phase::Terminating {
            return;
        }
        self.requeue_now(seq, "requeued after preemption");
    }

    /// Stops a job that holds resources and puts it back in its queue,
    /// charging the work it loses (since its last checkpoint).
    fn requeue_now(&mut self, seq: i64, why: &str) {
        let now = self.now;
        let j = self.jobs.get_mut(&seq).expect("job");
        let rt = &mut j.rec.runtime;
        let mut lost = 0;
        if rt.run_since >= 0 && j.rec.spec.duration > 0 {
            let ran = now - rt.run_since;
            lost = lost_work(j.rec.spec.checkpoint_every, j.rec.class, ran);
            let remaining = rt.remaining.unwrap_or(j.rec.spec.duration);
            rt.remaining = Some((remaining - ran + lost).max(SECOND));
        }
        self.stop(seq);
        let j = self.jobs.get_mut(&seq).expect("job");
        j.job.phase = Phase::Pending;
        j.rec.runtime.queued_at = now;
        j.rec.runtime.grace_until = 0;
        let mut reason = why.to_string();
        if lost > 0 {
            reason += &format!("; lost {} of work since its last checkpoint", secs(lost));
        }
        self.record(seq, QUEUED, Some("requeued"), reason);
    }

    /// Takes up a change to a job's place in its team's queue: its class
    /// (any unfinished job, as the Go build's `SetClass`) and, while it
    /// waits, its queue key. The engine's job is replaced by a copy (which
    /// the scheduler indexes afresh: it caches what it knows of a job by
    /// the job's mark) rather than changed under the scheduler's cache.
    /// Returns whether anything changed.
    pub fn change_queue_place(&mut self, seq: i64, class: Class, queue_key: Nanos) -> bool {
        let Some(j) = self.jobs.get_mut(&seq) else {
            return false;
        };
        if j.done {
            return false;
        }
        let pending = j.job.phase == Phase::Pending;
        let new_key = pending && j.job.submitted != queue_key;
        if j.job.spec.class == class && !new_key {
            return false;
        }
        let mut job = j.job.clone();
        job.spec.class = class;
        if pending {
            job.submitted = queue_key;
        }
        j.job = job;
        j.rec.class = class;
        j.rec.queue_key = queue_key;
        true
    }

    /// Cancels an unfinished job at once (a cancel request), releasing
    /// what it holds.
    pub fn cancel(&mut self, seq: i64, by: &str) {
        if self.jobs.get(&seq).is_none_or(|j| j.done) {
            return;
        }
        self.stop(seq);
        self.finish(seq, CANCELLED, format!("cancelled by {by}"));
    }

    /// Puts a job that holds resources back in its queue at once (a
    /// requeue request), as a preemption does after its grace period. A
    /// queued job stays as it is. Either way the request is done.
    pub fn requeue(&mut self, seq: i64, by: &str) {
        let Some(j) = self.jobs.get_mut(&seq) else {
            return;
        };
        if j.done {
            return;
        }
        j.requeue_done = true;
        self.dirty.insert(seq);
        let holds = j.job.placed.iter().any(Option::is_some) || j.job.phase != Phase::Pending;
        if holds || j.rec.state != QUEUED {
            self.requeue_now(seq, &format!("requeued by {by}"));
        }
    }

    fn reconfigure(&mut self, rc: &Reconfig) {
        // An unknown node or GPU is among repartition's errors, named.
        if let Err(e) = self.st.repartition(&rc.node, rc.gpu, rc.mig, &rc.layout) {
            tracing::error!(node = %rc.node, gpu = rc.gpu, error = %e, "reconfigure");
            return;
        }
        if let Some(m) = &self.metrics {
            m.reconfigured();
        }
        let done = self.now + self.reconfig_delay;
        if rc.add {
            // New instances in free space: the GPU keeps working; a task
            // placed on a new instance waits until it is ready.
            self.adding.insert((rc.node.clone(), rc.gpu as i32), done);
            return;
        }
        if let Err(e) = self.st.cordon(&rc.node, rc.gpu, true) {
            tracing::error!(node = %rc.node, gpu = rc.gpu, error = %e, "cordon");
            return;
        }
        self.after(
            done,
            Timer::Uncordon {
                node: rc.node.clone(),
                gpu: rc.gpu,
                for_job: rc.for_job.clone(),
            },
        );
    }

    /// Moves a job to `state` with an event (named `event` when it is not
    /// the state itself, as "requeued").
    fn record(&mut self, seq: i64, state: &str, event: Option<&str>, reason: String) {
        let j = self.jobs.get_mut(&seq).expect("job");
        j.rec.state = state.to_string();
        j.rec.reason = reason.clone();
        self.events.push(EventRow {
            job_seq: seq,
            at: self.now,
            state: event.unwrap_or(state).to_string(),
            reason,
        });
        self.dirty.insert(seq);
    }

    /// Takes what changed since the last call: the rows to write. Finished
    /// jobs leave the world here.
    pub fn take_changes(&mut self) -> Changes {
        let mut jobs = Vec::new();
        for seq in std::mem::take(&mut self.dirty) {
            let Some(j) = self.jobs.get_mut(&seq) else {
                continue;
            };
            jobs.push(JobUpdate {
                seq,
                state: j.rec.state.clone(),
                reason: j.rec.reason.clone(),
                started: j.rec.started,
                finished: j.finished,
                attempts: j.rec.attempts,
                runtime: j.rec.runtime.clone(),
                requeue_done: std::mem::take(&mut j.requeue_done),
            });
            if j.done {
                let id = j.rec.id.clone();
                self.jobs.remove(&seq);
                self.seq_of.remove(&id);
            }
        }
        // Instances added ahead of demand that are ready by now.
        let now = self.now;
        self.adding.retain(|_, &mut at| at > now);
        Changes {
            jobs,
            events: std::mem::take(&mut self.events),
            holds: std::mem::take(&mut self.holds),
        }
    }
}

/// What a preempted job loses: the work since its last checkpoint. A
/// production service is stateless and loses nothing; other work without
/// checkpoints loses the whole run (Go's `lostWork`).
fn lost_work(every: Nanos, class: Class, ran: Nanos) -> Nanos {
    if every > 0 {
        ran % every
    } else if class == Class::Production {
        0
    } else {
        ran
    }
}

/// A duration as whole seconds ("90s").
fn secs(d: Nanos) -> String {
    format!("{}s", d / SECOND)
}

/// Where a job's tasks are: "h100-0 [gpu0 3g.40gb@0, gpu1 1000m]".
fn placement_text(placed: &[Option<Assignment>]) -> String {
    let mut parts: Vec<String> = placed
        .iter()
        .flatten()
        .map(|a| {
            let grants: Vec<String> = a
                .grants
                .iter()
                .map(|g| match &g.slice {
                    Some(p) => format!("gpu{} {p}", g.gpu),
                    None => format!("gpu{} {}m", g.gpu, g.milli),
                })
                .collect();
            format!("{} [{}]", a.node, grants.join(", "))
        })
        .collect();
    if parts.len() > 4 {
        let more = parts.len() - 4;
        parts.truncate(4);
        parts.push(format!("and {more} more"));
    }
    parts.join(", ")
}
