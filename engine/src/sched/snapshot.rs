//! The first step of a cycle: the plan starts as a copy of the world's
//! cluster, and every job of the input is indexed with what it holds, what
//! its team holds and when the running work on each node ends. With an
//! incremental input only the jobs that changed are read again
//! (`incremental.rs`).

use rustc_hash::FxBuildHasher;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::Scheduler;
use super::incremental::add_end;
use super::table::{Held, none_of};
use super::types::{Decision, Input, Job, Nanos, Phase, READ_AHEAD, Team};
use crate::cluster::State;
use crate::workload::Capacity;

/// The working state of one cycle (Go's `cycle`): the input, the plan so
/// far on a copy of the cluster, and what was computed from them, each
/// kept until the plan changes.
pub(super) struct Cycle<'a> {
    pub now: Nanos,
    /// The world's cluster, unchanged all cycle.
    pub cluster: &'a State,
    pub teams: &'a [Team],
    pub jobs: &'a [&'a Job],
    /// The plan so far.
    pub st: State,
    /// The job of the input at each slot of the scheduler's table (the
    /// jobs of this input, reachable by their entry) and its position in
    /// the input's jobs (for the decision's `waiting`).
    pub cur: Vec<AtSlot<'a>>,
    /// The last job `team_pos` answered for (by address) and its answer:
    /// considering one job asks a dozen times, and the answer holds all
    /// cycle (entries are refreshed only by the snapshot).
    pub last_team: Cell<(usize, isize)>,
    /// The GPU milli each team of the input holds, by position
    /// (`team_pos`); `use_other` the same for teams not in the input.
    pub use_: Vec<i64>,
    pub use_other: BTreeMap<String, i64>,
    /// The demand of each team's jobs promised nodes (`within_guarantee`),
    /// by position, computed when first needed; `None` after a promise is
    /// made or kept.
    pub in_flight: Option<Vec<i64>>,
    pub d: Decision,
    /// Job shapes that fitted nowhere this cycle, by memo key: within a
    /// cycle resources only shrink, so they would fail again.
    pub failed: HashMap<u32, super::types::WaitReason, FxBuildHasher>,
    /// The same for victim searches that found nothing, and how many
    /// searches ran (`MAX_SEARCHES`).
    pub no_victims: HashSet<u32, FxBuildHasher>,
    pub searches: usize,
    /// A search for replicas to move ran this cycle (one a cycle).
    pub moved: bool,
    /// Each placed task's job (`moves.rs`), made on first use.
    pub owner_of: Option<super::moves::Owners<'a>>,
    /// `gpu_base[i]` is the number of GPUs on the plan's nodes before node
    /// i (one past the last at the end), `gpu_count` a count per GPU in
    /// that numbering (`whole_room_after`), made on first use.
    pub gpu_base: Vec<usize>,
    pub gpu_count: Vec<usize>,
    /// The nodes with MIG work that cannot move (`pinned_slice_nodes`), by
    /// position, once computed.
    pub pinned: Option<Vec<bool>>,
    /// The nodes with an idle MIG GPU that `mig_off_for` could turn whole,
    /// until the plan changes.
    pub idle_mig: Option<Vec<usize>>,
    /// When the last running job on each node is expected to end, and
    /// whether one has no estimate: a reservation's ready time.
    pub ends_by: Vec<Nanos>,
    pub end_unknown: Vec<bool>,
    /// The lowest class each team runs (`may_preempt`), computed when
    /// first needed; `may_memo` its answers until the plan changes (0 not
    /// known, 1 no, 2 yes).
    pub lowest: Option<Vec<super::preempt::TeamLow>>,
    pub may_memo: Vec<i8>,
    /// `quota_ready_at` by gang ID.
    pub quota_ready: HashMap<String, Nanos, FxBuildHasher>,
    /// The free GPU milli of the plan and its MIG GPUs (-1: not known).
    pub free: i64,
    pub mig_gpus: i64,
    /// The number of leaf switches and each node's rank among them, most
    /// free GPU first (`usize::MAX` for none), until the plan changes.
    pub leaves: Option<(usize, Vec<usize>)>,
    /// Counts the changes to what `within_guarantee` reads besides the job
    /// (the teams' holdings, the claims in flight), and its last answer:
    /// the job (by address), the count then and the answer. Considering
    /// one job asks it half a dozen times.
    pub holdings: u64,
    pub last_within: Cell<(usize, u64, bool)>,
}

/// What `Cycle::cur` holds for one slot of the scheduler's table. Side by
/// side, as both are read of each job of a backlog, and each read of a
/// slot is a cache miss.
#[derive(Clone, Copy)]
pub(super) struct AtSlot<'a> {
    pub job: Option<&'a Job>,
    /// `usize::MAX` when not known.
    pub index: usize,
}

impl Default for AtSlot<'_> {
    fn default() -> Self {
        AtSlot {
            job: None,
            index: usize::MAX,
        }
    }
}

impl<'a> Cycle<'a> {
    /// The input's job at `slot`, if any.
    pub fn job_at(&self, slot: usize) -> Option<&'a Job> {
        self.cur.get(slot).and_then(|x| x.job)
    }

    /// Forgets what was computed from the plan.
    pub fn plan_changed(&mut self) {
        self.free = -1;
        self.leaves = None;
        self.may_memo.iter_mut().for_each(|m| *m = 0);
        self.idle_mig = None;
    }

    /// Notes that `j` is the input's job at `slot`.
    pub fn set_cur(&mut self, slot: usize, j: &'a Job) {
        if slot >= self.cur.len() {
            self.cur.resize(slot + 1, AtSlot::default());
        }
        self.cur[slot].job = Some(j);
    }

    /// The position of `j` in the input's jobs.
    pub fn index_of(&self, sch: &Scheduler, j: &Job) -> usize {
        sch.table
            .slot(j)
            .and_then(|s| self.cur.get(s).map(|x| x.index))
            .filter(|&i| i != usize::MAX)
            .or_else(|| self.jobs.iter().position(|x| std::ptr::eq(*x, j)))
            .expect("a job of the input")
    }

    /// The position of a team in the input, -1 when it is not there.
    pub fn pos_of(&self, team: &str) -> isize {
        team_index(self.teams, team)
    }
}

/// The position of the team named so in `teams`, -1 when not there.
pub(super) fn team_index(teams: &[Team], name: &str) -> isize {
    teams
        .iter()
        .position(|t| t.name == name)
        .map_or(-1, |i| i as isize)
}

impl Scheduler {
    /// Starts a cycle: the plan on a copy of the cluster, the input's jobs
    /// indexed, the teams' holdings summed.
    pub(super) fn snapshot<'a>(&mut self, input: &'a Input<'a>) -> Cycle<'a> {
        let mut c = Cycle {
            now: input.now,
            cluster: input.cluster,
            teams: input.teams,
            jobs: input.jobs,
            st: input.cluster.scratch(),
            cur: Vec::new(),
            last_team: Cell::new((0, -1)),
            use_: Vec::new(),
            use_other: BTreeMap::new(),
            in_flight: None,
            d: Decision::default(),
            failed: HashMap::default(),
            no_victims: HashSet::default(),
            searches: 0,
            moved: false,
            owner_of: None,
            gpu_base: Vec::new(),
            gpu_count: Vec::new(),
            pinned: None,
            idle_mig: None,
            ends_by: Vec::new(),
            end_unknown: Vec::new(),
            lowest: None,
            may_memo: Vec::new(),
            quota_ready: HashMap::default(),
            free: -1,
            mig_gpus: 0,
            leaves: None,
            holdings: 0,
            last_within: Cell::new((0, 0, false)),
        };
        self.cycles += 1;
        // Jobs gone linger in the table; drop them now and then, and as
        // soon as they outnumber the live ones: a world that builds its
        // jobs anew each cycle (Kubernetes does) indexes each job again
        // every cycle.
        let prune =
            self.cycles.is_multiple_of(256) || self.table.indexed > 2 * input.jobs.len() + 1024;
        // Which slot each job of the input holds: a read of the job's mark
        // (lifetimes keep no reference to a job across cycles, so the
        // table learns where this cycle's jobs are from them).
        c.cur.resize(self.table.entries.len(), AtSlot::default());
        let mut unmarked = Vec::new();
        for (i, &j) in input.jobs.iter().enumerate() {
            if let Some(ahead) = input.jobs.get(i + READ_AHEAD) {
                ahead.touch();
            }
            if let Some(slot) = self.table.slot(j) {
                c.cur[slot] = AtSlot {
                    job: Some(j),
                    index: i,
                };
            } else {
                unmarked.push(i);
            }
        }
        if input.incremental && self.kept.fits(input) {
            self.apply_changes(&mut c, input);
        } else {
            self.recount(&mut c, input);
        }
        // The jobs met for the first time have their slots now.
        for i in unmarked {
            if let Some(slot) = self.table.slot(input.jobs[i]) {
                if slot >= c.cur.len() {
                    c.cur.resize(slot + 1, AtSlot::default());
                }
                c.cur[slot].index = i;
            }
        }
        if prune {
            for slot in 0..self.table.entries.len() {
                let live = c.job_at(slot).is_some();
                if !live && self.table.in_use(slot) {
                    self.table.drop_slot(slot);
                }
            }
            let now = c.now;
            self.no_victims_until.retain(|_, until| now < *until);
        }
        c
    }

    /// Reads every job of the input: what each holds, what each team
    /// holds, when each node's running work ends. With an incremental
    /// input it also keeps those sums for the next cycles.
    pub(super) fn recount<'a>(&mut self, c: &mut Cycle<'a>, input: &'a Input<'a>) {
        self.live_from = self.cycles;
        c.use_ = vec![0; input.teams.len()];
        c.ends_by = vec![0; input.cluster.len()];
        c.end_unknown = vec![false; input.cluster.len()];
        if input.incremental {
            self.kept.reset(input);
        } else if self.kept.ok {
            self.kept = Default::default();
        }
        for &j in input.jobs {
            let slot = self.refresh(c, j);
            let e = &self.table.entries[slot].held;
            if j.phase != Phase::Pending {
                // Read here, with the rest of the job, rather than when a
                // reservation asks (ready_at): it asks in most cycles of a
                // backlog, and a second pass over the jobs cost more.
                for &i in &e.nodes {
                    add_end(&mut c.ends_by, &mut c.end_unknown, i, j);
                }
            }
            if e.milli > 0 {
                if e.team >= 0 {
                    c.use_[e.team as usize] += e.milli;
                } else {
                    *c.use_other.entry(j.spec.team.clone()).or_insert(0) += e.milli;
                }
            }
            if input.incremental {
                self.kept.add(&mut self.table, slot, j);
            }
        }
        if input.incremental {
            self.kept.take(c);
        }
    }

    /// Brings `j`'s entry up to date with the input: indexed by ID, what it
    /// holds recomputed when its placement changed, seen this cycle, its
    /// team's position. It returns the entry's slot.
    pub(super) fn refresh<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> usize {
        let cluster = c.cluster;
        let (slot, fresh) = match self.table.slot(j) {
            Some(slot) => (slot, false),
            None => {
                // A Job not seen before: index it by ID.
                let slot = self.table.claim(j);
                if !self.table.entries[slot].indexed {
                    self.table.entries[slot].indexed = true;
                    self.table.indexed += 1;
                }
                (slot, true)
            }
        };
        let e = &mut self.table.entries[slot].held;
        let same_set = e
            .set
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, cluster.node_set()));
        if fresh || !same_set || !e.holds(&j.placed) {
            *e = Held {
                tasks: j.placed.len(),
                set: Some(Arc::clone(cluster.node_set())),
                ..Held::default()
            };
            if !none_of(&j.placed) {
                e.placed = j.placed.clone();
                e.slices = on_slices(j);
            }
            for a in j.placed.iter().flatten() {
                if let Some(i) = cluster.lookup(&a.node) {
                    e.milli += i64::from(a.gpu_milli(cluster.node(i)));
                    if !e.nodes.contains(&i) {
                        e.nodes.push(i);
                    }
                }
            }
        }
        e.seen = self.cycles;
        // The team's position in the input, which the entry remembers:
        // sums and counts per team by position, not through a map updated
        // for each of thousands of jobs.
        let t = e.team;
        if t < 0 || t as usize >= c.teams.len() || c.teams[t as usize].name != j.spec.team {
            e.team = c.pos_of(&j.spec.team);
        }
        c.set_cur(slot, j);
        slot
    }

    /// The input's job with that ID.
    pub(super) fn job<'a>(&self, c: &Cycle<'a>, id: &str) -> Option<&'a Job> {
        let slot = self.table.slot_of_id(id)?;
        c.job_at(slot)
    }

    /// Whether `j` is a job of this cycle's input (Go: `live`).
    pub(super) fn live(&self, c: &Cycle<'_>, j: &Job) -> bool {
        self.table
            .slot(j)
            .is_some_and(|s| c.job_at(s).is_some_and(|x| std::ptr::eq(x, j)))
    }

    /// The GPU milli `j` holds (`j` from the input).
    pub(super) fn held_of(&self, j: &Job) -> i64 {
        self.table
            .slot(j)
            .map_or(0, |s| self.table.entries[s].held.milli)
    }

    /// The position of `j`'s team in the input, -1 when it is not there.
    pub(super) fn team_pos(&self, c: &Cycle<'_>, j: &Job) -> isize {
        let addr = std::ptr::from_ref(j) as usize;
        let (last, pos) = c.last_team.get();
        if last == addr {
            return pos;
        }
        let pos = match self.table.slot(j) {
            Some(s) if self.live(c, j) => self.table.entries[s].held.team,
            _ => c.pos_of(&j.spec.team),
        };
        c.last_team.set((addr, pos));
        pos
    }

    /// `j`'s team, none when it is not in the input.
    pub(super) fn team_of<'a>(&self, c: &Cycle<'a>, j: &Job) -> Option<&'a Team> {
        let p = self.team_pos(c, j);
        (p >= 0).then(|| &c.teams[p as usize])
    }

    /// The GPU milli `j`'s team holds in the plan.
    pub(super) fn usage_of(&self, c: &Cycle<'_>, j: &Job) -> i64 {
        let p = self.team_pos(c, j);
        if p >= 0 {
            c.use_[p as usize]
        } else {
            c.use_other.get(&j.spec.team).copied().unwrap_or(0)
        }
    }

    /// Counts `milli` more held by `j`'s team.
    pub(super) fn add_usage(&self, c: &mut Cycle<'_>, j: &Job, milli: i64) {
        c.holdings += 1;
        let p = self.team_pos(c, j);
        if p >= 0 {
            c.use_[p as usize] += milli;
        } else {
            *c.use_other.entry(j.spec.team.clone()).or_insert(0) += milli;
        }
    }

    /// The capacity of the world's cluster for validating jobs, cached
    /// while the nodes stay the same.
    pub(super) fn capacity_of(&mut self, st: &State) -> &Capacity {
        let same = self
            .capacity
            .as_ref()
            .is_some_and(|(set, _)| Arc::ptr_eq(set, st.node_set()));
        if !same {
            self.capacity = Some((Arc::clone(st.node_set()), crate::placement::capacity_of(st)));
        }
        &self.capacity.as_ref().expect("just computed").1
    }
}

/// Whether a task of `j` holds a MIG instance.
pub(super) fn on_slices(j: &Job) -> bool {
    j.placed
        .iter()
        .flatten()
        .any(|a| a.grants.first().is_some_and(|g| g.slice.is_some()))
}

/// The address of `j`'s first task, which identifies its task list (a
/// world may rebuild a job under the same ID with other tasks); none for
/// a job without tasks.
pub(super) fn first_task(j: &Job) -> Option<usize> {
    j.spec.tasks.first().map(|t| t as *const _ as usize)
}
