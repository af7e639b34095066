//! Priority preemption: who may evict whom (classes, guarantees, borrowed
//! capacity, protected production), in which order victims are taken
//! (losing the least: borrowed first, checkpoints), and the bookkeeping of
//! a search: backoffs, rounds, the promise of the victims' nodes. The
//! search itself is `victims.rs`.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::Scheduler;
use super::quota::borrowing_at;
use super::snapshot::Cycle;
use super::types::{HOUR, Job, MINUTE, Nanos, Phase, Preemption, Retry, SECOND, WaitReason};
use crate::placement::Request;
use crate::workload::{Class, Kind};

/// How long a job waits for its next victim search after one found
/// nothing.
pub(super) const SEARCH_BACKOFF_FOR: Nanos = 2 * MINUTE;

/// The same for production and guarantee claims.
pub(super) const URGENT_BACKOFF_FOR: Nanos = 15 * SECOND;

/// Preemption rounds a job may make without starting before its searches
/// back off, up to `MAX_ROUND_BACKOFF`.
pub(super) const FREE_ROUNDS: i32 = 3;
const MAX_ROUND_BACKOFF: Nanos = HOUR;

/// Bounds the victim searches of one cycle: the first jobs in order get
/// them; the rest try again next cycle. A search places the job dozens of
/// times, and a long backlog would otherwise search every cycle.
pub(super) const MAX_SEARCHES: usize = 2;

/// Bounds a search: past it, preemption gives up for this job this cycle
/// rather than evict half the cluster.
pub(super) const MAX_VICTIMS: usize = 32;

/// A team with running jobs and its lowest running class.
#[derive(Debug, Clone)]
pub(super) struct TeamLow {
    team: String,
    /// In the input, -1: not there.
    pos: isize,
    low: Class,
}

/// Orders a key that is true first (the two differ).
fn before(x: bool) -> Ordering {
    if x { Ordering::Less } else { Ordering::Greater }
}

/// Whether a task of `v` asks for whole GPUs. `protect_production` spares
/// production on MIG instances only: a 70B service beyond its team's
/// guarantee holds 4 whole GPUs, which another team's 1-GPU experiments
/// are owed.
pub(super) fn on_whole_gpus(v: &Job) -> bool {
    v.spec.tasks.iter().any(|t| t.gpu.kind == Kind::WholeGpus)
}

/// Whether `v` was preempted in this cycle.
pub(super) fn preempted_this_cycle(c: &Cycle<'_>, v: &Job) -> bool {
    c.d.preemptions.iter().any(|p| p.job == v.id())
}

impl Scheduler {
    /// The key of jobs whose victim searches would find the same: the same
    /// shape, class, team standing.
    pub(super) fn preempt_key<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> u32 {
        if self.protection_lapsed(c, j) {
            return self.shape(j).ids[2]; // it may evict what the others may not
        }
        let within = self.within_guarantee(c, j);
        self.shape(j).ids[usize::from(within)]
    }

    /// Whether `j` may evict anyone at all: it outranks some running job,
    /// or its team is reclaiming its guarantee from borrowers. It reads a
    /// per-cycle summary of the running jobs and may say yes where the
    /// search finds no victim; never no where it would.
    pub(super) fn may_preempt<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> bool {
        if !self.cfg.preempt {
            return false;
        }
        if c.lowest.is_none() {
            c.lowest = Some(self.running_summary(c));
        }
        let within = self.within_guarantee(c, j);
        // The answer depends on j only by team, class and standing, and on
        // the plan by what each team holds: it is kept until the plan
        // changes.
        let i = may_index(c, self.team_pos(c, j), j.spec.class, within);
        if let Some(i) = i
            && c.may_memo[i] != 0
        {
            return c.may_memo[i] == 2;
        }
        let mut may = false;
        for tl in c.lowest.as_ref().expect("computed above") {
            may = if tl.team == j.spec.team {
                tl.low < j.spec.class
            } else if borrowing_at(c, tl.pos) {
                tl.low < j.spec.class || within
            } else {
                tl.low < j.spec.class && j.spec.class == Class::Production && within
            };
            if may {
                break;
            }
        }
        if let Some(i) = i {
            c.may_memo[i] = 1 + i8::from(may);
        }
        may
    }

    /// Each team with running jobs and its lowest running class.
    fn running_summary(&self, c: &Cycle<'_>) -> Vec<TeamLow> {
        let mut out: Vec<TeamLow> = Vec::new();
        let mut at = vec![0usize; c.teams.len()]; // 1 + position in out, by team position
        let mut others: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        for &v in c.jobs {
            if v.phase != Phase::Running {
                continue;
            }
            let t = self
                .table
                .slot(v)
                .map_or(-1, |s| self.table.entries[s].held.team);
            let k;
            if t >= 0 {
                k = at[t as usize];
                if k == 0 {
                    out.push(TeamLow {
                        team: v.spec.team.clone(),
                        pos: t,
                        low: v.spec.class,
                    });
                    at[t as usize] = out.len();
                    continue;
                }
            } else {
                match others.get(v.spec.team.as_str()) {
                    Some(&x) => k = x,
                    None => {
                        out.push(TeamLow {
                            team: v.spec.team.clone(),
                            pos: -1,
                            low: v.spec.class,
                        });
                        others.insert(&v.spec.team, out.len());
                        continue;
                    }
                }
            }
            if v.spec.class < out[k - 1].low {
                out[k - 1].low = v.spec.class;
            }
        }
        out
    }

    /// Whether running job `v` may be evicted for pending job `j`:
    ///   - a lower class of the same team;
    ///   - a lower class of a team that is borrowing;
    ///   - when `j`'s team is within its guarantee: any job of a team that
    ///     is borrowing (reclaim). Borrowed capacity is reclaimable whatever
    ///     its class: production within its team's guarantee always runs,
    ///     but production beyond it runs on someone else's guarantee.
    ///
    /// A team is never taken below its own guarantee for another team,
    /// except by production work within its own team's guarantee evicting
    /// a lower class, and by reclaim evicting a batch or best-effort job
    /// that straddles its team's guarantee (ranked after every job that
    /// does not). With `protect_production`, best-effort work does not
    /// evict another team's production on MIG instances until it has been
    /// owed its team's guarantee for `protect_production_for`. Production
    /// that straddles its team's guarantee on whole GPUs goes to a claim
    /// that is not production once it has been owed a while.
    pub(super) fn eligible<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, v: &'a Job) -> bool {
        if v.phase != Phase::Running || v.id() == j.id() {
            return false;
        }
        let lower = v.spec.class < j.spec.class;
        if v.spec.team == j.spec.team {
            return lower;
        }
        let vp = self.team_pos(c, v);
        if !borrowing_at(c, vp) {
            return lower && j.spec.class == Class::Production && self.within_guarantee(c, j);
        }
        let keeps_guarantee = !self.straddles(c, v);
        if lower
            && (keeps_guarantee || j.spec.class == Class::Production && self.within_guarantee(c, j))
        {
            return true;
        }
        // Reclaim. A job that straddles its team's guarantee goes too,
        // after the others (victim_order ranks it last): otherwise a
        // 16-GPU gang 5 GPUs over holds 5 borrowed GPUs that no reclaim
        // can take back. Not production, which within its team's
        // guarantee always runs.
        if self.cfg.protect_production
            && j.spec.class == Class::BestEffort
            && v.spec.class == Class::Production
            && !on_whole_gpus(v)
            && !self.protection_lapsed(c, j)
        {
            return false;
        }
        self.within_guarantee(c, j)
            && (keeps_guarantee
                || v.spec.class < Class::Production
                || self.reclaims_straddling(c, j, v))
    }

    /// Whether `j`, a claim of another team that is not production, may
    /// take back the borrowed part of production `v` by evicting it all:
    /// `v` runs on whole GPUs and straddles its team's guarantee, and `j`
    /// has been owed for `reclaim_straddling_after`. Production claims do
    /// not: two teams' services would evict each other in turn. Services
    /// on MIG instances move instead (`moves.rs`).
    fn reclaims_straddling<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, v: &'a Job) -> bool {
        self.cfg.reclaim_straddling_after > 0
            && j.spec.class != Class::Production
            && v.spec.class == Class::Production
            && on_whole_gpus(v)
            && self.owed_for(c, j, self.cfg.reclaim_straddling_after)
    }

    /// Checks a borrower's victim set as a whole against the rule
    /// `eligible` applies to each victim alone: another team is not taken
    /// below its guarantee by a job beyond its own. A claim within its
    /// guarantee reclaims as `eligible` says.
    pub(super) fn keeps_guarantees<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        victims: &[&'a Job],
    ) -> bool {
        if self.within_guarantee(c, j) {
            return true;
        }
        let mut held = vec![0i64; c.teams.len()];
        let mut seen = vec![false; c.teams.len()];
        for &v in victims {
            let p = self.team_pos(c, v);
            if p >= 0 && v.spec.team != j.spec.team {
                held[p as usize] += self.held_of(v);
                seen[p as usize] = true;
            }
        }
        (0..held.len()).all(|p| !seen[p] || c.use_[p] - held[p] >= c.teams[p].guarantee)
    }

    /// Whether evicting `v` would take its team below its guarantee.
    pub(super) fn straddles(&self, c: &Cycle<'_>, v: &Job) -> bool {
        let p = self.team_pos(c, v);
        p >= 0 && c.use_[p as usize] - self.held_of(v) < c.teams[p as usize].guarantee
    }

    /// Whether evicting `victims` for `j` takes another team below its
    /// guarantee.
    fn takes_guarantee(&self, c: &Cycle<'_>, j: &Job, victims: &[&Job]) -> bool {
        victims
            .iter()
            .any(|v| v.spec.team != j.spec.team && self.straddles(c, v))
    }

    /// Sorts `cands` in the order victims are taken, losing the least:
    /// borrowed capacity first, then jobs that do not take their team below
    /// its guarantee, then the lowest class, then the most recent
    /// checkpoint (least work lost), then the fewest GPUs, then the ID.
    pub(super) fn victim_order<'a>(&self, c: &Cycle<'a>, cands: &mut [&'a Job]) {
        struct Ranked<'a> {
            v: &'a Job,
            borrowing: bool,
            straddles: bool,
            lost: Nanos,
            held: i64,
        }
        let mut rs: Vec<Ranked<'a>> = cands
            .iter()
            .map(|&v| Ranked {
                v,
                borrowing: self.borrowing(c, v),
                straddles: self.straddles(c, v),
                lost: c.now - v.checkpoint,
                held: self.held_of(v),
            })
            .collect();
        rs.sort_by(|x, y| {
            if x.borrowing != y.borrowing {
                return before(x.borrowing);
            }
            if x.straddles != y.straddles {
                return before(!x.straddles);
            }
            x.v.spec
                .class
                .cmp(&y.v.spec.class)
                .then(x.lost.cmp(&y.lost))
                .then(x.held.cmp(&y.held))
                .then_with(|| x.v.id().cmp(y.v.id()))
        });
        for (slot, r) in cands.iter_mut().zip(rs) {
            *slot = r.v;
        }
    }

    /// A victim's weight in `cheapest_node`: one that would take its team
    /// below its guarantee counts as many.
    pub(super) fn victim_cost(&self, c: &Cycle<'_>, v: &Job) -> usize {
        if self.straddles(c, v) { MAX_VICTIMS } else { 1 }
    }

    /// Whether `j` may and should search for victims now: the cheap checks,
    /// made before its requests are built. It returns the search key when
    /// it is due.
    pub(super) fn search_due<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> Option<u32> {
        if c.searches >= MAX_SEARCHES
            || c.now < self.memory_of(j).map_or(0, |m| m.search_backoff)
            || !self.may_preempt(c, j)
        {
            return None;
        }
        let key = self.preempt_key(c, j);
        let until = self.no_victims_until.get(&key).copied().unwrap_or(0);
        (!c.no_victims.contains(&key) && c.now >= until).then_some(key)
    }

    /// Preempts for `j` when it may and a search is due; it returns
    /// `Preempting` (or `Moving`) when it did.
    pub(super) fn search_victims<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
    ) -> Option<WaitReason> {
        let key = self.search_due(c, j)?;
        c.searches += 1;
        if let Some((victims, nodes)) = self.victims(c, j, reqs)
            && !victims.is_empty()
            && self.keeps_guarantees(c, j, &victims)
        {
            // Victims that take another team below its guarantee leave that
            // team owed in turn: moving services to make the room goes
            // first, but only moves that can be made now (consolidate's
            // now_only).
            if self.takes_guarantee(c, j, &victims)
                && let Some(why) = self.consolidate(c, j, reqs, true)
            {
                return Some(why);
            }
            self.preempt(c, j, &victims, nodes);
            if let Some(m) = self.memory_mut(j) {
                m.search_backoff = 0;
            }
            self.count_round(c, j);
            return Some(WaitReason::Preempting);
        }
        c.no_victims.insert(key);
        // j searches again after SEARCH_BACKOFF_FOR, or soon when it claims
        // its guarantee or is production (promised a quick start). Jobs of
        // the same key would find the same: none searches before j does
        // again.
        let wait = if j.spec.class == Class::Production || self.within_guarantee(c, j) {
            URGENT_BACKOFF_FOR
        } else {
            SEARCH_BACKOFF_FOR
        };
        if let Some(m) = self.memory_mut(j) {
            m.search_backoff = c.now + wait;
        }
        self.note_backoff(c, j);
        self.no_victims_until.insert(key, c.now + wait);
        None
    }

    /// Asks the world for a cycle of `j` when the production protection
    /// against it lapses, if `j` is a best-effort claim whose search waits
    /// for that: the protection lasts `protect_production_for` so that the
    /// claim's second search may evict and it still starts within the
    /// guarantee's 60 s + grace; with no cycle then, the second search
    /// waited for the periodic look. Held off by its own search, or by one
    /// of another job of its key that found nothing.
    pub(super) fn note_retry<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        if self.cfg.protect_production_for <= 0
            || j.spec.class != Class::BestEffort
            || !self.within_guarantee(c, j)
        {
            return;
        }
        let Some(since) = self.memory_of(j).and_then(|m| m.owed_since) else {
            return; // lapsed already (protection_lapsed)
        };
        let lapses = since + self.cfg.protect_production_for;
        if c.now >= lapses {
            return;
        }
        let own = self.memory_of(j).map_or(0, |m| m.search_backoff);
        let key = self.preempt_key(c, j);
        let at = own.max(self.no_victims_until.get(&key).copied().unwrap_or(0));
        if at <= c.now {
            return; // no search held off
        }
        c.d.retries.push(Retry {
            job: j.id().to_string(),
            at: at.max(lapses),
        });
    }

    /// Records when `j`, waiting, was first seen within its team's
    /// guarantee, and forgets it once `j` is not.
    pub(super) fn note_owed<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        let within = self.within_guarantee(c, j);
        let now = c.now;
        if let Some(m) = self.memory_mut(j) {
            if !within {
                m.owed_since = None;
            } else if m.owed_since.is_none() {
                m.owed_since = Some(now);
            }
        }
    }

    /// Whether `j`, a best-effort claim, has been within its team's
    /// guarantee for `protect_production_for` and may now evict another
    /// team's borrowed production on MIG instances.
    pub(super) fn protection_lapsed<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> bool {
        if self.cfg.protect_production_for <= 0 || j.spec.class != Class::BestEffort {
            return false;
        }
        self.owed_for(c, j, self.cfg.protect_production_for)
    }

    /// Whether `j` has been within its team's guarantee for `d` or more.
    pub(super) fn owed_for<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, d: Nanos) -> bool {
        let Some(since) = self.memory_of(j).and_then(|m| m.owed_since) else {
            return false;
        };
        c.now - since >= d && self.within_guarantee(c, j)
    }

    /// Marks `j`, held off just now, if it is beyond its team's guarantee.
    pub(super) fn note_backoff<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        if !self.within_guarantee(c, j)
            && let Some(s) = self.table.slot(j)
        {
            self.table.entries[s].held.held_off = true;
        }
    }

    /// Counts a preemption round of `j`, made by its victim search or by a
    /// move plan that evicts. Past the free rounds, `j`'s next round waits
    /// twice as long as the one before, and so does its next victim
    /// search: a borrowed fine-tune relocated the same five experiments
    /// every 90 s for hours otherwise.
    pub(super) fn count_round<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        let now = c.now;
        let Some(m) = self.memory_mut(j) else {
            return;
        };
        m.rounds += 1;
        let k = m.rounds - FREE_ROUNDS;
        if k > 0 {
            let until = now + (SEARCH_BACKOFF_FOR << (k - 1).min(5)).min(MAX_ROUND_BACKOFF);
            m.search_backoff = until;
            m.rounds_until = until;
            self.note_backoff(c, j);
        }
    }

    /// Lifts the backoffs a job earned beyond its team's guarantee once it
    /// is within it: it searches, re-partitions and preempts as a claim at
    /// once.
    pub(super) fn clear_on_claim<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        let Some(s) = self.table.slot(j) else {
            return;
        };
        if !self.table.entries[s].held.held_off || !self.within_guarantee(c, j) {
            return;
        }
        self.table.entries[s].held.held_off = false;
        if let Some(m) = self.memory_mut(j) {
            m.search_backoff = 0;
            m.rounds = 0;
            m.rounds_until = 0;
            m.backoff = 0;
            m.attempts = 0;
        }
    }

    /// Holds `nodes` for `j` until it starts or its promise is settled; the
    /// teams' claims in flight change with it.
    pub(super) fn promise(&mut self, c: &mut Cycle<'_>, j: &Job, nodes: BTreeSet<String>) {
        self.promised_nodes.insert(j.id().to_string(), nodes);
        c.in_flight = None;
        c.holdings += 1;
    }

    /// Records the evictions and the promise to `j`: until its victims are
    /// gone, the nodes it will use take no one else's new work, or the room
    /// the victims leave goes to others and `j` must preempt again.
    pub(super) fn preempt(
        &mut self,
        c: &mut Cycle<'_>,
        j: &Job,
        victims: &[&Job],
        nodes: BTreeSet<String>,
    ) {
        self.promise(c, j, nodes);
        let mut ids = Vec::with_capacity(victims.len());
        for v in victims {
            ids.push(v.id().to_string());
            let reason = if v.spec.class >= j.spec.class {
                format!("team {} reclaims its guarantee for {}", j.spec.team, j.id())
            } else {
                format!(
                    "preempted for {} ({}, team {})",
                    j.id(),
                    j.spec.class,
                    j.spec.team
                )
            };
            c.d.preemptions.push(Preemption {
                job: v.id().to_string(),
                for_job: j.id().to_string(),
                reason,
                grace: self.cfg.grace,
            });
        }
        self.promised.insert(j.id().to_string(), ids);
    }

    /// The memory kept for `j`'s ID, if it has an entry.
    pub(super) fn memory_of(&self, j: &Job) -> Option<&super::table::Memory> {
        self.table.id_slot(j).map(|s| &self.table.entries[s].memory)
    }

    /// The same, to change.
    pub(super) fn memory_mut(&mut self, j: &Job) -> Option<&mut super::table::Memory> {
        self.table
            .id_slot(j)
            .map(|s| &mut self.table.entries[s].memory)
    }
}

/// The place in `c.may_memo` of a job of the team at `pos`, of `class`,
/// within its team's guarantee or not; none for a team not in the input.
/// It makes the memo when first needed.
fn may_index(c: &mut Cycle<'_>, pos: isize, class: Class, within: bool) -> Option<usize> {
    const CLASSES: usize = Class::ALL.len();
    if pos < 0 || pos as usize >= c.teams.len() {
        return None;
    }
    if c.may_memo.is_empty() {
        c.may_memo = vec![0; c.teams.len() * CLASSES * 2];
    }
    Some((pos as usize * CLASSES + class.index()) * 2 + usize::from(within))
}
