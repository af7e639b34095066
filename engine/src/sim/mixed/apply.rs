//! Running a cycle and carrying its decision out (Go's `apply.go`):
//! starts, then moves, then MIG changes, then preemptions, each with the
//! delays a real cluster has.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::MixedError;
use super::metrics::oom;
use super::world::{Timer, TimerKind, World, recycle};
use crate::cluster::Assignment;
use crate::placement::{grant_share, need};
use crate::scenario::duration::{MINUTE, SECOND, seconds};
use crate::sched::{
    Decision, Input, Migration, Nanos, Phase, Preemption, READ_AHEAD, Reconfig, Start, Waiting,
};
use crate::workload::Class;

impl World<'_> {
    /// Runs a cycle and carries out its decision: a full one (`only`
    /// none), or one limited to the jobs `only`.
    pub(super) fn cycle_of(&mut self, only: Option<&[String]>) -> Result<(), MixedError> {
        let now = self.now();
        let full = only.is_none();
        let waiting = if full { self.spare.take() } else { None };
        for k in 0..self.changed.len() {
            let j = self.changed[k];
            self.jobs[j].listed = false;
        }
        // The scheduler picks victims by the work they would lose: it must
        // see the last checkpoint, not the start (`lost_work`).
        self.checkpoints();
        let mut changed = std::mem::take(&mut self.changed);
        let mut gone = std::mem::take(&mut self.gone);
        // The lists are rebuilt in the same arrays each cycle: the
        // scheduler keeps none of them. Only the references are read, not
        // the jobs.
        let mut jobs_in = recycle(std::mem::take(&mut self.input_buf));
        let mut changed_in = recycle(std::mem::take(&mut self.changed_buf));
        let mut gone_in = recycle(std::mem::take(&mut self.gone_buf));
        let d = {
            let jobs = &self.jobs;
            // A job gone since it changed is listed in `gone` only.
            changed_in.extend(
                changed
                    .iter()
                    .filter(|&&j| !jobs[j].done)
                    .map(|&j| &jobs[j].job),
            );
            gone_in.extend(gone.iter().map(|&j| &jobs[j].job));
            jobs_in.extend(self.active.iter().map(|&j| &jobs[j].job));
            let mut input = Input {
                now,
                cluster: &self.st,
                teams: &self.teams,
                jobs: &jobs_in,
                only,
                incremental: !self.opt.full_inputs,
                changed: &changed_in,
                gone: &gone_in,
                waiting,
            };
            let d = self.sch.cycle(&mut input);
            if self.opt.check {
                self.sch.check_kept(&input)?;
            }
            d
        };
        self.input_buf = recycle(jobs_in);
        self.changed_buf = recycle(changed_in);
        self.gone_buf = recycle(gone_in);
        changed.clear();
        gone.clear();
        self.changed = changed;
        self.gone = gone;
        let result = self.apply(d, full);
        // After the starts: a job started now is not waiting. (Go defers
        // these, so they run even when carrying out failed; a failed run
        // reports only its error.)
        if full {
            self.check(true, now);
        } else {
            self.idle_at(now);
        }
        result
    }

    /// Carries out `d`, the decision of a full cycle when `full`.
    fn apply(&mut self, d: Decision, full: bool) -> Result<(), MixedError> {
        let Decision {
            starts,
            preemptions,
            reconfigs,
            migrations,
            mut waiting,
            retries,
        } = d;
        // The waiting jobs by their position in `jobs`, from theirs in the
        // input (`active`, unchanged since the cycle).
        for (i, _) in waiting.iter_mut() {
            *i = self.active[*i];
        }
        if self.tracing() {
            self.trace_waits(&waiting);
        }
        // Starts first: the scheduler cordons a GPU when it changes it, so
        // no start in this decision lands on a GPU changed after it, but a
        // GPU changed after a start on it keeps that start's instance.
        for s in starts {
            self.start(s)?;
        }
        self.outgrown();
        // The reasons after the starts: a job started now was served after
        // the wait the last cycle gave it a reason for (`served`).
        if full {
            // The jobs' reasons of the cycle before and of the light
            // cycles since go stale with the count.
            self.full_cycles += 1;
            for k in 0..waiting.len() {
                if let Some(&(ahead, _)) = waiting.get(k + READ_AHEAD) {
                    std::hint::black_box(self.why[ahead].full_at);
                }
                let (j, wt) = &waiting[k];
                let why = &mut self.why[*j];
                why.full = Some(wt.reason.clone());
                why.full_at = self.full_cycles;
            }
            waiting.clear();
            self.spare = Some(waiting);
        } else {
            for (j, wt) in waiting {
                let why = &mut self.why[j];
                why.recent = Some(wt.reason);
                why.recent_at = self.full_cycles;
            }
        }
        for m in migrations {
            self.migrate(m)?;
        }
        for rc in reconfigs {
            self.reconfigure(&rc)?;
        }
        for p in preemptions {
            self.preempt(&p);
        }
        let now = self.now();
        for r in retries {
            let Some(&j) = self.by_id.get(r.job.as_str()) else {
                return Err(MixedError::world(format!("retry {}: no such job", r.job)));
            };
            self.after(
                r.at - now,
                Timer {
                    kind: TimerKind::Retry,
                    job: j,
                    ..Timer::default()
                },
            );
        }
        if self.opt.check {
            return self.check_invariants();
        }
        Ok(())
    }

    /// The trace's "wait" lines: a job waiting past a minute (production)
    /// or ten, each time its reason changes. The Go build wrote them in
    /// the order of its decision's map, which differs from run to run;
    /// this world writes them in the order of the job IDs.
    fn trace_waits(&mut self, waiting: &Waiting) {
        let now = self.now();
        let mut by_id: Vec<(&str, usize, &str)> = waiting
            .iter()
            .map(|(j, wt)| (self.jobs[*j].id(), *j, wt.reason.as_str()))
            .collect();
        by_id.sort_unstable();
        let by_id: Vec<(String, usize, String)> = by_id
            .into_iter()
            .map(|(id, j, reason)| (id.to_string(), j, reason.to_string()))
            .collect();
        for (id, j, reason) in by_id {
            let reason = reason.as_str();
            let job = &self.jobs[j];
            let waited = now - self.owe[j].queued_at;
            if (job.job.spec.class == Class::Production && waited > MINUTE || waited > 10 * MINUTE)
                && job.last_reason != reason
            {
                self.jobs[j].last_reason = reason.to_string();
                let team = &self.jobs[j].job.spec.team;
                let line = format!("wait {id} ({team}) {:.0}s: {reason}", seconds(waited));
                self.tracef(format_args!("{line}"));
            }
        }
    }

    /// Checks the invariants (`Options::check`).
    pub(super) fn check_invariants(&self) -> Result<(), MixedError> {
        self.st
            .check()
            .map_err(|e| MixedError::world(format!("cluster invariant: {e}")))?;
        self.check_lists()
            .map_err(|e| MixedError::world(format!("the world's lists: {e}")))?;
        let cfg = self.sch.config();
        // Every allocation in the cluster is a task's place, or a moved
        // task's old place not yet released: none leaks.
        let mut owned = 0;
        for &j in &self.active {
            let job = &self.jobs[j];
            owned += job.job.placed.iter().flatten().count() + job.moved.len();
        }
        let allocated: usize = self.st.nodes().map(|n| n.tasks().len()).sum();
        if allocated != owned {
            return Err(MixedError::world(format!(
                "{allocated} allocations in the cluster, {owned} held by jobs"
            )));
        }
        let mut held: BTreeMap<&str, i64> = BTreeMap::new();
        for &j in &self.active {
            let job = &self.jobs[j];
            let mut placed = 0;
            for a in job.job.placed.iter().flatten() {
                placed += 1;
                let n = self.st.node_by_name(&a.node).expect("a placed task's node");
                let share: f64 = a.grants.iter().fold(0.0, |s, g| s + grant_share(n, g));
                *held.entry(&job.job.spec.team).or_insert(0) += (share * 1000.0) as i64;
            }
            if cfg.gangs && job.job.spec.is_gang() && placed > 0 && placed < job.job.placed.len() {
                return Err(MixedError::world(format!(
                    "gang {} partly placed: {placed} of {} tasks",
                    job.id(),
                    job.job.placed.len()
                )));
            }
        }
        for t in &self.teams {
            let mut limit = t.guarantee;
            if cfg.borrow {
                limit = t.burst.max(t.guarantee);
            }
            // A MIG slice counts its compute share in quotas and the larger
            // of compute and memory here; allow that rounding.
            let h = held.get(t.name.as_str()).copied().unwrap_or(0);
            if h > limit + limit / 5 + 1000 {
                return Err(MixedError::world(format!(
                    "team {} holds {h} milli, above its limit {limit}",
                    t.name
                )));
            }
        }
        Ok(())
    }

    fn reconfigure(&mut self, rc: &Reconfig) -> Result<(), MixedError> {
        let Some(i) = self.st.lookup(&rc.node) else {
            return Err(MixedError::world(format!(
                "reconfigure: unknown node {}",
                rc.node
            )));
        };
        let Some(g) = self.st.node(i).gpus().get(rc.gpu) else {
            return Err(MixedError::world(format!(
                "reconfigure {}/{}: no such GPU",
                rc.node, rc.gpu
            )));
        };
        let before = g.layout();
        self.st
            .repartition(&rc.node, rc.gpu, rc.mig, &rc.layout)
            .map_err(|e| MixedError::world(format!("reconfigure {}/{}: {e}", rc.node, rc.gpu)))?;
        self.metrics.reconfigs += 1;
        if rc.add {
            // New instances in free space: the GPU keeps working; a task
            // placed on one of them waits until it is ready.
            let at = self.now() + self.opt.reconfig_delay;
            for p in rc.layout.iter() {
                let k = (i, rc.gpu, p.clone());
                if !self.ready.contains_key(&k) && !before.contains(p) {
                    self.ready.insert(k, at);
                }
            }
            self.tracef(format_args!(
                "add instances {}/gpu{} layout={} for {}",
                rc.node, rc.gpu, rc.layout, rc.for_job
            ));
            return Ok(());
        }
        self.st.cordon(&rc.node, rc.gpu, true)?;
        self.tracef(format_args!(
            "reconfig {}/gpu{} mig={} layout={} for {}",
            rc.node, rc.gpu, rc.mig, rc.layout, rc.for_job
        ));
        self.after(
            self.opt.reconfig_delay,
            Timer {
                kind: TimerKind::Reconfig,
                node: rc.node.clone(),
                gpu: rc.gpu,
                for_job: rc.for_job.clone(),
                ..Timer::default()
            },
        );
        Ok(())
    }

    /// When an instance `a` uses on `gpu` will be ready, if it was added
    /// ahead of demand and is not ready by `by`.
    fn ready_after(&self, a: &Assignment, by: Nanos) -> Option<Nanos> {
        let node = self.st.lookup(&a.node)?;
        let mut latest = None;
        for g in &a.grants {
            let Some(slice) = &g.slice else { continue };
            let k = (node, g.gpu as usize, slice.clone());
            if let Some(&at) = self.ready.get(&k)
                && at > latest.unwrap_or(by)
            {
                latest = Some(at);
            }
        }
        latest
    }

    fn start(&mut self, s: Start) -> Result<(), MixedError> {
        let j = match self.by_id.get(s.job.as_str()) {
            Some(&j)
                if self.jobs[j].phase() == Phase::Pending
                    && s.task < self.jobs[j].ready_at.len() =>
            {
                j
            }
            _ => return Err(MixedError::world(format!("start {}: not pending", s.job))),
        };
        self.st
            .allocate(&s.assignment)
            .map_err(|e| MixedError::world(format!("start {} task {}: {e}", s.job, s.task)))?;
        let a = Arc::new(s.assignment);
        let now = self.now();
        self.jobs[j].job.placed[s.task] = Some(a.clone());
        self.touch(j);
        self.jobs[j].ready_at[s.task] = now;
        if s.creates {
            // The instance must be created first.
            self.jobs[j].ready_at[s.task] = now + self.opt.reconfig_delay;
            self.metrics.reconfigs += 1;
            self.after(
                self.opt.reconfig_delay,
                Timer {
                    kind: TimerKind::Ready,
                    job: j,
                    ..Timer::default()
                },
            );
        }
        for g in &a.grants {
            let Some(slice) = &g.slice else { continue };
            let Some(node) = self.st.lookup(&a.node) else {
                continue;
            };
            if let Some(&at) = self.ready.get(&(node, g.gpu as usize, slice.clone()))
                && at > self.jobs[j].ready_at[s.task]
            {
                // Placed on an instance still being created (warm pool).
                self.jobs[j].ready_at[s.task] = at;
                self.after(
                    at - now,
                    Timer {
                        kind: TimerKind::Ready,
                        job: j,
                        ..Timer::default()
                    },
                );
            }
        }
        self.metrics_placed(j, s.task, &a);
        if self.tracing() {
            let spec = &self.jobs[j].job.spec;
            let line = format!(
                "start {} task {} ({}/{}) on {} {} creates={}",
                s.job,
                s.task,
                spec.team,
                spec.class,
                a.node,
                grants_string(&a),
                s.creates
            );
            self.tracef(format_args!("{line}"));
        }
        if self.jobs[j].job.complete() {
            self.served(j);
            self.jobs[j].job.phase = Phase::Running;
            self.not_pending(j);
            self.jobs[j].job.started = now;
            self.jobs[j].job.checkpoint = now;
            self.maybe_run(j);
        }
        Ok(())
    }

    /// Starts the clock of a job whose tasks are all placed and ready.
    pub(super) fn maybe_run(&mut self, j: usize) {
        let now = self.now();
        let job = &self.jobs[j];
        if job.phase() != Phase::Running || job.run_since >= 0 {
            return;
        }
        if job.ready_at.iter().any(|&r| r > now) {
            return;
        }
        self.jobs[j].run_since = now;
        self.start_checkpoints(j);
        // Queued until it runs, instance creation included.
        let wait = now - self.owe[j].queued_at;
        let within = self.owe[j].within;
        let job = &mut self.jobs[j];
        job.waits.push(wait);
        if within {
            job.waits_within.push(wait);
        }
        if self.tracing() {
            let job = &self.jobs[j];
            let line = format!(
                "run {} ({}/{}) after {:.0}s, last reason {}, within guarantee {}",
                job.id(),
                job.job.spec.team,
                job.job.spec.class,
                seconds(wait),
                crate::quote::quote(&job.last_reason),
                within
            );
            self.tracef(format_args!("{line}"));
        }
        self.metrics_running(j);
        let job = &mut self.jobs[j];
        if !job.started {
            job.started = true;
            job.first_run = now;
        }
        let (at, reference) = (now + job.remaining, j * 1024 + (job.epoch % 1024) as usize);
        let _ = self.q.push(crate::sim::events::Event {
            at,
            kind: crate::sim::events::Kind::Departure,
            reference,
        });
    }

    /// Ends a job that ran its course (ignoring stale departures).
    pub(super) fn depart(&mut self, reference: usize) -> Result<(), MixedError> {
        let j = reference / 1024;
        let job = &self.jobs[j];
        if job.done
            || job.run_since < 0
            || (job.epoch % 1024) as usize != reference % 1024
            || job.phase() == Phase::Pending
        {
            return Ok(());
        }
        self.metrics_progress(j);
        self.release_all(j)?;
        self.jobs[j].done = true;
        self.jobs[j].finish = self.now();
        self.remove_active(j);
        self.want_cycle();
        Ok(())
    }

    /// Releases everything j holds: its tasks' places and the old places
    /// of its moves.
    pub(super) fn release_all(&mut self, j: usize) -> Result<(), MixedError> {
        while let Some(old) = self.jobs[j].moved.first() {
            let (node, task) = (old.node.clone(), old.task.clone());
            self.release_old(j, &node, &task)?;
        }
        for i in 0..self.jobs[j].job.placed.len() {
            let Some(a) = self.jobs[j].job.placed[i].clone() else {
                continue;
            };
            self.st
                .release(&a.node, &a.task)
                .map_err(|e| MixedError::world(format!("release {}: {e}", a.task)))?;
            self.jobs[j].job.placed[i] = None;
            self.touch(j);
        }
        let now = self.now();
        self.metrics
            .released(self.owe[j].team, self.jobs[j].held_share, now);
        self.jobs[j].held_share = 0.0;
        self.held_changed(j);
        Ok(())
    }

    /// Moves a task of a running service, make before break: the new place
    /// is held at once, the old one until the new one is ready (its
    /// instance created, when it had to be). The job runs on throughout.
    pub(super) fn migrate(&mut self, m: Migration) -> Result<(), MixedError> {
        let j = match self.by_id.get(m.job.as_str()) {
            Some(&j)
                if self.jobs[j].phase() == Phase::Running
                    && self.jobs[j]
                        .job
                        .placed
                        .get(m.task)
                        .is_some_and(Option::is_some) =>
            {
                j
            }
            _ => {
                return Err(MixedError::world(format!(
                    "migrate {} task {}: not running",
                    m.job, m.task
                )));
            }
        };
        self.st
            .allocate(&m.to)
            .map_err(|e| MixedError::world(format!("migrate {} task {}: {e}", m.job, m.task)))?;
        let now = self.now();
        self.metrics.advance(now);
        let old = Assignment::clone(
            self.jobs[j].job.placed[m.task]
                .as_ref()
                .expect("checked above"),
        );
        let to = Arc::new(m.to);
        self.jobs[j].job.placed[m.task] = Some(to.clone());
        self.touch(j);
        {
            let t = &self.jobs[j].job.spec.tasks[m.task];
            let old_node = self
                .st
                .node_by_name(&old.node)
                .expect("the old place's node");
            let new_node = self
                .st
                .node_by_name(&to.node)
                .expect("the new place's node");
            if self.jobs[j].run_since >= 0 {
                self.metrics.useful_now += need(new_node, &to, t) - need(old_node, &old, t);
            }
            for g in &to.grants {
                self.metrics.alloc_now += grant_share(new_node, g);
            }
            if oom(new_node, &to, t) {
                self.metrics.oom += 1;
            }
        }
        let (old_node, old_task) = (old.node.clone(), old.task.clone());
        self.jobs[j].moved.push(old);
        self.metrics.migrations += 1;
        let mut ready = now;
        if m.creates {
            ready += self.opt.reconfig_delay;
            self.metrics.reconfigs += 1;
        }
        if let Some(at) = self.ready_after(&to, ready) {
            ready = at;
        }
        if self.tracing() {
            let spec = &self.jobs[j].job.spec;
            let line = format!(
                "move {} task {} ({}/{}) from {} to {} {} creates={} for {}",
                m.job,
                m.task,
                spec.team,
                spec.class,
                old_node,
                to.node,
                grants_string(&to),
                m.creates,
                m.for_job
            );
            self.tracef(format_args!("{line}"));
        }
        self.after(
            ready - now,
            Timer {
                kind: TimerKind::Moved,
                job: j,
                node: old_node,
                task: old_task,
                for_job: m.for_job,
                ..Timer::default()
            },
        );
        Ok(())
    }

    /// Releases a moved task's old place, if the job still holds it.
    pub(super) fn release_old(
        &mut self,
        j: usize,
        node: &str,
        task: &str,
    ) -> Result<(), MixedError> {
        let Some(i) = self.jobs[j]
            .moved
            .iter()
            .position(|a| a.node == node && a.task == task)
        else {
            return Ok(());
        };
        let now = self.now();
        self.metrics.advance(now);
        {
            let a = &self.jobs[j].moved[i];
            let n = self.st.node_by_name(node).expect("a moved task's old node");
            for g in &a.grants {
                self.metrics.alloc_now -= grant_share(n, g);
            }
        }
        self.st
            .release(node, task)
            .map_err(|e| MixedError::world(format!("release {task}'s old place: {e}")))?;
        self.jobs[j].moved.remove(i);
        Ok(())
    }

    /// Starts a victim's grace period: it keeps its resources (and keeps
    /// running, to checkpoint and exit) until the grace ends.
    fn preempt(&mut self, p: &Preemption) {
        let Some(&j) = self.by_id.get(p.job.as_str()) else {
            return;
        };
        if self.jobs[j].phase() != Phase::Running {
            return;
        }
        self.jobs[j].job.phase = Phase::Terminating;
        self.touch(j);
        self.metrics.preemptions += 1;
        if self.tracing() {
            let spec = &self.jobs[j].job.spec;
            let line = format!(
                "preempt {} ({}/{}): {}",
                spec.id, spec.team, spec.class, p.reason
            );
            self.tracef(format_args!("{line}"));
        }
        let epoch = self.jobs[j].epoch;
        self.after(
            p.grace,
            Timer {
                kind: TimerKind::Grace,
                job: j,
                epoch,
                for_job: p.for_job.clone(),
                ..Timer::default()
            },
        );
    }

    /// Releases a preempted job, charges the lost work, and puts it back in
    /// its queue; false for a stale timer, which does nothing. The caller
    /// asks for the cycle that comes next (the grace timer).
    pub(super) fn grace_over(&mut self, j: usize, epoch: u64) -> Result<bool, MixedError> {
        let job = &self.jobs[j];
        if job.done || job.epoch != epoch || job.phase() != Phase::Terminating {
            return Ok(false);
        }
        self.metrics_progress(j);
        let now = self.now();
        if self.jobs[j].run_since >= 0 {
            let ran = now - self.jobs[j].run_since;
            let lost = lost_work(
                self.jobs[j].checkpoint_every,
                self.jobs[j].job.spec.class,
                ran,
            );
            let job = &mut self.jobs[j];
            job.remaining = job.remaining - ran + lost;
            if job.remaining < SECOND {
                job.remaining = SECOND;
            }
            self.metrics_lost(j, lost);
        }
        self.release_all(j)?;
        let job = &mut self.jobs[j];
        job.epoch += 1;
        job.run_since = -1;
        self.stop_checkpoints(j);
        self.jobs[j].job.phase = Phase::Pending;
        self.back_to_pending(j);
        self.touch(j);
        self.owe[j].queued_at = now;
        self.owe[j].within = self.within_guarantee(j);
        Ok(true)
    }
}

/// The work a preempted job loses: what it did since its last checkpoint.
/// A production service is stateless (it loses nothing but availability);
/// other work without checkpoints loses the whole run.
pub(super) fn lost_work(every: Nanos, class: Class, ran: Nanos) -> Nanos {
    if every > 0 {
        ran % every
    } else if class == Class::Production {
        0
    } else {
        ran
    }
}

/// An assignment's grants as the trace prints them: `gpu0:1000 `,
/// `gpu3:1g.10gb@6 `, each followed by a space.
pub(super) fn grants_string(a: &Assignment) -> String {
    let mut out = String::new();
    for g in &a.grants {
        match &g.slice {
            Some(slice) => out += &format!("gpu{}:{slice} ", g.gpu),
            None => out += &format!("gpu{}:{} ", g.gpu, g.milli),
        }
    }
    out
}
