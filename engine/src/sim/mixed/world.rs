//! The world's state and its event loop (Go's `world.go`): jobs arrive,
//! cycles run (full ones coalesced, light ones for new arrivals at once),
//! timers fire when a MIG change is done, a grace period ends, a new
//! instance is ready or a moved replica's old place can go.

use rustc_hash::FxBuildHasher;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::lists::Lists;
use super::metrics::Metrics;
use super::{MixedError, Options, RunResult, Setup};
use crate::cluster::{Assignment, State};
use crate::gpu::Placement;
use crate::random::Rand;
use crate::scenario::duration::seconds;
use crate::sched::{self, Nanos, Phase, Scheduler, Team, WaitReason, Waiting};
use crate::sim::events::{Event, Kind, Queue};

/// A map looked up by job ID (never iterated), with the scheduler's cheap
/// hasher.
pub(super) type ById<V> = HashMap<Arc<str>, V, FxBuildHasher>;

/// The world's record of one job: the scheduler's view of it (`job`) and
/// what the world and its metrics keep beside it.
#[derive(Debug)]
pub(super) struct WJob {
    pub job: sched::Job,
    /// The arrival's run time and checkpoint interval.
    pub duration: Nanos,
    pub checkpoint_every: Nanos,
    pub arrival_at: Nanos,
    /// Run time left, lost work included.
    pub remaining: Nanos,
    /// When each task can run: its start, or later when a MIG instance had
    /// to be created for it.
    pub ready_at: Vec<Nanos>,
    /// When the job last became complete and ready; -1 when not running.
    pub run_since: Nanos,
    /// The old places of tasks moved elsewhere (migrations), still
    /// allocated until the new place is ready.
    pub moved: Vec<Assignment>,
    /// Bumps on every stop, so stale departures and grace timers are
    /// ignored.
    pub epoch: u64,
    /// Has ever run.
    pub started: bool,
    pub done: bool,
    pub finish: Nanos,
    pub first_run: Nanos,
    pub waits: Vec<Nanos>,
    /// The waits that began within the team's guarantee (`Owe::within`).
    pub waits_within: Vec<Nanos>,
    /// The last wait reason traced.
    pub last_reason: String,
    /// The GPU the job's placed tasks hold (grant shares).
    pub held_share: f64,
    /// In `World::changed`.
    pub listed: bool,
    /// Its arrival's number: the order of `World::active`.
    pub seq: usize,
}

/// What the metrics' passes over the waiting jobs read of a job, kept
/// apart from the job in a dense array by job (`World::owe`): the passes
/// after every cycle read it for every waiting job, and a job's own record
/// spans several cache lines (docs/mixed.md, "Simulation speed": the
/// passes over the jobs were bound by memory reads).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Owe {
    /// Its team's position in `World::teams` (none: a team the scenario
    /// does not list), and the GPU milli it asks for.
    pub team: Option<usize>,
    pub milli: i64,
    /// When it last entered the queue.
    pub queued_at: Nanos,
    /// When the metrics first saw it owed while it waits, without a break
    /// since (owed: it is set).
    pub owed_since: Nanos,
    /// When its last owed episode ended without its start, its team's
    /// other work having taken the room: a fall before it cannot begin a
    /// new one.
    pub outgrown_at: Nanos,
    pub owed: bool,
    /// Past 60 s + grace since `owed_since`: counted once.
    pub owed_late: bool,
    /// When it last entered the queue, its team's holdings plus its demand
    /// were within the team's guarantee.
    pub within: bool,
}

/// Why a job waits, as the cycles said, kept by job (`World::why`) so that
/// the passes after each cycle look no job up by its ID: the reason the
/// last full cycle gave, and the one a light cycle gave since.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Why {
    /// The last full cycle's reason, valid when `full_at` is
    /// `World::full_cycles`.
    pub full: Option<WaitReason>,
    pub full_at: u64,
    /// A light cycle's reason since the last full cycle, valid when
    /// `recent_at` is `World::full_cycles`.
    pub recent: Option<WaitReason>,
    pub recent_at: u64,
}

impl WJob {
    /// A job not yet arrived.
    pub fn new(
        spec: crate::workload::Job,
        at: Nanos,
        duration: Nanos,
        checkpoint_every: Nanos,
    ) -> WJob {
        let tasks = spec.tasks.len();
        let mut job = sched::Job::new(spec, at);
        job.estimate = duration;
        WJob {
            job,
            duration,
            checkpoint_every,
            arrival_at: at,
            remaining: duration,
            ready_at: vec![0; tasks],
            run_since: -1,
            moved: Vec::new(),
            epoch: 0,
            started: false,
            done: false,
            finish: 0,
            first_run: 0,
            waits: Vec::new(),
            waits_within: Vec::new(),
            last_reason: String::new(),
            held_share: 0.0,
            listed: false,
            seq: 0,
        }
    }

    pub fn id(&self) -> &str {
        self.job.id()
    }

    pub fn phase(&self) -> Phase {
        self.job.phase
    }
}

/// Timer references (an event's `reference`); the dynamic timers are
/// numbered from `REF_FIRST_DYNAMIC`.
pub(super) const REF_CYCLE: usize = 0; // a full cycle now
pub(super) const REF_LIGHT: usize = 1; // a cycle for the jobs that just arrived
pub(super) const REF_TICK: usize = 2; // the periodic look
pub(super) const REF_SAMPLE: usize = 3;
pub(super) const REF_FIRST_DYNAMIC: usize = 4;

/// What a dynamic timer does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum TimerKind {
    /// A preempted job's grace ends.
    #[default]
    Grace,
    /// A MIG change of a GPU is done.
    Reconfig,
    /// A task's new instance is ready.
    Ready,
    /// A moved task's new place is ready: its old place goes.
    Moved,
    /// The scheduler asked for a cycle of a job (`Decision::retries`).
    Retry,
}

/// A dynamic timer. Taken out of `World::timers` when it fires.
#[derive(Debug, Clone, Default)]
pub(super) struct Timer {
    pub kind: TimerKind,
    pub job: usize,
    pub epoch: u64,
    pub node: String,
    pub gpu: usize,
    /// `Moved`: the old place's task name, on `node`.
    pub task: String,
    /// The job a change or an eviction makes room for: when it completes,
    /// that job gets a cycle at once, not at the next coalesced one (a
    /// production start would wait up to `coalesce` more, and the room
    /// could go to another job).
    pub for_job: String,
}

impl Why {
    /// The reason the last cycle that looked at the job gave, with the
    /// world `full_cycles` full cycles in: a light cycle's since the last
    /// full one, else the last full one's (when it was looked up).
    pub fn current(&self, full_cycles: u64) -> Option<&WaitReason> {
        if self.recent_at == full_cycles && self.recent.is_some() {
            return self.recent.as_ref();
        }
        self.last_full(full_cycles)
    }

    /// The reason the last full cycle gave, none when it left the job
    /// out (it started, or was not pending).
    pub fn last_full(&self, full_cycles: u64) -> Option<&WaitReason> {
        self.full.as_ref().filter(|_| self.full_at == full_cycles)
    }
}

/// A MIG instance of the world's cluster: the node's position, the GPU
/// and the instance's place.
pub(super) type InstanceKey = (usize, usize, Placement);

/// The world.
pub(super) struct World<'t> {
    pub opt: Options,
    pub name: String,
    pub duration: Nanos,
    pub st: State,
    pub sch: Scheduler,
    pub teams: Vec<Team>,
    pub q: Queue,
    /// Every job of the stream, by arrival.
    pub jobs: Vec<WJob>,
    pub by_id: ById<usize>,
    /// Arrived, not done (positions in `jobs`), in order of arrival.
    pub active: Vec<usize>,
    /// The buffers cycles list their jobs in (`recycle`): the scheduler
    /// keeps none of them.
    pub input_buf: Vec<&'static sched::Job>,
    pub changed_buf: Vec<&'static sched::Job>,
    pub gone_buf: Vec<&'static sched::Job>,
    /// What the next cycle's input lists as changed since the last one
    /// (`sched::Input::incremental`): every change of a job's phase or
    /// placement goes through `touch`, a departure through
    /// `remove_active`.
    pub changed: Vec<usize>,
    pub gone: Vec<usize>,
    pub lists: Lists,
    /// How many events one instant may have before the run fails as stuck
    /// (`run_loop`); 0 for the default bound.
    pub stuck_after: usize,
    /// Dynamic timers, by reference - `REF_FIRST_DYNAMIC`.
    pub timers: Vec<Timer>,
    /// When each instance added ahead of demand is ready; entries in the
    /// past are harmless.
    pub ready: HashMap<InstanceKey, Nanos, FxBuildHasher>,
    /// A full cycle is already queued.
    pub cycle_due: bool,
    /// When the last full cycle ran.
    pub last_cycle: Nanos,
    /// Arrived since the last cycle, for a light cycle.
    pub new_jobs: Vec<String>,
    /// A periodic tick is queued.
    pub tick_due: bool,
    pub metrics: Metrics,
    /// How many full cycles have run: the reasons the jobs' `Why` hold
    /// are valid while it stays.
    pub full_cycles: u64,
    /// Per job (by position in `jobs`): what the passes over the waiting
    /// jobs read (`Owe`), and why it waits (`Why`).
    pub owe: Vec<Owe>,
    pub why: Vec<Why>,
    /// The last full cycle's `waiting`, emptied into the jobs' `Why`: the
    /// next full cycle fills it again (`sched::Input::waiting`).
    pub spare: Option<Waiting>,
    pub trace: Option<&'t mut dyn fmt::Write>,
}

impl<'t> World<'t> {
    /// The world of `setup` under `opt` (its defaults filled in).
    pub fn new(
        setup: Setup,
        opt: &Options,
        trace: Option<&'t mut dyn fmt::Write>,
    ) -> Result<World<'t>, MixedError> {
        let Setup {
            name,
            duration,
            production_reserve_gpus,
            teams,
            nodes,
            arrivals,
        } = setup;
        let mut st = State::new(nodes)?;
        // The request mix, job by job: `shapes_of` of the whole stream
        // without copying it.
        let mut shapes = Vec::new();
        for a in &arrivals {
            shapes.extend(sched::shapes_of(std::slice::from_ref(&a.job)));
        }
        let (mut cfg, policy) = sched::build(&opt.scheduler, &st, &shapes)?;
        if opt.scheduler == "partita" {
            let reserve = opt
                .production_reserve_gpus
                .unwrap_or(production_reserve_gpus);
            cfg.production_reserve = (reserve * 1000.0) as i64;
        }
        if !cfg.mig {
            // Schedulers without MIG awareness run every GPU whole.
            // (Starting Partita whole too and turning MIG on as needed was
            // tried: MIG spreads over the nodes all the same as work comes
            // and goes, and it preempted more; docs/mixed.md.)
            mig_off_everywhere(&mut st)?;
        }
        let sch = Scheduler::new(cfg, policy, Rand::new(opt.seed));
        let mut w = World {
            opt: opt.clone(),
            name,
            duration,
            st,
            sch,
            teams,
            q: Queue::new(),
            jobs: Vec::with_capacity(arrivals.len()),
            by_id: ById::default(),
            active: Vec::new(),
            input_buf: Vec::new(),
            changed_buf: Vec::new(),
            gone_buf: Vec::new(),
            changed: Vec::new(),
            gone: Vec::new(),
            lists: Lists::default(),
            stuck_after: 0,
            timers: Vec::new(),
            ready: HashMap::default(),
            cycle_due: false,
            last_cycle: 0,
            new_jobs: Vec::new(),
            tick_due: false,
            metrics: Metrics::default(),
            full_cycles: 0,
            owe: Vec::with_capacity(arrivals.len()),
            why: Vec::new(),
            spare: None,
            trace,
        };
        w.metrics = Metrics::new(&w.st, &w.teams);
        w.why = vec![Why::default(); arrivals.len()];
        for (i, a) in arrivals.into_iter().enumerate() {
            let j = WJob::new(a.job, a.at, a.duration, a.checkpoint_every);
            w.owe.push(Owe {
                team: w.teams.iter().position(|t| t.name == j.job.spec.team),
                milli: j.job.spec.gpu_milli(),
                ..Owe::default()
            });
            w.by_id.insert(Arc::from(j.id()), i);
            w.jobs.push(j);
            w.push(Event {
                at: a.at,
                kind: Kind::Arrival,
                reference: i,
            })?;
        }
        w.push(Event {
            at: 0,
            kind: Kind::Timer,
            reference: REF_SAMPLE,
        })?;
        Ok(w)
    }

    fn push(&mut self, e: Event) -> Result<(), MixedError> {
        self.q.push(e).map_err(MixedError::world)
    }

    /// Pushes an event the world computed at now or later: one in the past
    /// is a bug, which Go's world ignored (`_ = w.q.Push`); so does this
    /// one.
    pub fn push_later(&mut self, at: Nanos, reference: usize) {
        let _ = self.q.push(Event {
            at,
            kind: Kind::Timer,
            reference,
        });
    }

    /// Runs events until the horizon. A scheduler that keeps asking for
    /// cycles at one instant (a replica moved back and forth did) would
    /// stop the clock: past a bound far above any real burst of events at
    /// one instant, the run fails with the instant instead of hanging.
    pub fn run_loop(&mut self) -> Result<(), MixedError> {
        let limit = if self.stuck_after == 0 {
            100_000 + 10 * self.jobs.len()
        } else {
            self.stuck_after
        };
        let (mut same, mut last) = (0usize, -1);
        while let Some(ev) = self.q.pop() {
            if ev.at > self.duration {
                break;
            }
            if ev.at == last {
                same += 1;
                if same > limit {
                    return Err(MixedError::At {
                        at: ev.at,
                        source: Box::new(MixedError::world(format!(
                            "the simulation is stuck: more than {limit} events at this instant (a scheduler that never settles)"
                        ))),
                    });
                }
            } else {
                (same, last) = (0, ev.at);
            }
            self.handle(ev).map_err(|e| MixedError::At {
                at: ev.at,
                source: Box::new(e),
            })?;
        }
        self.finish_metrics(self.duration);
        Ok(())
    }

    /// The run's result, once the loop is done.
    pub fn result(&self) -> RunResult {
        self.metrics_result()
    }

    pub fn now(&self) -> Nanos {
        self.q.now()
    }

    /// Whether j's team, holding what it holds now, is owed j's demand.
    pub fn within_guarantee(&self, j: usize) -> bool {
        let Some(team) = self.owe[j].team else {
            return false;
        };
        self.team_usage()[team] + self.owe[j].milli as f64 <= self.teams[team].guarantee as f64
    }

    fn handle(&mut self, ev: Event) -> Result<(), MixedError> {
        match ev.kind {
            Kind::Arrival => {
                let j = ev.reference;
                let now = self.now();
                self.jobs[j].job.phase = Phase::Pending;
                self.owe[j].queued_at = now;
                self.owe[j].within = self.within_guarantee(j);
                self.arrive(j);
                self.touch(j);
                let id = self.jobs[j].id().to_string();
                self.want_light(id);
                Ok(())
            }
            Kind::Departure => self.depart(ev.reference),
            Kind::Timer => self.timer(ev.reference),
            Kind::Failure => Ok(()),
        }
    }

    /// Queues a full scheduling cycle, once: now, or `coalesce` after the
    /// last one.
    pub fn want_cycle(&mut self) {
        if self.cycle_due {
            return;
        }
        self.cycle_due = true;
        let now = self.now();
        let mut at = now.max(self.last_cycle + self.opt.coalesce);
        if self.last_cycle == 0 && now < self.opt.coalesce {
            at = now;
        }
        self.push_later(at, REF_CYCLE);
    }

    /// Runs a full cycle now, besides one already queued for later: for a
    /// job put back in the queue within its team's guarantee at the end of
    /// its grace (after the light cycle of the job its eviction made room
    /// for). Its claim is owed from that moment, and the usual reclaim (a
    /// MIG change, victims' grace, a MIG change) takes exactly the 60 s +
    /// grace allowed, so waiting for the coalesced cycle put it past the
    /// line (docs/mixed.md, "The cadences measured exactly"). Not a light
    /// cycle for the job alone: that let it act before the jobs the full
    /// cycle's order puts first, and did not help.
    fn cycle_now(&mut self) {
        self.cycle_due = true;
        let now = self.now();
        self.push_later(now, REF_CYCLE);
    }

    /// Queues a light cycle now for job `id`.
    pub fn want_light(&mut self, id: String) {
        if self.new_jobs.is_empty() {
            let now = self.now();
            self.push_later(now, REF_LIGHT);
        }
        self.new_jobs.push(id);
    }

    fn timer(&mut self, reference: usize) -> Result<(), MixedError> {
        match reference {
            REF_CYCLE => {
                self.cycle_due = false;
                self.last_cycle = self.now();
                self.new_jobs.clear();
                self.cycle_of(None)?;
                self.want_tick();
                return Ok(());
            }
            REF_LIGHT => {
                if self.new_jobs.is_empty() {
                    return Ok(()); // a full cycle covered them
                }
                let mut only = std::mem::take(&mut self.new_jobs);
                self.cycle_of(Some(&only))?;
                if self.new_jobs.is_empty() {
                    // Its buffer, for the next arrivals.
                    only.clear();
                    self.new_jobs = only;
                }
                self.want_tick();
                return Ok(());
            }
            REF_TICK => {
                self.tick_due = false;
                if self.any_pending() {
                    self.want_cycle();
                }
                return Ok(());
            }
            REF_SAMPLE => {
                self.sample();
                let at = self.now() + self.opt.sample_every;
                return self.push(Event {
                    at,
                    kind: Kind::Timer,
                    reference: REF_SAMPLE,
                });
            }
            _ => {}
        }
        let t = std::mem::take(&mut self.timers[reference - REF_FIRST_DYNAMIC]);
        match t.kind {
            TimerKind::Grace => {
                let back = self.grace_over(t.job, t.epoch)?;
                let within = self.owe[t.job].within;
                if back && !within {
                    self.want_cycle();
                }
                // The job the eviction made room for looks first (a light
                // cycle, queued before): the victim, owed once back in the
                // queue, took its GPUs back in a full cycle now, and the
                // claimant's rounds backed off for hours.
                self.room_ready(&t.for_job);
                if back && within {
                    self.cycle_now();
                }
            }
            TimerKind::Reconfig => {
                self.st.cordon(&t.node, t.gpu, false)?;
                self.room_ready(&t.for_job);
                self.want_cycle();
            }
            TimerKind::Ready => self.maybe_run(t.job),
            TimerKind::Moved => {
                self.release_old(t.job, &t.node, &t.task)?;
                self.room_ready(&t.for_job);
                self.want_cycle();
            }
            TimerKind::Retry => {
                let id = self.jobs[t.job].id().to_string();
                self.room_ready(&id);
            }
        }
        Ok(())
    }

    /// Gives the job a change or an eviction was for a cycle now, if it
    /// still waits.
    fn room_ready(&mut self, id: &str) {
        if let Some(&j) = self.by_id.get(id)
            && !self.jobs[j].done
            && self.jobs[j].phase() == Phase::Pending
        {
            self.want_light(id.to_string());
        }
    }

    /// Makes sure a periodic full cycle comes while jobs wait: time-based
    /// rules (reservations, quota holds, cooldowns) need a look now and
    /// then even when nothing happens.
    fn want_tick(&mut self) {
        if self.any_pending() && !self.tick_due {
            self.tick_due = true;
            let at = self.now() + self.opt.cycle_every;
            self.push_later(at, REF_TICK);
        }
    }

    /// Fires `t` after `d`.
    pub fn after(&mut self, d: Nanos, t: Timer) {
        self.timers.push(t);
        let at = self.now() + d;
        let reference = REF_FIRST_DYNAMIC + self.timers.len() - 1;
        self.push_later(at, reference);
    }

    /// Lists j as changed for the next cycle's input.
    pub fn touch(&mut self, j: usize) {
        if !self.jobs[j].listed {
            self.jobs[j].listed = true;
            self.changed.push(j);
        }
    }

    /// Writes a trace line, prefixed by the time, when tracing.
    pub fn tracef(&mut self, args: fmt::Arguments<'_>) {
        let now = seconds(self.now());
        if let Some(t) = self.trace.as_mut() {
            // A trace that fails to write loses lines, not the run, as in
            // the Go build (which ignores Fprintf's error).
            let _ = writeln!(t, "{now:10.0}s  {args}");
        }
    }

    pub fn tracing(&self) -> bool {
        self.trace.is_some()
    }
}

fn mig_off_everywhere(st: &mut State) -> Result<(), MixedError> {
    let mut on = Vec::new();
    for n in st.nodes() {
        for (k, g) in n.gpus().iter().enumerate() {
            if g.mig() {
                on.push((n.name().to_string(), k));
            }
        }
    }
    for (node, k) in on {
        st.set_mig(&node, k, false)?;
    }
    Ok(())
}

/// An empty vector of job references on `v`'s buffer: a cycle's lists are
/// rebuilt in the same arrays each cycle (a new one per cycle was a tenth
/// of what a week allocated in the Go build). The collect reuses the
/// allocation, as the element type is the same.
pub(super) fn recycle<'a, 'b>(mut v: Vec<&'a sched::Job>) -> Vec<&'b sched::Job> {
    v.clear();
    v.into_iter()
        .map(|_| -> &'b sched::Job { unreachable!("the vector is empty") })
        .collect()
}
