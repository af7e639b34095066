//! The cycle itself, a short driver over the other modules:
//!
//!  1. snapshot: plan on a copy of the cluster; count what each team holds;
//!  2. order the pending jobs: by standing, class, fairness, then age;
//!  3. for each job (`consider`): quota, then place (all tasks at once for
//!     a gang), honouring reservations and promises;
//!  4. a job that does not fit may get a MIG re-partition, preempt
//!     victims, have services moved, or (a gang that has waited long)
//!     reserve nodes (`after_miss`);
//!  5. the warm pool, and the decision.

use std::collections::{BTreeMap, HashSet};

use super::Scheduler;
use super::place::pending_tasks;
use super::snapshot::Cycle;
use super::types::{Decision, Input, Job, Phase, READ_AHEAD, Wait, WaitReason};
use crate::placement::Request;
use crate::workload::Kind;

impl Scheduler {
    /// Decides what to start, preempt, move and re-partition now. A full
    /// cycle takes `input.waiting` for its own, leaving `None`; a light one
    /// leaves it.
    pub fn cycle(&mut self, input: &mut Input<'_>) -> Decision {
        let recycled = if input.only.is_none() {
            input.waiting.take()
        } else {
            None
        };
        let input: &Input<'_> = input;
        let mut c = self.snapshot(input);
        self.settle_promises(&mut c);
        self.refresh_reservation(&c);
        if let Some(only) = input.only {
            // A light cycle: the jobs that just arrived, in their order.
            let mut seen = HashSet::new();
            for id in only {
                if !seen.insert(id.as_str()) {
                    continue;
                }
                let Some(j) = self.job(&c, id).filter(|j| j.phase == Phase::Pending) else {
                    continue;
                };
                if let Some(reason) = self.consider(&mut c, j) {
                    self.wait(&mut c, j, 0, reason);
                    self.note_retry(&mut c, j);
                }
            }
            self.note_starts(&c);
            return c.d;
        }
        let pending = self.order(&mut c, input.incremental);
        c.d.waiting = match recycled {
            Some(mut w) => {
                w.clear();
                w
            }
            None => Vec::with_capacity(pending.len()),
        };
        // Queue positions per team, by the team's position in the input;
        // teams not in the input in a map.
        let mut positions = vec![0usize; input.teams.len()];
        let mut others: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, &j) in pending.iter().enumerate() {
            if let Some(ahead) = pending.get(i + READ_AHEAD) {
                ahead.touch();
            }
            // Its entry, found from the mark read before.
            if let Some(ahead) = pending.get(i + READ_AHEAD / 2) {
                self.table.touch(ahead);
            }
            let team = self.team_pos(&c, j);
            let pos = if team >= 0 {
                &mut positions[team as usize]
            } else {
                others.entry(j.spec.team.as_str()).or_insert(0)
            };
            *pos += 1;
            let at = *pos;
            match self.consider(&mut c, j) {
                Some(reason) => {
                    self.wait(&mut c, j, at, reason);
                    self.note_retry(&mut c, j);
                }
                None => {
                    let pos = if team >= 0 {
                        &mut positions[team as usize]
                    } else {
                        others.entry(j.spec.team.as_str()).or_insert(0)
                    };
                    *pos -= 1;
                }
            }
        }
        self.warm(&mut c);
        c.d
    }

    /// Notes why `j` waits and its place in its team's queue.
    fn wait(&self, c: &mut Cycle<'_>, j: &Job, position: usize, reason: WaitReason) {
        c.d.waiting
            .push((c.index_of(self, j), Wait { position, reason }));
    }

    /// Forgets promises whose victims have all left. The nodes of a settled
    /// promise stay held for one cycle, the one in which the job can take
    /// them, or for as long as a MIG change asked for the job is applied;
    /// after that they are freed whether it started or not. (Freed while
    /// the change ran, the victims' GPUs went back to the victims, and the
    /// job evicted them again when the change was done.)
    fn settle_promises(&mut self, c: &mut Cycle<'_>) {
        c.holdings += 1; // the claims in flight may change (within_guarantee)
        let settled: Vec<String> = self
            .promised_nodes
            .keys()
            .filter(|job| {
                !self.promised.contains_key(*job)
                    && !self.moving.contains_key(*job)
                    && !self.change_pending(c, job)
            })
            .cloned()
            .collect();
        for job in settled {
            self.promised_nodes.remove(&job);
        }
        let jobs: Vec<String> = self.moving.keys().cloned().collect();
        for job in jobs {
            if self.job(c, &job).is_none_or(|j| j.phase != Phase::Pending) {
                self.moving.remove(&job);
                self.promised_nodes.remove(&job);
                continue;
            }
            if Scheduler::moves_done(c, &self.moving[&job]) {
                self.moving.remove(&job); // its nodes stay held for this cycle, as below
            }
        }
        let jobs: Vec<String> = self.promised.keys().cloned().collect();
        for job in jobs {
            if self.job(c, &job).is_none_or(|j| j.phase != Phase::Pending) {
                self.promised.remove(&job);
                self.promised_nodes.remove(&job);
                continue;
            }
            let victims = self.promised.remove(&job).unwrap_or_default();
            let alive: Vec<String> = victims
                .into_iter()
                .filter(|v| {
                    self.job(c, v)
                        .is_some_and(|vj| vj.phase == Phase::Terminating)
                })
                .collect();
            // With none left the nodes stay held for this cycle: the job is
            // considered in its turn and takes them; commit or the next
            // settle frees them.
            if !alive.is_empty() {
                self.promised.insert(job, alive);
            }
        }
    }

    /// Tries to start one pending job; none when it started, else why it
    /// waits.
    fn consider<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> Option<WaitReason> {
        if let Some(why) = self.invalid(c, j) {
            return Some(why);
        }
        self.clear_on_claim(c, j);
        self.note_owed(c, j);
        if !self.within_quota(c, j) {
            self.hold_quota(c, j);
            return Some(WaitReason::Quota);
        }
        if self.promised.contains_key(j.id()) {
            self.whole_during_grace(c, j);
            return Some(WaitReason::Preempting);
        }
        if self.moving.contains_key(j.id()) {
            return Some(WaitReason::Moving);
        }
        if let Some(why) = self.kept_for_production(c, j) {
            return Some(why);
        }
        // Besides the shape, the class and team decide (holds,
        // reservations, guarantees), and whether j may backfill before a
        // reservation. (Not the estimate itself: with it in the key, no two
        // jobs shared one, and a backlog of thousands cost a placement
        // each, every cycle.)
        let backfills = self.backfills(c, j);
        let key = self.shape(j).ids[usize::from(backfills)];
        let mut failed = c.failed.get(&key).cloned();
        if self.holds_nodes(j) {
            // Nodes kept for j (its promise, its reservation) were closed
            // to the jobs that failed before it: its own attempt differs.
            failed = None;
        }
        if let Some(why) = &failed
            && (!self.cfg.gangs || self.search_due(c, j).is_none())
        {
            return Some(why.clone());
        }
        let reqs = match self.requests(j) {
            Ok(reqs) => reqs,
            Err(err) => return Some(WaitReason::invalid(err)),
        };
        let why = {
            let refs: Vec<&Request> = reqs.iter().collect();
            self.place_or_miss(c, j, &refs, key, failed)
        };
        self.give_back(j, reqs);
        why
    }

    /// `consider` once `j`'s requests are ready: place it, or handle the
    /// miss.
    fn place_or_miss<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
        key: u32,
        failed: Option<WaitReason>,
    ) -> Option<WaitReason> {
        if let Some(why) = failed {
            // Within a cycle room only shrinks: placing or re-partitioning
            // would fail again. Only evicting someone can change the
            // answer.
            return Some(self.search_victims(c, j, reqs).unwrap_or(why));
        }
        if !self.cfg.gangs {
            let why = self.place_one_by_one(c, j, reqs);
            if why == Some(WaitReason::NoRoom) {
                c.failed.insert(key, WaitReason::NoRoom);
            }
            return why;
        }
        let idx = pending_tasks(j);
        let mut left: Vec<&Request> = Vec::new();
        let reqs: &[&Request] = if !j.spec.is_gang() && reqs.len() > 1 {
            // Replicas that need not start together: start each that fits.
            for (k, &r) in reqs.iter().enumerate() {
                if !self.try_start(c, j, &idx[k..k + 1], &reqs[k..k + 1]) {
                    left.push(r);
                }
            }
            if left.is_empty() {
                return None;
            }
            &left
        } else {
            if self.try_start(c, j, &idx, reqs) {
                return None;
            }
            reqs
        };
        let why = self.after_miss(c, j, reqs);
        if matches!(
            why,
            WaitReason::NoRoom | WaitReason::Gang | WaitReason::NoSlice | WaitReason::Reserved
        ) {
            c.failed.insert(key, why.clone());
        }
        Some(why)
    }

    /// A job that did not fit: MIG re-partitioning, preemption, moves,
    /// reservation, in that order.
    fn after_miss<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, reqs: &[&Request]) -> WaitReason {
        if self.cfg.mig
            && let Some(why) = self.repartition(c, j, reqs)
        {
            return why;
        }
        if let Some(why) = self.search_victims(c, j, reqs) {
            return why;
        }
        if let Some(why) = self.consolidate(c, j, reqs, false) {
            return why;
        }
        if self.cfg.reserve
            && j.spec.is_gang()
            && self.reservation.is_none()
            && c.now - j.submitted >= self.cfg.reserve_after
        {
            self.reserve(c, j, reqs);
        }
        if let Some(holder) = self.reservation.as_ref().map(|r| r.job.clone())
            && holder != j.id()
            && self.outranks_reserved(c, &holder, j)
        {
            return WaitReason::Reserved;
        }
        if reqs.len() > 1 && j.spec.is_gang() {
            return WaitReason::Gang;
        }
        let k = reqs[0].kind();
        if k == Kind::MigProfile || k == Kind::MemoryProfile && self.cfg.mig {
            return WaitReason::NoSlice;
        }
        WaitReason::NoRoom
    }
}
