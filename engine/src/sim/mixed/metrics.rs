//! What the world measures (Go's `metrics.go`; docs/metrics.md defines
//! every field): utilization integrated over time, waits, the guarantee's
//! two violation clocks, Jain's fairness, preemptions and their lost work,
//! idle GPU-hours by cause, and the owed episodes.
//!
//! Every float is computed in the Go build's order of operations and
//! iteration (the jobs in order of arrival, the teams in the scenario's
//! order), so the results are equal bit for bit.

use std::collections::BTreeMap;

use serde::Serialize;

use super::world::{Owe, WJob, World};
use crate::cluster::{Assignment, Node, State};
use crate::placement::{grant_share, need};
use crate::scenario::duration::{MINUTE, seconds};
use crate::sched::{Nanos, Phase, READ_AHEAD, Team, WaitReason};
use crate::workload::{Class, Kind, Task};

/// One scheduler's run. docs/metrics.md defines every field; the JSON
/// names and order are the Go build's. A statistic with no sample is
/// `None` (`null`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunResult {
    pub scenario: String,
    pub scheduler: String,
    pub useful_utilization: f64,
    pub allocated_utilization: f64,
    pub oom_events: usize,
    /// By class name.
    #[serde(rename = "wait_p95_s")]
    pub wait_p95: BTreeMap<String, f64>,
    /// Of the finished jobs; none when no job finished.
    #[serde(rename = "jct_p50_s")]
    pub jct_p50: Option<f64>,
    #[serde(rename = "guarantee_violation_s")]
    pub guarantee_violation: f64,
    /// `guarantee_violation` with each job's 60 s plus grace counted from
    /// the moment it became owed, not from its queueing.
    #[serde(rename = "guarantee_violation_owed_s")]
    pub guarantee_violation_owed: f64,
    /// None without a sample (never every team backlogged).
    pub jain_fairness: Option<f64>,
    /// The samples `jain_fairness` averages: those with every team
    /// backlogged.
    pub jain_samples: usize,
    pub preemptions: usize,
    pub lost_gpu_hours: f64,
    /// `wait_p95` over the waits that began with the team owed the job's
    /// demand.
    #[serde(rename = "wait_p95_within_guarantee_s")]
    pub wait_p95_within_guarantee: BTreeMap<String, f64>,
    /// The GPU the stream asks for over the horizon, as a share of the
    /// cluster's; the same under every scheduler.
    pub offered_load: f64,
    /// The unallocated GPU-hours by why they stood unallocated.
    pub idle_gpu_hours: BTreeMap<String, f64>,
    /// Jobs that waited past the guarantee's 60 s plus grace by the owed
    /// clock, once per episode, by "class: wait reason".
    pub owed_late_jobs: BTreeMap<String, usize>,
    /// Of them, those behind their team's own claims.
    #[serde(rename = "owed_late_behind_own_team")]
    pub owed_late_behind_team: usize,
    /// The owed episodes of waiting jobs, those over 60 s plus the grace,
    /// and their distribution (none without an episode).
    pub owed_waits: usize,
    pub owed_waits_late: usize,
    #[serde(rename = "owed_wait_p50_s")]
    pub owed_wait_p50: Option<f64>,
    #[serde(rename = "owed_wait_p99_s")]
    pub owed_wait_p99: Option<f64>,
    #[serde(rename = "owed_wait_max_s")]
    pub owed_wait_max: Option<f64>,
    pub mig_reconfigurations: usize,
    pub migrations: usize,
    pub jobs: usize,
    pub completed: usize,
    pub gpus: usize,
    /// For the charts: the samples, the horizon, the teams (in the
    /// scenario's order, which each sample's `teams` follows) and each
    /// team's entitlement in GPUs.
    #[serde(skip)]
    pub timeline: Vec<Sample>,
    #[serde(skip)]
    pub horizon: Nanos,
    #[serde(skip)]
    pub teams: Vec<String>,
    #[serde(skip)]
    pub entitlement: BTreeMap<String, f64>,
}

/// The state at one instant, for the charts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub t: Nanos,
    /// GPUs needed by running work, and held.
    pub useful: f64,
    pub alloc: f64,
    /// GPUs held per team, in the order of `RunResult::teams`.
    pub teams: Vec<f64>,
    pub all_backlogged: bool,
    pub teams_normalised: Vec<f64>,
}

/// The causes of unallocated GPU that are not a wait reason of the engine.
pub const IDLE_NO_WORK: &str = "no work waiting";
pub const IDLE_TOO_BIG: &str = "every waiting job needs more GPU than stands free";
pub const IDLE_NO_CYCLE: &str = "waiting work not yet looked at";

/// A stretch of time, from and to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub from: Nanos,
    pub to: Nanos,
}

/// A fall of a team's holdings: when, and what it held after.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Drop {
    pub at: Nanos,
    pub held: f64,
}

/// The unallocated GPU-seconds of one cause; `charged` once some were
/// (a cause in the result has been charged).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct IdleCause {
    pub cause: String,
    pub sec: f64,
    pub charged: bool,
}

/// The running sums.
#[derive(Debug, Default)]
pub(super) struct Metrics {
    pub gpus: f64,
    pub last: Nanos,
    /// GPUs that running work needs now, and that are held now.
    pub useful_now: f64,
    pub alloc_now: f64,
    pub migrations: usize,
    /// GPU-seconds.
    pub useful_int: f64,
    pub alloc_int: f64,
    pub oom: usize,
    pub preemptions: usize,
    pub reconfigs: usize,
    pub lost_gpu_sec: f64,
    /// GPU milli, by team position.
    pub entitle: Vec<f64>,
    /// Per team (by position), the stretches of violation since the last
    /// check, by the queueing clock and by the owed clock; `violating`,
    /// whether the team was in violation at the last check (for the
    /// trace).
    pub spans: Vec<Vec<Span>>,
    pub spans_owed: Vec<Vec<Span>>,
    pub violating: Vec<bool>,
    pub last_check: Nanos,
    pub violation_s: f64,
    pub violation_owed_s: f64,
    /// What each team holds (GPU milli, by position), kept as tasks are
    /// placed and released; `drops` are the moments its holdings fell
    /// since the last check, with what it held then: a waiting job becomes
    /// owed at the first fall after which it fits in what its team is
    /// owed.
    pub held: Vec<f64>,
    pub drops: Vec<Vec<Drop>>,
    pub jain: Vec<f64>,
    pub timeline: Vec<Sample>,
    /// Why GPUs stand unallocated as the last cycle left them (a position
    /// in `idle`), and the unallocated GPU-seconds by cause, in the order
    /// the causes were first met.
    pub idle_cause: usize,
    pub idle: Vec<IdleCause>,
    /// Jobs past the owed limit, by class and wait reason, and those of
    /// them behind their team's own claims.
    pub owed_late: BTreeMap<String, usize>,
    pub owed_late_behind: usize,
    /// The owed episodes' waits (s).
    pub owed_waits: Vec<f64>,
}

impl Metrics {
    /// The sums of a run on `st` with `teams`, at time 0.
    pub fn new(st: &State, teams: &[Team]) -> Metrics {
        let n = teams.len();
        let mut m = Metrics {
            spans: vec![Vec::new(); n],
            spans_owed: vec![Vec::new(); n],
            violating: vec![false; n],
            held: vec![0.0; n],
            drops: vec![Vec::new(); n],
            idle: vec![IdleCause {
                cause: IDLE_NO_WORK.to_string(),
                sec: 0.0,
                charged: false,
            }],
            ..Metrics::default()
        };
        for node in st.nodes() {
            m.gpus += node.gpus().len() as f64;
        }
        // Entitlement: the guarantee plus a weight-share of what
        // guarantees leave over.
        let (mut guaranteed, mut weights) = (0.0, 0.0);
        for t in teams {
            guaranteed += t.guarantee as f64;
            weights += go_max(t.weight, 0.0);
        }
        let rest = go_max(m.gpus * 1000.0 - guaranteed, 0.0);
        for t in teams {
            let mut e = t.guarantee as f64;
            if weights > 0.0 {
                e += rest * go_max(t.weight, 0.0) / weights;
            }
            m.entitle.push(e);
        }
        m
    }

    /// Integrates the current rates up to now; every change calls it first.
    pub fn advance(&mut self, now: Nanos) {
        if now <= self.last {
            return;
        }
        let dt = seconds(now - self.last);
        self.useful_int += self.useful_now * dt;
        self.alloc_int += self.alloc_now * dt;
        let idle = self.gpus - self.alloc_now;
        if idle > 1e-9 {
            let c = &mut self.idle[self.idle_cause];
            c.sec += idle * dt;
            c.charged = true;
        }
        self.last = now;
    }

    /// Makes `cause` the current idle cause.
    fn set_idle_cause(&mut self, cause: &str) {
        if let Some(i) = self.idle.iter().position(|c| c.cause == cause) {
            self.idle_cause = i;
            return;
        }
        self.idle.push(IdleCause {
            cause: cause.to_string(),
            sec: 0.0,
            charged: false,
        });
        self.idle_cause = self.idle.len() - 1;
    }

    /// Notes that `team` was in violation from `from` to `to`, within the
    /// stretch since the last check.
    fn add_span(spans: &mut [Vec<Span>], last_check: Nanos, team: usize, from: Nanos, to: Nanos) {
        let from = from.max(last_check);
        if to > from {
            spans[team].push(Span { from, to });
        }
    }

    /// When j, waiting, became owed since `prev` (its queueing or the last
    /// look, whichever is later): at its queueing if it fitted then in
    /// what its team is owed, else at the first fall of its team's
    /// holdings after which it fitted, as only a fall makes a waiting job
    /// fit; none when neither happened.
    pub fn owed_after(&self, j: &Owe, prev: Nanos, guarantee: f64) -> Option<Nanos> {
        if j.queued_at > prev && j.queued_at >= j.outgrown_at && j.within {
            return Some(j.queued_at);
        }
        let team = j.team?;
        let from = prev.max(j.queued_at).max(j.outgrown_at);
        self.drops[team]
            .iter()
            .find(|d| d.at >= from && d.held + j.milli as f64 <= guarantee + 1e-6)
            .map(|d| d.at)
    }

    /// `owed_after` for a job found to fit at a look. Until 2026-12-02 it
    /// was the first fall since the last look, whether or not the job
    /// fitted after it.
    pub fn owed_from(&self, j: &Owe, prev: Nanos, guarantee: f64) -> Nanos {
        if let Some(at) = self.owed_after(j, prev, guarantee) {
            return at;
        }
        // No such fall seen (rounding): the earliest it may have been.
        let from = prev.max(j.queued_at).max(j.outgrown_at);
        if let Some(team) = j.team
            && let Some(d) = self.drops[team].iter().find(|d| d.at >= from)
        {
            return d.at;
        }
        from
    }

    /// Notes that a job of `team` gave back what it held, `share`, now.
    pub fn released(&mut self, team: Option<usize>, share: f64, now: Nanos) {
        let Some(team) = team else {
            return;
        };
        if share <= 0.0 {
            return;
        }
        self.held[team] -= share * 1000.0;
        self.drops[team].push(Drop {
            at: now,
            held: self.held[team],
        });
    }
}

/// Whether a task got less GPU memory than its peak.
pub(super) fn oom(n: &Node, a: &Assignment, t: &Task) -> bool {
    if t.gpu.kind != Kind::MemoryProfile || a.grants.is_empty() {
        return false;
    }
    let mut got: i64 = 0;
    for g in &a.grants {
        let Some(gpu) = usize::try_from(g.gpu).ok().and_then(|i| n.gpus().get(i)) else {
            continue;
        };
        let model = gpu.model();
        if let Some(slice) = &g.slice {
            if let Ok(p) = model.profile(&slice.profile) {
                got += p.memory_mib;
            }
            continue;
        }
        got += model.memory_mib * i64::from(g.milli) / 1000;
    }
    got < t.gpu.peak_memory_mib
}

/// How long a job within its team's guarantee may wait: 60 s plus the
/// victims' grace period.
pub(super) fn owed_limit(w: &World<'_>) -> Nanos {
    MINUTE + w.sch.config().grace
}

/// Whether j's team's guarantee, served to the team's waiting claims in
/// the order the scheduler serves them (a higher class first, then the
/// older), is taken by those ahead of j before j's turn: from what the
/// guarantee leaves over `held` (the GPU milli the team holds), each
/// claim ahead that fits in what is left takes its part; one that does
/// not fit takes nothing, and those behind it go around it. The owed
/// clock counts j owed when held plus j fits, each job alone: this is how
/// often it charges the scheduler for serving the team's own claims
/// before j.
///
/// `pending` is the world's pending list, in arrival order as the active
/// jobs are (Go goes through the active jobs and reads each one's phase).
pub(super) fn behind_own_team(
    jobs: &[WJob],
    owe: &[Owe],
    pending: &[usize],
    j: usize,
    held: f64,
    guarantee: f64,
) -> bool {
    let me = &jobs[j];
    let mut ahead: Vec<usize> = Vec::new();
    for &v in pending {
        let o = &jobs[v];
        if v == j || owe[v].team != owe[j].team {
            continue;
        }
        let (oc, mc) = (o.job.spec.class, me.job.spec.class);
        if oc > mc || oc == mc && o.job.submitted < me.job.submitted {
            ahead.push(v);
        }
    }
    ahead.sort_by(|&a, &b| {
        let (a, b) = (&jobs[a].job, &jobs[b].job);
        b.spec
            .class
            .cmp(&a.spec.class)
            .then(a.submitted.cmp(&b.submitted))
    });
    let mut room = guarantee - held;
    for v in ahead {
        let m = owe[v].milli as f64;
        if m <= room {
            room -= m;
        }
    }
    owe[j].milli as f64 > room
}

/// How many waiting jobs give a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReasonCount<'a> {
    pub reason: &'a str,
    pub n: usize,
}

/// Adds one for `reason`. The list is searched in turn while short; only
/// invalid jobs' own messages make it long, and from 64 reasons on it is
/// kept sorted and searched by halves. (Hashing a reason for each waiting
/// job that fits, after every cycle, was a fiftieth of a week-1000 run in
/// the Go build.)
pub(super) fn count_reason<'a>(counts: &mut Vec<ReasonCount<'a>>, reason: &'a str) {
    const SHORT: usize = 64;
    if counts.len() < SHORT {
        // Most reasons are the scheduler's static texts: equal by address.
        if let Some(c) = counts
            .iter_mut()
            .find(|c| std::ptr::eq(c.reason, reason) || c.reason == reason)
        {
            c.n += 1;
            return;
        }
        counts.push(ReasonCount { reason, n: 1 });
        if counts.len() == SHORT {
            counts.sort_by(|a, b| a.reason.cmp(b.reason));
        }
        return;
    }
    match counts.binary_search_by(|c| c.reason.cmp(reason)) {
        Ok(i) => counts[i].n += 1,
        Err(i) => counts.insert(i, ReasonCount { reason, n: 1 }),
    }
}

impl World<'_> {
    /// The GPU milli each team holds, by position in `teams`.
    pub(super) fn team_usage(&self) -> Vec<f64> {
        if let Some(u) = &*self.lists.usage.borrow() {
            return u.clone();
        }
        let mut u = vec![0.0; self.teams.len()];
        for (i, t) in self.lists.team.iter().enumerate() {
            if let Some(t) = *t {
                u[t] += self.lists.share[i] * 1000.0;
            }
        }
        *self.lists.usage.borrow_mut() = Some(u.clone());
        u
    }

    /// The reason the last cycle that looked at j gave for its wait: a
    /// light cycle's since the last full one, else the full one's; none
    /// when neither looked at it.
    fn last_reason(&self, j: usize) -> String {
        self.why[j]
            .current(self.full_cycles)
            .map_or(String::new(), |r| r.as_str().to_string())
    }

    /// Takes why GPUs stand unallocated after a cycle, free GPUs being
    /// free: no work waits; every waiting job asks for more GPU than stands
    /// free (a gang drains the nodes it needs); or else the reason that
    /// most of the waiting jobs that would fit by size give (ties: the
    /// first reason in name order). By size only: a job that fits in the
    /// free GPU in total may still find no node, and then says so.
    fn take_idle_cause(&mut self) {
        let free = self.metrics.gpus - self.metrics.alloc_now;
        if free <= 1e-9 {
            // Nothing stands idle: the cause counts nothing.
            self.metrics.set_idle_cause(IDLE_NO_WORK);
            return;
        }
        let fit = |milli: i64| milli as f64 <= free * 1000.0 + 1e-6;
        let mut fits: Vec<ReasonCount<'_>> = Vec::new();
        for (i, &j) in self.lists.pending.iter().enumerate() {
            if let Some(&ahead) = self.lists.pending.get(i + READ_AHEAD) {
                std::hint::black_box(self.why[ahead].full_at);
            }
            if !fit(self.lists.milli[i]) {
                continue;
            }
            let reason = self.why[j]
                .current(self.full_cycles)
                .map_or(IDLE_NO_CYCLE, WaitReason::as_str);
            count_reason(&mut fits, reason);
        }
        let cause = if self.lists.pending.is_empty() {
            IDLE_NO_WORK
        } else if fits.is_empty() {
            IDLE_TOO_BIG
        } else {
            let (mut best, mut most) = ("", 0);
            for f in &fits {
                if f.n > most || f.n == most && f.reason < best {
                    (best, most) = (f.reason, f.n);
                }
            }
            best
        };
        self.metrics.set_idle_cause(cause);
    }

    /// Counts a task's held GPU and checks its memory.
    pub(super) fn metrics_placed(&mut self, j: usize, task: usize, a: &Assignment) {
        let now = self.now();
        self.metrics.advance(now);
        let n = self
            .st
            .node_by_name(&a.node)
            .expect("a task placed on a node of the cluster");
        let team = self.owe[j].team;
        for g in &a.grants {
            let share = grant_share(n, g);
            self.metrics.alloc_now += share;
            self.jobs[j].held_share += share;
            if let Some(t) = team {
                self.metrics.held[t] += share * 1000.0;
            }
        }
        if oom(n, a, &self.jobs[j].job.spec.tasks[task]) {
            self.metrics.oom += 1;
        }
        self.held_changed(j);
    }

    /// What a complete job's tasks need.
    fn job_need(&self, j: usize) -> f64 {
        let job = &self.jobs[j];
        let mut total = 0.0;
        for (i, a) in job.job.placed.iter().enumerate() {
            let Some(a) = a else { continue };
            let n = self.st.node_by_name(&a.node).expect("a placed task's node");
            total += need(n, a, &job.job.spec.tasks[i]);
        }
        total
    }

    /// What a job's placed tasks hold.
    pub(super) fn job_held(&self, j: usize) -> f64 {
        let mut total = 0.0;
        for a in self.jobs[j].job.placed.iter().flatten() {
            let n = self.st.node_by_name(&a.node).expect("a placed task's node");
            for g in &a.grants {
                total += grant_share(n, g);
            }
        }
        total
    }

    /// Before a running job stops (departure or end of grace): its useful
    /// GPU stops counting, its held GPU is released.
    pub(super) fn metrics_progress(&mut self, j: usize) {
        let now = self.now();
        self.metrics.advance(now);
        if self.jobs[j].run_since >= 0 {
            self.metrics.useful_now -= self.job_need(j);
        }
        self.metrics.alloc_now -= self.job_held(j);
    }

    /// A job starts running: its tasks' need counts.
    pub(super) fn metrics_running(&mut self, j: usize) {
        let now = self.now();
        self.metrics.advance(now);
        self.metrics.useful_now += self.job_need(j);
    }

    /// Work lost to a preemption.
    pub(super) fn metrics_lost(&mut self, j: usize, lost: Nanos) {
        self.metrics.lost_gpu_sec += seconds(lost) * self.job_held(j);
    }

    /// Called when j starts: if it was owed while it waited, its wait since
    /// it became owed is recorded (`owed_waits`) and the late part counts
    /// up to now. Jobs served between two checks were charged up to the
    /// next check until 2026-12-02, and a wait that crossed the line and
    /// ended between two checks went unseen: the measured violation
    /// depended on how often the scheduler ran a full cycle.
    pub(super) fn served(&mut self, j: usize) {
        let Some(team) = self.owe[j].team else {
            return;
        };
        if !self.owe[j].owed {
            // Not owed at the last look, or queued since: owed if it
            // fitted at its queueing or after a fall since.
            let guarantee = self.teams[team].guarantee as f64;
            let Some(at) =
                self.metrics
                    .owed_after(&self.owe[j], self.metrics.last_check, guarantee)
            else {
                return;
            };
            self.owe[j].owed_since = at;
        }
        let (now, limit) = (self.now(), owed_limit(self));
        self.end_owed_episode(j, team, now, limit);
        self.owe[j].owed = false;
        self.owe[j].owed_late = false;
    }

    /// Records an owed episode of j ending now: its wait, and the late part
    /// on both clocks; the late episode counted if it was not yet.
    fn end_owed_episode(&mut self, j: usize, team: usize, now: Nanos, limit: Nanos) {
        let Owe {
            owed_since,
            queued_at,
            owed_late: late,
            ..
        } = self.owe[j];
        let m = &mut self.metrics;
        m.owed_waits.push(seconds(now - owed_since));
        Metrics::add_span(
            &mut m.spans,
            m.last_check,
            team,
            (queued_at + limit).max(owed_since),
            now,
        );
        Metrics::add_span(
            &mut m.spans_owed,
            m.last_check,
            team,
            owed_since + limit,
            now,
        );
        if now - owed_since > limit && !late {
            let why = self.last_reason(j);
            self.late_episode(j, now, &why);
        }
    }

    /// Ends, after a cycle's starts, the owed episode of each waiting job
    /// that no longer fits in what its team is owed: the team's other work
    /// took the room. The wait until now is recorded and charged as a
    /// served one would be. Until 2026-12-03 such an episode ended at the
    /// next look, charged only up to the look before.
    pub(super) fn outgrown(&mut self) {
        let mut usage: Option<Vec<f64>> = None;
        let (now, limit) = (self.now(), owed_limit(self));
        let mut i = 0;
        while i < self.lists.pending.len() {
            let (j, milli) = (self.lists.pending[i], self.lists.milli[i]);
            let Some(team) = self.lists.pending_team[i] else {
                i += 1;
                continue;
            };
            i += 1;
            // The team's use, taken once. Go reads the job's phase first;
            // a job of the pending list is pending (`check_lists` holds
            // the world to it), and reading it was a cache miss per job.
            let usage = usage.get_or_insert_with(|| self.team_usage());
            let guarantee = self.teams[team].guarantee as f64;
            if usage[team] + milli as f64 <= guarantee {
                continue;
            }
            if !self.owe[j].owed {
                let Some(at) =
                    self.metrics
                        .owed_after(&self.owe[j], self.metrics.last_check, guarantee)
                else {
                    continue;
                };
                self.owe[j].owed_since = at;
            }
            self.end_owed_episode(j, team, now, limit);
            let o = &mut self.owe[j];
            o.owed = false;
            o.owed_late = false;
            o.outgrown_at = now;
        }
    }

    /// Counts j past the owed limit, once per episode: the first thing to
    /// look for in a trace when the owed clock is not 0.
    fn late_episode(&mut self, j: usize, now: Nanos, why: &str) {
        self.owe[j].owed_late = true;
        let why = if why.is_empty() { IDLE_NO_CYCLE } else { why };
        let class = self.jobs[j].job.spec.class;
        *self
            .metrics
            .owed_late
            .entry(format!("{class}: {why}"))
            .or_insert(0) += 1;
        let team = self.owe[j].team.expect("a late job has a team");
        let guarantee = self.teams[team].guarantee;
        let held = self.team_usage()[team];
        let mut behind = "";
        if behind_own_team(
            &self.jobs,
            &self.owe,
            &self.lists.pending,
            j,
            held,
            guarantee as f64,
        ) {
            self.metrics.owed_late_behind += 1;
            behind = " (behind its team's own claims)";
        }
        if self.tracing() {
            let o = &self.owe[j];
            let line = format!(
                "owed violation {}: {} ({}, {} milli) owed for {:.0}s, queued {:.0}s, team guarantee {}: {}{}",
                self.teams[team].name,
                self.jobs[j].id(),
                class,
                o.milli,
                seconds(now - o.owed_since),
                seconds(now - o.queued_at),
                guarantee,
                why,
                behind
            );
            self.tracef(format_args!("{line}"));
        }
    }

    /// After each full cycle: charges guarantee violations since the last
    /// look, then looks again. A team is in violation while it holds less
    /// than its guarantee and has a job that fits in what it is still
    /// owed, waiting longer than 60 s plus the grace period: since its
    /// queueing (`spans`), or since it became owed (`spans_owed`).
    /// With `reasons`, the late episodes found take their wait reason from
    /// the cycle's decision, which the world keeps as `self.reasons`; at
    /// the end of the horizon there is none.
    pub(super) fn check(&mut self, reasons: bool, now: Nanos) {
        let prev = self.metrics.last_check;
        let usage = self.team_usage();
        let limit = owed_limit(self);
        // A job that left the queue since the last look is owed nothing
        // now (and still waits, in the loop below, if it came back since).
        for k in 0..self.lists.left.len() {
            let j = self.lists.left[k];
            if self.jobs[j].phase() != Phase::Pending {
                self.owe[j].owed = false;
                self.owe[j].owed_late = false;
            }
        }
        self.lists.left.clear();
        for k in 0..self.lists.pending.len() {
            let j = self.lists.pending[k];
            let Some(team) = self.owe[j].team else {
                continue;
            };
            let guarantee = self.teams[team].guarantee as f64;
            // Go reads the job's phase too; a job of the pending list is
            // pending (`check_lists`).
            if usage[team] + self.owe[j].milli as f64 > guarantee {
                self.owe[j].owed = false;
                self.owe[j].owed_late = false;
                continue;
            }
            if !self.owe[j].owed {
                let since = self.metrics.owed_from(&self.owe[j], prev, guarantee);
                self.owe[j].owed = true;
                self.owe[j].owed_since = since;
            }
            let (owed_since, queued_at) = (self.owe[j].owed_since, self.owe[j].queued_at);
            if now - owed_since > limit {
                if !self.owe[j].owed_late {
                    let why = if reasons {
                        self.why[j]
                            .last_full(self.full_cycles)
                            .map_or(String::new(), |r| r.as_str().to_string())
                    } else {
                        String::new()
                    };
                    self.late_episode(j, now, &why);
                }
                let m = &mut self.metrics;
                Metrics::add_span(
                    &mut m.spans_owed,
                    m.last_check,
                    team,
                    owed_since + limit,
                    now,
                );
            }
            if now - queued_at > limit {
                let m = &mut self.metrics;
                Metrics::add_span(
                    &mut m.spans,
                    m.last_check,
                    team,
                    (queued_at + limit).max(owed_since),
                    now,
                );
            }
        }
        for (i, &used) in usage.iter().enumerate() {
            let late = !self.metrics.spans[i].is_empty();
            if late && !self.metrics.violating[i] && self.tracing() {
                let line = format!(
                    "violation {}: team holds {:.0} of {}",
                    self.teams[i].name, used, self.teams[i].guarantee
                );
                self.tracef(format_args!("{line}"));
            }
            let m = &mut self.metrics;
            m.violating[i] = late;
            m.violation_s += seconds(covered(&mut m.spans[i]));
            m.violation_owed_s += seconds(covered(&mut m.spans_owed[i]));
            m.spans[i].clear();
            m.spans_owed[i].clear();
        }
        self.metrics.last_check = now;
        for (i, &used) in usage.iter().enumerate() {
            self.metrics.drops[i].clear();
            self.metrics.held[i] = used; // no drift from the sums kept between looks
        }
        self.idle_at(now);
    }

    /// Charges the unallocated time up to now to the cause the last cycle
    /// left, then takes the cause this one leaves.
    pub(super) fn idle_at(&mut self, now: Nanos) {
        self.metrics.advance(now);
        self.take_idle_cause();
    }

    /// Records the timeline and, while every team has work waiting, Jain's
    /// fairness of the teams' entitlement-normalised shares.
    pub(super) fn sample(&mut self) {
        let now = self.now();
        self.metrics.advance(now);
        let usage = self.team_usage();
        // The pending list's teams: the active jobs that are pending.
        let mut backlogged = vec![false; self.teams.len()];
        for t in self.lists.pending_team.iter().flatten() {
            backlogged[*t] = true;
        }
        let mut s = Sample {
            t: now,
            useful: self.metrics.useful_now,
            alloc: self.metrics.alloc_now,
            teams: Vec::with_capacity(self.teams.len()),
            all_backlogged: false,
            teams_normalised: Vec::with_capacity(self.teams.len()),
        };
        let mut all = !self.teams.is_empty();
        let (mut sum, mut sq) = (0.0, 0.0);
        for k in 0..self.teams.len() {
            s.teams.push(usage[k] / 1000.0);
            let mut x = 0.0;
            let e = self.metrics.entitle[k];
            if e > 0.0 {
                x = usage[k] / e;
            }
            s.teams_normalised.push(x);
            sum += x;
            sq += x * x;
            if !backlogged[k] {
                all = false;
            }
        }
        s.all_backlogged = all;
        if self.tracing() {
            self.trace_sample();
        }
        if all && sq > 0.0 {
            self.metrics
                .jain
                .push(sum * sum / (self.teams.len() as f64 * sq));
        }
        self.metrics.timeline.push(s);
    }

    /// The trace's lines of a sample: each node's MIG and busy GPUs, and
    /// the cluster's GPUs by state.
    fn trace_sample(&mut self) {
        let (mut mig_busy, mut mig_idle, mut whole_busy, mut whole_idle, mut cordoned) =
            (0, 0, 0, 0, 0);
        let mut per = String::new();
        for n in self.st.nodes() {
            let (mut mig, mut busy) = (0, 0);
            for g in n.gpus() {
                if g.cordoned() {
                    cordoned += 1;
                } else if g.mig() && g.idle() {
                    mig_idle += 1;
                } else if g.mig() {
                    mig_busy += 1;
                } else if g.idle() {
                    whole_idle += 1;
                } else {
                    whole_busy += 1;
                }
                if g.mig() {
                    mig += 1;
                }
                if !g.idle() {
                    busy += 1;
                }
            }
            per += &format!(" {mig}/{busy}");
        }
        let pending = self
            .active
            .iter()
            .filter(|&&j| self.jobs[j].phase() == Phase::Pending)
            .count();
        self.tracef(format_args!("nodes mig/busy:{per}"));
        let (useful, alloc) = (self.metrics.useful_now, self.metrics.alloc_now);
        self.tracef(format_args!(
            "sample useful={useful:.1} alloc={alloc:.1} gpus: mig-busy={mig_busy} mig-idle={mig_idle} whole-busy={whole_busy} whole-idle={whole_idle} cordoned={cordoned} pending={pending}"
        ));
    }

    /// The last look, at the end of the horizon, where the world's clock is
    /// already at the first event past it.
    pub(super) fn finish_metrics(&mut self, end: Nanos) {
        self.check(false, end);
        // Jobs owed and still waiting at the end: their wait so far, or a
        // scheduler that never serves a claim would look fast.
        for k in 0..self.lists.pending.len() {
            let j = self.lists.pending[k];
            if self.owe[j].owed && self.jobs[j].phase() == Phase::Pending {
                let wait = seconds(end - self.owe[j].owed_since);
                self.metrics.owed_waits.push(wait);
            }
        }
    }

    /// The run's result.
    pub(super) fn metrics_result(&self) -> RunResult {
        let m = &self.metrics;
        let horizon = seconds(self.duration);
        let mut r = RunResult {
            scenario: self.name.clone(),
            scheduler: self.opt.scheduler.clone(),
            oom_events: m.oom,
            preemptions: m.preemptions,
            mig_reconfigurations: m.reconfigs,
            migrations: m.migrations,
            guarantee_violation: m.violation_s,
            guarantee_violation_owed: m.violation_owed_s,
            lost_gpu_hours: m.lost_gpu_sec / 3600.0,
            jobs: self.jobs.len(),
            gpus: m.gpus as usize,
            timeline: m.timeline.clone(),
            horizon: self.duration,
            teams: self.teams.iter().map(|t| t.name.clone()).collect(),
            owed_late_jobs: m.owed_late.clone(),
            owed_late_behind_team: m.owed_late_behind,
            ..RunResult::default()
        };
        let limit = seconds(owed_limit(self));
        r.owed_waits = m.owed_waits.len();
        let mut longest = 0.0;
        for &s in &m.owed_waits {
            if s > limit {
                r.owed_waits_late += 1;
            }
            longest = go_max(longest, s);
        }
        if !m.owed_waits.is_empty() {
            r.owed_wait_max = Some(longest);
        }
        r.owed_wait_p50 = percentile(&m.owed_waits, 50.0);
        r.owed_wait_p99 = percentile(&m.owed_waits, 99.0);
        for c in m.idle.iter().filter(|c| c.charged) {
            r.idle_gpu_hours.insert(c.cause.clone(), c.sec / 3600.0);
        }
        if horizon > 0.0 && m.gpus > 0.0 {
            r.useful_utilization = m.useful_int / horizon / m.gpus;
            r.allocated_utilization = m.alloc_int / horizon / m.gpus;
            r.offered_load = self.offered_gpu_seconds() / horizon / m.gpus;
        }
        for (t, e) in self.teams.iter().zip(&m.entitle) {
            r.entitlement.insert(t.name.clone(), e / 1000.0);
        }
        let mut waits: [Vec<f64>; 3] = Default::default();
        let mut within: [Vec<f64>; 3] = Default::default();
        let mut jct = Vec::new();
        for (j, o) in self.jobs.iter().zip(&self.owe) {
            if j.job.submitted > self.duration {
                continue;
            }
            let c = j.job.spec.class.index();
            waits[c].extend(j.waits.iter().map(|&d| seconds(d)));
            within[c].extend(j.waits_within.iter().map(|&d| seconds(d)));
            if !j.done && j.phase() == Phase::Pending {
                // Still waiting at the end: count the wait so far, or a
                // scheduler that never serves a class would look fast.
                let wait = seconds(self.duration - o.queued_at);
                waits[c].push(wait);
                if o.within {
                    within[c].push(wait);
                }
            }
            if j.done {
                r.completed += 1;
                jct.push(seconds(j.finish - j.job.submitted));
            }
        }
        for c in Class::ALL {
            if let Some(p) = percentile(&waits[c.index()], 95.0) {
                r.wait_p95.insert(c.to_string(), p);
            }
            if let Some(p) = percentile(&within[c.index()], 95.0) {
                r.wait_p95_within_guarantee.insert(c.to_string(), p);
            }
        }
        r.jct_p50 = percentile(&jct, 50.0);
        if !m.jain.is_empty() {
            let sum: f64 = m.jain.iter().fold(0.0, |s, v| s + v);
            r.jain_fairness = Some(sum / m.jain.len() as f64);
        }
        r.jain_samples = m.jain.len();
        r
    }

    /// The GPU-seconds the jobs arriving within the horizon ask for: each
    /// job's nominal GPU (whole GPUs, a MIG profile's compute slices, a
    /// memory profile's compute share) times its run time, cut at the
    /// horizon. Work lost to preemption is not counted, nor the larger
    /// slice a small service gets: useful utilization counts the slice, so
    /// it can pass the offered load.
    fn offered_gpu_seconds(&self) -> f64 {
        let mut total = 0.0;
        for (j, o) in self.jobs.iter().zip(&self.owe) {
            if j.arrival_at >= self.duration {
                continue;
            }
            let run = j.duration.min(self.duration - j.arrival_at);
            total += o.milli as f64 / 1000.0 * seconds(run);
        }
        total
    }
}

/// The time the spans cover, overlaps counted once; it sorts them.
pub(super) fn covered(spans: &mut [Span]) -> Nanos {
    spans.sort_by_key(|s| s.from);
    let (mut total, mut end) = (0, 0);
    for s in spans.iter() {
        if s.to <= end {
            continue;
        }
        total += s.to - s.from.max(end);
        end = s.to;
    }
    total
}

/// The nearest-rank percentile `p` of `xs`; none for no values.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let k = (p / 100.0 * s.len() as f64).ceil() as i64 - 1;
    let k = k.clamp(0, s.len() as i64 - 1) as usize;
    Some(s[k])
}

/// Go's built-in `max` of two floats: NaN if either is.
pub(super) fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}
