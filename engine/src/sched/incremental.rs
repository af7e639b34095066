//! Incremental inputs: what a snapshot sums over every job, kept from cycle
//! to cycle for a world that lists what changed (`Input::incremental`),
//! with each job's part in the sums so that a change takes it out again.
//! Reading every unfinished job each cycle, most of them running and
//! unchanged, was about a third of a simulated week of 1,000 GPUs in the Go
//! build, nearly all of it waiting for memory (docs/mixed.md, "Simulation
//! speed").

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::Scheduler;
use super::snapshot::{Cycle, team_index};
use super::table::Table;
use super::types::{Input, Job, Nanos, Phase};
use crate::cluster::NodeSet;

/// The sums as a recount makes them, and what they were made of.
#[derive(Debug, Default)]
pub(super) struct Kept {
    pub ok: bool,
    set: Option<Arc<NodeSet>>,
    nodes: usize,
    /// The input's team names, by position.
    teams: Vec<String>,
    /// GPU milli held by team position (others by name), and when the
    /// running work on each node ends.
    use_: Vec<i64>,
    use_other: BTreeMap<String, i64>,
    ends_by: Vec<Nanos>,
    end_unknown: Vec<bool>,
    /// The slots of the jobs not pending that hold each node, for its end
    /// time; `dirty` the nodes whose end time must be taken again.
    on_node: Vec<Vec<u32>>,
    dirty: Vec<usize>,
    /// How many jobs have a part.
    parts: usize,
    /// The pending jobs' slots, by submission and ID: the part of the
    /// cycle's order that does not change from cycle to cycle.
    pub pending: Vec<u32>,
}

/// One job's share of the sums, as counted. Its nodes are the entry's
/// `held.nodes`, which stay as they are until the entry is refreshed,
/// and a job's part is always taken out before that.
#[derive(Debug, Clone)]
pub(super) struct Part {
    milli: i64,
    /// The team's position, or -1 with its name.
    team: isize,
    name: Option<String>,
    /// Counted in `on_node`.
    running: bool,
    /// The job's phase when counted (`check_kept`).
    phase: Phase,
    /// In `pending`, with the keys it is sorted by.
    pending: bool,
    submitted: Nanos,
}

/// The sums kept from incremental inputs differ from a recount
/// (`Scheduler::check_kept`): the world changed a job it did not list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeptError(pub String);

impl Kept {
    /// Whether the kept sums apply to `input`: kept from an incremental
    /// input on the same nodes and the same teams.
    pub fn fits(&self, input: &Input<'_>) -> bool {
        let same_set = self
            .set
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, input.cluster.node_set()));
        self.ok
            && same_set
            && self.nodes == input.cluster.len()
            && self.teams.len() == input.teams.len()
            && self
                .teams
                .iter()
                .zip(input.teams)
                .all(|(a, b)| *a == b.name)
    }

    /// Empties the sums for a recount of `input`.
    pub fn reset(&mut self, input: &Input<'_>) {
        *self = Kept {
            ok: true,
            set: Some(Arc::clone(input.cluster.node_set())),
            nodes: input.cluster.len(),
            teams: input.teams.iter().map(|t| t.name.clone()).collect(),
            on_node: vec![Vec::new(); input.cluster.len()],
            ..Kept::default()
        };
    }

    /// Keeps the sums a recount made.
    pub fn take(&mut self, c: &Cycle<'_>) {
        self.use_.clone_from(&c.use_);
        self.use_other.clone_from(&c.use_other);
        self.ends_by.clone_from(&c.ends_by);
        self.end_unknown.clone_from(&c.end_unknown);
        self.dirty.clear();
    }

    /// Records the part of `j` (at `slot`), from its entry just refreshed.
    /// The sums themselves are the recount's or updated by the caller.
    pub fn add(&mut self, table: &mut Table, slot: usize, j: &Job) {
        let e = &mut table.entries[slot];
        let running = j.phase != Phase::Pending;
        let p = Part {
            milli: e.held.milli,
            team: e.held.team,
            name: (e.held.team < 0).then(|| j.spec.team.clone()),
            running,
            phase: j.phase,
            pending: j.phase == Phase::Pending,
            submitted: j.submitted,
        };
        if running {
            for &i in &e.held.nodes {
                self.on_node[i].push(slot as u32);
            }
        }
        if p.pending {
            let at = self.pending.partition_point(|&s| {
                submitted_first(table, s as usize, j.submitted, j.id()) == Ordering::Less
            });
            self.pending.insert(at, slot as u32);
        }
        let e = &mut table.entries[slot];
        if e.part.is_none() {
            self.parts += 1;
        }
        e.part = Some(p);
    }

    /// Adds the part at `slot` to the sums (`sign` 1) or takes it out (-1).
    fn count(&mut self, table: &Table, slot: usize, sign: i64) {
        let e = &table.entries[slot];
        let Some(p) = &e.part else { return };
        if p.milli > 0 {
            if p.team >= 0 {
                self.use_[p.team as usize] += sign * p.milli;
            } else {
                let name = p.name.clone().unwrap_or_default();
                *self.use_other.entry(name).or_insert(0) += sign * p.milli;
            }
        }
        if p.running {
            self.dirty.extend_from_slice(&e.held.nodes);
        }
    }

    /// Takes the part at `slot` out of the sums and lists.
    fn remove(&mut self, table: &mut Table, slot: usize) {
        if table.entries[slot].part.is_none() {
            return;
        }
        self.count(table, slot, -1);
        let e = &table.entries[slot];
        let p = e.part.as_ref().expect("checked above");
        if p.running {
            for &i in &e.held.nodes {
                let list = &mut self.on_node[i];
                if let Some(at) = list.iter().position(|&s| s as usize == slot) {
                    list.swap_remove(at);
                }
            }
        }
        if p.pending
            && let Some(i) = self.pending.iter().position(|&s| s as usize == slot)
        {
            self.pending.remove(i);
        }
        table.entries[slot].part = None;
        self.parts -= 1;
    }

    /// Takes node `i`'s end time again from the jobs that hold it.
    fn ends_of(&mut self, c: &Cycle<'_>, i: usize) {
        self.ends_by[i] = 0;
        self.end_unknown[i] = false;
        for &s in &self.on_node[i] {
            if let Some(j) = c.job_at(s as usize) {
                add_end(&mut self.ends_by, &mut self.end_unknown, i, j);
            }
        }
    }
}

/// Orders the pending job at `slot` against one submitted at `submitted`
/// with ID `id`: by submission, then ID (the end of the cycle's order).
fn submitted_first(table: &Table, slot: usize, submitted: Nanos, id: &str) -> Ordering {
    let e = &table.entries[slot];
    let at = e.part.as_ref().map_or(0, |p| p.submitted);
    at.cmp(&submitted).then_with(|| (*e.id).cmp(id))
}

/// Adds the expected end of `j`, not pending, to node `i`'s end time:
/// unknown when `j` declared no run time.
pub(super) fn add_end(ends_by: &mut [Nanos], unknown: &mut [bool], i: usize, j: &Job) {
    if j.estimate == 0 {
        unknown[i] = true;
    } else {
        ends_by[i] = ends_by[i].max(j.started + j.estimate);
    }
}

impl Scheduler {
    /// `recount` for an incremental input: only the jobs gone and changed
    /// are read.
    pub(super) fn apply_changes<'a>(&mut self, c: &mut Cycle<'a>, input: &'a Input<'a>) {
        for &j in input.gone {
            if let Some(slot) = self.table.slot(j) {
                self.kept.remove(&mut self.table, slot);
                let e = &mut self.table.entries[slot];
                if e.indexed {
                    e.indexed = false;
                    self.table.indexed -= 1;
                }
                // Not live; indexed again if it comes back.
                self.table.unmark(slot);
                if let Some(x) = c.cur.get_mut(slot) {
                    x.job = None;
                }
            }
        }
        for &j in input.changed {
            if let Some(slot) = self.table.slot(j) {
                self.kept.remove(&mut self.table, slot);
            }
            let slot = self.refresh(c, j);
            self.kept.add(&mut self.table, slot, j);
            self.kept.count(&self.table, slot, 1);
        }
        let dirty = std::mem::take(&mut self.kept.dirty);
        for &i in &dirty {
            self.kept.ends_of(c, i);
        }
        self.kept.dirty = dirty;
        self.kept.dirty.clear();
        c.use_.clone_from(&self.kept.use_);
        c.use_other.clone_from(&self.kept.use_other);
        c.ends_by.clone_from(&self.kept.ends_by);
        c.end_unknown.clone_from(&self.kept.end_unknown);
    }

    /// The pending jobs `order` looks at: the kept ones when the sums are
    /// kept, by submission and ID (`true`), else every job of the input.
    pub(super) fn jobs_to_order<'a>(
        &self,
        c: &Cycle<'a>,
        incremental: bool,
    ) -> (Vec<&'a Job>, bool) {
        if incremental && self.kept.ok {
            let jobs = self
                .kept
                .pending
                .iter()
                .filter_map(|&s| c.job_at(s as usize))
                .collect();
            return (jobs, true);
        }
        (c.jobs.to_vec(), false)
    }

    /// Recounts every job of `input`, the input of the last cycle, and says
    /// where the sums kept from its changes differ (none kept: `Ok`). For
    /// tests of a world that gives incremental inputs: a change it did not
    /// list shows here.
    pub fn check_kept(&self, input: &Input<'_>) -> Result<(), KeptError> {
        let k = &self.kept;
        if !input.incremental || !k.ok {
            return Ok(());
        }
        let fail = |m: String| Err(KeptError(m));
        let mut use_ = vec![0i64; input.teams.len()];
        let mut other: BTreeMap<String, i64> = BTreeMap::new();
        let mut ends = vec![0; input.cluster.len()];
        let mut unknown = vec![false; input.cluster.len()];
        let mut pending = 0;
        for &j in input.jobs {
            let Some(slot) = self.table.slot(j) else {
                return fail(format!("job {}: not indexed as a job of the input", j.id()));
            };
            let e = &self.table.entries[slot];
            if e.held.seen < self.live_from || self.table.slot_of_id(j.id()) != Some(slot) {
                return fail(format!("job {}: not indexed as a job of the input", j.id()));
            }
            if !e.held.holds(&j.placed) {
                return fail(format!(
                    "job {}: its placement changed and was not listed",
                    j.id()
                ));
            }
            let milli = j.held(input.cluster);
            if milli != e.held.milli {
                return fail(format!(
                    "job {}: holds {} milli, its entry {}",
                    j.id(),
                    milli,
                    e.held.milli
                ));
            }
            let Some(p) = &e.part else {
                return fail(format!("job {}: no part in the kept sums", j.id()));
            };
            if p.phase != j.phase
                || p.running != (j.phase != Phase::Pending)
                || p.pending != (j.phase == Phase::Pending)
            {
                return fail(format!(
                    "job {}: phase {:?} changed and was not listed",
                    j.id(),
                    j.phase
                ));
            }
            if j.phase == Phase::Pending {
                pending += 1;
            } else {
                for &i in &e.held.nodes {
                    add_end(&mut ends, &mut unknown, i, j);
                }
            }
            if milli > 0 {
                let t = team_index(input.teams, &j.spec.team);
                if t >= 0 {
                    use_[t as usize] += milli;
                } else {
                    *other.entry(j.spec.team.clone()).or_insert(0) += milli;
                }
            }
        }
        let sorted = k.pending.windows(2).all(|w| {
            let b = &self.table.entries[w[1] as usize];
            let at = b.part.as_ref().map_or(0, |p| p.submitted);
            submitted_first(&self.table, w[0] as usize, at, &b.id) != Ordering::Greater
        });
        if k.parts != input.jobs.len() {
            return fail(format!(
                "{} jobs in the kept sums, {} in the input",
                k.parts,
                input.jobs.len()
            ));
        }
        if pending != k.pending.len() {
            return fail(format!(
                "{} pending jobs kept, {} in the input",
                k.pending.len(),
                pending
            ));
        }
        if !sorted {
            return fail("the pending jobs kept are not in the order of submission".into());
        }
        if use_ != k.use_ {
            return fail(format!("teams hold {:?}, kept {:?}", use_, k.use_));
        }
        if ends != k.ends_by || unknown != k.end_unknown {
            return fail(format!(
                "node end times {:?} {:?}, kept {:?} {:?}",
                ends, unknown, k.ends_by, k.end_unknown
            ));
        }
        for name in k.use_other.keys().chain(other.keys()) {
            let (a, b) = (
                other.get(name).copied().unwrap_or(0),
                k.use_other.get(name).copied().unwrap_or(0),
            );
            if a != b {
                return fail(format!("team {name} holds {a}, kept {b}"));
            }
        }
        Ok(())
    }
}
