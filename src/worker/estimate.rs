//! Estimated starts of queued jobs, the port of the Go build's
//! `go/internal/standalone/estimate.go`: a fresh scheduler of the same
//! configuration runs cycles on a copy of the cluster, assuming running
//! jobs end when declared, preempted ones leave after their grace and come
//! back, and nothing new arrives.
//!
//! The work is bounded as Go bounds it (at most `STEPS` cycles, the oldest
//! `MAX_QUEUED` queued jobs) and runs off the worker's tick: `inputs`
//! copies what it needs (a cluster copy is cheap, its nodes are shared),
//! and `project` runs on a thread of its own (`views.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;

use partita_engine::cluster::State;
use partita_engine::frag::Shape;
use partita_engine::random::Rand;
use partita_engine::sched::{self, Config, Decision, Input, Job, Nanos, Phase, SECOND, Team};

use super::world::World;

/// Cycles the projection runs at most.
pub const STEPS: usize = 400;
/// Queued jobs it takes, oldest first.
pub const MAX_QUEUED: usize = 2000;

/// How to build a scheduler like the worker's: its configuration, the
/// request mix its placement policy was told, and its seed.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub config: Config,
    pub shapes: Vec<Shape>,
    pub seed: i64,
}

impl Recipe {
    /// A fresh scheduler (no memory of earlier cycles) for `st`.
    pub fn scheduler(&self, st: &State) -> Result<sched::Scheduler, sched::SchedError> {
        let (_, policy) = sched::build("partita", st, &self.shapes)?;
        Ok(sched::Scheduler::new(
            self.config.clone(),
            policy,
            Rand::new(self.seed),
        ))
    }
}

/// A job in the projection.
#[derive(Debug, Clone)]
struct PJob {
    job: Job,
    /// Run time left; -1: runs until cancelled.
    remaining: Nanos,
    /// When it ends; -1: not running.
    end_at: Nanos,
    /// Preempted: comes back to the queue after `end_at`.
    requeue: bool,
}

/// What a projection starts from: a copy of the world.
#[derive(Debug)]
pub struct Inputs {
    now: Nanos,
    st: State,
    teams: Vec<Team>,
    jobs: Vec<PJob>,
    delay: Nanos,
    recipe: Arc<Recipe>,
}

/// Copies the jobs the projection needs: every job holding resources and
/// the oldest queued ones.
pub fn inputs(w: &World, recipe: Arc<Recipe>) -> Inputs {
    let now = w.now();
    let mut jobs = Vec::new();
    let mut queued = 0;
    for (rec, j) in w.jobs() {
        let placed = j.placed.iter().any(Option::is_some);
        if j.phase == Phase::Pending && !placed && queued >= MAX_QUEUED {
            continue;
        }
        let mut p = PJob {
            job: j.clone(),
            remaining: -1,
            end_at: -1,
            requeue: false,
        };
        let rt = &rec.runtime;
        if rec.spec.duration > 0 {
            p.remaining = rt.remaining.unwrap_or(rec.spec.duration);
            if rt.run_since >= 0 {
                p.remaining = (p.remaining - (now - rt.run_since)).max(0);
            }
        }
        match j.phase {
            Phase::Pending => queued += 1,
            Phase::Running => {
                if p.remaining >= 0 {
                    p.end_at = now + p.remaining;
                }
            }
            Phase::Terminating => {
                p.end_at = rt.grace_until.max(now);
                p.requeue = true;
            }
        }
        jobs.push(p);
    }
    Inputs {
        now,
        st: w.cluster().clone(),
        teams: w.teams().to_vec(),
        jobs,
        delay: w.reconfig_delay(),
        recipe,
    }
}

/// Runs the projection: when each queued job starts (cluster time), by
/// job ID; a job the projection does not reach is absent.
pub fn project(inputs: Inputs) -> Result<BTreeMap<String, Nanos>, sched::SchedError> {
    let Inputs {
        now,
        mut st,
        teams,
        mut jobs,
        delay,
        recipe,
    } = inputs;
    let mut sch = recipe.scheduler(&st)?;
    let by_id: BTreeMap<String, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.job.id().to_string(), i))
        .collect();
    // The jobs still in the projection, by index into `jobs`, in
    // submission order (the order the scheduler meets them in).
    let mut live: Vec<usize> = (0..jobs.len()).collect();
    let mut starts = BTreeMap::new();
    let mut t = now;
    for _ in 0..STEPS {
        let decision = {
            let refs: Vec<&Job> = live.iter().map(|&i| &jobs[i].job).collect();
            let mut input = Input::new(t, &st, &teams, &refs);
            sch.cycle(&mut input)
        };
        let waiting = !decision.waiting.is_empty();
        apply(&mut st, &mut jobs, &by_id, decision, t, delay, &mut starts);
        let next = live
            .iter()
            .map(|&i| jobs[i].end_at)
            .filter(|&e| e >= 0)
            .min();
        let Some(next) = next else { break };
        if !waiting {
            break;
        }
        t = next.max(t + SECOND);
        end(&mut st, &mut jobs, &mut live, t);
    }
    Ok(starts)
}

/// Carries a decision out on the projection's copy: starts (a new MIG
/// instance delays the start), MIG changes at once, preemptions ending
/// after their grace.
fn apply(
    st: &mut State,
    jobs: &mut [PJob],
    by_id: &BTreeMap<String, usize>,
    d: Decision,
    t: Nanos,
    delay: Nanos,
    starts: &mut BTreeMap<String, Nanos>,
) {
    for s in d.starts {
        let Some(&i) = by_id.get(&s.job) else {
            continue;
        };
        if st.allocate(&s.assignment).is_err() {
            continue;
        }
        let j = &mut jobs[i];
        if s.task >= j.job.placed.len() {
            continue;
        }
        j.job.placed[s.task] = Some(Arc::new(s.assignment));
        if !j.job.complete() {
            continue;
        }
        j.job.phase = Phase::Running;
        let begin = if s.creates { t + delay } else { t };
        starts.entry(s.job).or_insert(begin);
        if j.remaining >= 0 {
            j.end_at = begin + j.remaining;
        }
    }
    for rc in &d.reconfigs {
        // A failed change leaves the copy as it was; the projection goes
        // on with what it has.
        let _ = st.repartition(&rc.node, rc.gpu, rc.mig, &rc.layout);
    }
    for p in &d.preemptions {
        if let Some(&i) = by_id.get(&p.job) {
            let j = &mut jobs[i];
            if j.job.phase == Phase::Running {
                j.job.phase = Phase::Terminating;
                j.end_at = t + p.grace;
                j.requeue = true;
            }
        }
    }
}

/// Releases the jobs that end by `t`; preempted ones go back to the queue.
fn end(st: &mut State, jobs: &mut [PJob], live: &mut Vec<usize>, t: Nanos) {
    live.retain(|&i| {
        let j = &mut jobs[i];
        if j.end_at < 0 || j.end_at > t {
            return true;
        }
        for p in &mut j.job.placed {
            if let Some(a) = p.take() {
                let _ = st.release(&a.node, &a.task);
            }
        }
        if j.requeue {
            j.job.phase = Phase::Pending;
            j.end_at = -1;
            j.requeue = false;
            return true;
        }
        false
    });
    live.sort_by_key(|&i| jobs[i].job.submitted);
}
