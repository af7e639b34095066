//! The world's compact views of its active jobs (Go's `lists.go`).
//!
//! The world's passes after each cycle look at the waiting jobs, at what
//! each team holds and at the running jobs' checkpoints. Reading every
//! unfinished job for them, nine in ten of them running and unchanged,
//! cost a cache miss per job and pass on a week of 1,000 GPUs
//! (docs/mixed.md, "Simulation speed"); these lists keep what the passes
//! need, in the order of `World::active`, so that every sum is taken in
//! the same order as over the jobs.

use std::cell::RefCell;

use super::MixedError;
use super::world::World;
use crate::sched::{Nanos, Phase};

/// The lists, by position in `World::active` where not said otherwise.
#[derive(Debug, Default)]
pub(super) struct Lists {
    /// Each active job's held GPU (`WJob::held_share`) and team position
    /// (`World::team_usage`).
    pub share: Vec<f64>,
    pub team: Vec<Option<usize>>,
    /// The pending active jobs, in the order of `World::active`, and
    /// their GPU demands (`WJob::milli`: the idle cause reads only the
    /// jobs that fit); `left` those that left pending since the last
    /// metrics check.
    pub pending: Vec<usize>,
    pub milli: Vec<i64>,
    /// The pending jobs' teams (`Owe::team`), by position in `pending`:
    /// the pass after each cycle (`outgrown`) reads a job's own record only
    /// when its team's holdings and its demand exceed the guarantee.
    pub pending_team: Vec<Option<usize>>,
    pub left: Vec<usize>,
    /// The running jobs that checkpoint: the scheduler must see each one's
    /// last checkpoint (it picks victims by the work they would lose).
    pub ckpt: Vec<Checkpointed>,
    /// Arrivals so far: `WJob::seq`.
    pub seq: usize,
    /// `World::team_usage` as last summed, until `share` or `team` change:
    /// the passes after each cycle, and every arrival, ask for it.
    pub usage: RefCell<Option<Vec<f64>>>,
}

/// A running job that checkpoints every `every` since `since`; `at` is
/// the checkpoint last written to the job (-1: none yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Checkpointed {
    pub j: usize,
    pub since: Nanos,
    pub every: Nanos,
    pub at: Nanos,
}

impl World<'_> {
    /// Adds j, just arrived and pending, to the active jobs.
    pub(super) fn arrive(&mut self, j: usize) {
        self.lists.seq += 1;
        self.jobs[j].seq = self.lists.seq;
        self.active.push(j);
        let l = &mut self.lists;
        l.usage = RefCell::new(None);
        l.share.push(self.jobs[j].held_share);
        l.team.push(self.owe[j].team);
        // The latest arrival: last in order.
        l.pending.push(j);
        l.milli.push(self.owe[j].milli);
        l.pending_team.push(self.owe[j].team);
    }

    /// Drops j, done, from the active jobs.
    pub(super) fn remove_active(&mut self, j: usize) {
        let Some(i) = self.active.iter().position(|&x| x == j) else {
            return;
        };
        self.active.remove(i);
        self.lists.usage = RefCell::new(None);
        self.lists.share.remove(i);
        self.lists.team.remove(i);
        self.gone.push(j);
        self.not_pending(j);
        self.stop_checkpoints(j);
    }

    /// Copies j's held share to the list.
    pub(super) fn held_changed(&mut self, j: usize) {
        if let Some(i) = self.active.iter().position(|&x| x == j) {
            self.lists.share[i] = self.jobs[j].held_share;
            self.lists.usage = RefCell::new(None);
        }
    }

    /// Puts j, active and pending again, back in the pending list at its
    /// place.
    pub(super) fn back_to_pending(&mut self, j: usize) {
        let seq = self.jobs[j].seq;
        let jobs = &self.jobs;
        let p = &mut self.lists.pending;
        let i = p.partition_point(|&x| jobs[x].seq < seq);
        if p.get(i) == Some(&j) {
            return;
        }
        p.insert(i, j);
        self.lists.milli.insert(i, self.owe[j].milli);
        self.lists.pending_team.insert(i, self.owe[j].team);
    }

    /// Drops j from the pending list; the next metrics check resets its
    /// owed state.
    pub(super) fn not_pending(&mut self, j: usize) {
        if let Some(i) = self.lists.pending.iter().position(|&x| x == j) {
            self.lists.pending.remove(i);
            self.lists.milli.remove(i);
            self.lists.pending_team.remove(i);
            self.lists.left.push(j);
        }
    }

    /// Whether a job waits.
    pub(super) fn any_pending(&self) -> bool {
        !self.lists.pending.is_empty()
    }

    /// Lists j, running from now, when it checkpoints.
    pub(super) fn start_checkpoints(&mut self, j: usize) {
        let every = self.jobs[j].checkpoint_every;
        if every > 0 {
            self.lists.ckpt.push(Checkpointed {
                j,
                since: self.jobs[j].run_since,
                every,
                at: -1,
            });
        }
    }

    /// Drops j, no longer running, from the checkpoint list.
    pub(super) fn stop_checkpoints(&mut self, j: usize) {
        self.lists.ckpt.retain(|c| c.j != j);
    }

    /// Writes each running job's last checkpoint, where it moved.
    pub(super) fn checkpoints(&mut self) {
        let now = self.now();
        for c in &mut self.lists.ckpt {
            let at = c.since + (now - c.since) / c.every * c.every;
            if at != c.at {
                c.at = at;
                self.jobs[c.j].job.checkpoint = at;
            }
        }
    }

    /// Says where the lists differ from the active jobs (`Options::check`).
    pub(super) fn check_lists(&self) -> Result<(), MixedError> {
        let l = &self.lists;
        if l.share.len() != self.active.len() || l.team.len() != self.active.len() {
            return Err(MixedError::world(format!(
                "lists of {} and {} shares and teams for {} active jobs",
                l.share.len(),
                l.team.len(),
                self.active.len()
            )));
        }
        let mut pending = Vec::new();
        let mut running = 0;
        for (i, &j) in self.active.iter().enumerate() {
            let job = &self.jobs[j];
            if l.share[i] != job.held_share || l.team[i] != self.owe[j].team {
                return Err(MixedError::world(format!(
                    "job {}: listed as holding {} of team {}, holds {} of team {}",
                    job.id(),
                    l.share[i],
                    team_number(l.team[i]),
                    job.held_share,
                    team_number(self.owe[j].team)
                )));
            }
            if job.phase() == Phase::Pending {
                pending.push(j);
            }
            if job.run_since >= 0 && job.checkpoint_every > 0 {
                running += 1;
                if !l.ckpt.iter().any(|c| c.j == j && c.since == job.run_since) {
                    return Err(MixedError::world(format!(
                        "job {}: runs and checkpoints, not listed so",
                        job.id()
                    )));
                }
            }
        }
        if pending != l.pending {
            return Err(MixedError::world(format!(
                "{} jobs listed as pending, {} pending",
                l.pending.len(),
                pending.len()
            )));
        }
        if l.milli.len() != pending.len() || l.pending_team.len() != pending.len() {
            return Err(MixedError::world(format!(
                "{} demands listed for {} pending jobs",
                l.milli.len(),
                pending.len()
            )));
        }
        for (i, &j) in pending.iter().enumerate() {
            if l.milli[i] != self.owe[j].milli {
                return Err(MixedError::world(format!(
                    "job {}: listed as asking {} milli, asks {}",
                    self.jobs[j].id(),
                    l.milli[i],
                    self.owe[j].milli
                )));
            }
            if l.pending_team[i] != self.owe[j].team {
                return Err(MixedError::world(format!(
                    "job {}: listed as waiting in team {}, is of team {}",
                    self.jobs[j].id(),
                    team_number(l.pending_team[i]),
                    team_number(self.owe[j].team)
                )));
            }
        }
        if running != l.ckpt.len() {
            return Err(MixedError::world(format!(
                "{} jobs listed as checkpointing, {} run and checkpoint",
                l.ckpt.len(),
                running
            )));
        }
        Ok(())
    }
}

/// A team position as the Go build prints it (-1: none).
fn team_number(t: Option<usize>) -> i64 {
    t.map_or(-1, |t| t as i64)
}
