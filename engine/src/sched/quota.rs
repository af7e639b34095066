//! Quota arithmetic: a team's limit (its burst when borrowing is on, its
//! guarantee otherwise), a gang holding its team's quota, whether a job is
//! within its team's guarantee (and so may reclaim from borrowers).
//! Everything is GPU milli; a MIG slice counts its compute share and a
//! memory profile its nominal share until it is placed.

use super::Scheduler;
use super::snapshot::Cycle;
use super::types::{Job, Nanos, Phase};
use crate::workload::Task;

/// What a job will add to its team's usage: its tasks not placed yet.
pub(super) fn demand(j: &Job) -> i64 {
    let mut total = 0;
    for (i, t) in j.spec.tasks.iter().enumerate() {
        if j.placed.get(i).is_some_and(Option::is_some) {
            continue;
        }
        total += task_milli(t);
    }
    total
}

/// The GPU milli one task asks for.
pub(super) fn task_milli(t: &Task) -> i64 {
    t.gpu.nominal_milli()
}

impl Scheduler {
    /// The most `j`'s team may hold: its burst when borrowing is on, its
    /// guarantee otherwise. A team that is not configured has no quota.
    pub(super) fn limit(&self, c: &Cycle<'_>, j: &Job) -> Option<i64> {
        let t = self.team_of(c, j)?;
        if self.cfg.borrow {
            Some(t.burst.max(t.guarantee))
        } else {
            Some(t.guarantee)
        }
    }

    /// `demand(j)` from the scheduler's cache.
    pub(super) fn demand_of(&mut self, j: &Job) -> i64 {
        self.shape(j).demand
    }

    /// Whether `j` fits its team's limit, leaving room for a gang of its
    /// team that holds the quota (`hold_quota`): small jobs must not keep a
    /// big one out of its own team's quota for ever.
    pub(super) fn within_quota<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> bool {
        let Some(lim) = self.limit(c, j) else {
            return true;
        };
        let mut need = self.usage_of(c, j) + self.demand_of(j);
        let holder = self
            .quota_hold
            .get(&j.spec.team)
            .filter(|hid| hid.as_str() != j.id())
            .and_then(|hid| self.job(c, hid));
        if let Some(h) = holder
            && h.phase == Phase::Pending
            && h.spec.class >= j.spec.class
            && !self.passes_hold(c, j, h)
            && !self.quota_backfills(c, j, h)
        {
            need += self.demand_of(h);
        }
        need <= lim
    }

    /// Whether `j` starts despite its team's gang `h` holding the quota:
    /// `j` is within the team's guarantee and `h` asks for more than the
    /// guarantee, so `h` can only ever run on borrowed capacity, and
    /// borrowing must not keep a team from what it is guaranteed. A gang
    /// that fits the guarantee still holds it: the team drains to it.
    fn passes_hold<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, h: &'a Job) -> bool {
        let Some(t) = self.team_of(c, j) else {
            return false;
        };
        let guarantee = t.guarantee;
        self.demand_of(h) > guarantee && self.within_guarantee(c, j)
    }

    /// Whether `j`, of the team whose quota gang `h` holds, ends by its
    /// estimate before the team's running work, by theirs, has freed the
    /// quota `h` waits for: then `j` delays `h` by nothing, as a job
    /// backfilled on a gang's reserved nodes.
    fn quota_backfills<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, h: &'a Job) -> bool {
        if j.estimate <= 0 {
            return false;
        }
        let ready = self.quota_ready_at(c, h);
        ready > 0 && c.now + j.estimate <= ready
    }

    /// When, by the estimates of its team's running jobs, `h`'s team will
    /// have freed enough of its quota for `h`: now when `h` fits it now, 0
    /// when unknown. Computed once a cycle per gang: the jobs started in
    /// the cycle by `quota_backfills` end before it.
    fn quota_ready_at<'a>(&mut self, c: &mut Cycle<'a>, h: &'a Job) -> Nanos {
        if let Some(&at) = c.quota_ready.get(h.id()) {
            return at;
        }
        let at = self.quota_free_at(c, h);
        c.quota_ready.insert(h.id().to_string(), at);
        at
    }

    /// Computes `quota_ready_at`.
    fn quota_free_at<'a>(&mut self, c: &mut Cycle<'a>, h: &'a Job) -> Nanos {
        let Some(lim) = self.limit(c, h) else {
            return 0;
        };
        let mut short = self.usage_of(c, h) + self.demand_of(h) - lim;
        if short <= 0 {
            return c.now;
        }
        let mut rs: Vec<(Nanos, i64)> = Vec::new();
        for &v in c.jobs {
            if v.phase == Phase::Pending || v.spec.team != h.spec.team {
                continue;
            }
            let held = self.held_of(v);
            if held > 0 && v.estimate > 0 {
                rs.push(((v.started + v.estimate).max(c.now), held));
            }
        }
        // Ties in time give the same answer in any order.
        rs.sort_unstable_by_key(|r| r.0);
        for (at, milli) in rs {
            short -= milli;
            if short <= 0 {
                return at;
            }
        }
        0
    }

    /// Lets a gang that has waited `reserve_after` on its team's quota hold
    /// it: from then on, jobs of its team and class or lower start only if
    /// they leave the gang its share, so the quota drains to it as running
    /// work ends.
    pub(super) fn hold_quota<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        if !self.cfg.reserve || !j.spec.is_gang() || c.now - j.submitted < self.cfg.reserve_after {
            return;
        }
        match self.limit(c, j) {
            Some(lim) if self.demand_of(j) <= lim => {}
            // It can never fit its team's quota; holding would block the
            // team for ever.
            _ => return,
        }
        if let Some(hid) = self.quota_hold.get(&j.spec.team)
            && self.job(c, hid).is_some_and(|h| h.phase == Phase::Pending)
        {
            return;
        }
        self.quota_hold
            .insert(j.spec.team.clone(), j.id().to_string());
    }

    /// Whether starting `j` keeps its team within its guarantee: then the
    /// team is entitled to reclaim from borrowers. The team's claims in
    /// flight (jobs promised nodes, waiting for victims to leave or
    /// replicas to move) count as held: each of a team's pending fine-tunes
    /// thought itself owed while the first made room, and made room too,
    /// taking the first's.
    pub(super) fn within_guarantee(&mut self, c: &mut Cycle<'_>, j: &Job) -> bool {
        let addr = std::ptr::from_ref(j) as usize;
        let (last, holdings, within) = c.last_within.get();
        if last == addr && holdings == c.holdings {
            return within;
        }
        let within = self.within_guarantee_now(c, j);
        c.last_within.set((addr, c.holdings, within));
        within
    }

    /// `within_guarantee` without the memory of the last answer.
    fn within_guarantee_now(&mut self, c: &mut Cycle<'_>, j: &Job) -> bool {
        let p = self.team_pos(c, j);
        if p < 0 {
            return false;
        }
        let guarantee = c.teams[p as usize].guarantee;
        let use_ = c.use_[p as usize] + self.demand_of(j);
        if use_ > guarantee {
            return false;
        }
        if self.promised_nodes.is_empty() {
            return true;
        }
        if c.in_flight.is_none() {
            let mut in_flight = vec![0; c.teams.len()];
            let ids: Vec<String> = self.promised_nodes.keys().cloned().collect();
            for id in ids {
                if let Some(h) = self.job(c, &id)
                    && h.phase == Phase::Pending
                {
                    let hp = self.team_pos(c, h);
                    if hp >= 0 {
                        in_flight[hp as usize] += self.demand_of(h);
                    }
                }
            }
            c.in_flight = Some(in_flight);
        }
        let mut flight = c.in_flight.as_ref().expect("computed above")[p as usize];
        if flight == 0 {
            return true;
        }
        if self.promised_nodes.contains_key(j.id()) {
            flight -= self.demand_of(j); // counted once
        }
        use_ + flight <= guarantee
    }

    /// Whether `v`'s team holds more than its guarantee.
    pub(super) fn borrowing(&self, c: &Cycle<'_>, v: &Job) -> bool {
        borrowing_at(c, self.team_pos(c, v))
    }
}

/// `borrowing` for the team at position `p` of the input (none: -1).
pub(super) fn borrowing_at(c: &Cycle<'_>, p: isize) -> bool {
    p >= 0 && c.use_[p as usize] > c.teams[p as usize].guarantee
}
