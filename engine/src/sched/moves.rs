//! Moving services to make room. MIG work spreads over the nodes as
//! services come and go, until every node keeps a MIG GPU or two, and a
//! claim for whole GPUs on one node (an 8-GPU fine-tune within its team's
//! guarantee) finds no node, even by eviction: the instances in its way
//! belong to production within its team's guarantee, which is never
//! evicted. A serving replica keeps no state, though: it can be started
//! elsewhere and stopped here once the new one is ready (make before
//! break, as a rolling update does), losing no work and no capacity.
//! `consolidate` finds the node where the fewest such moves, with the
//! fewest evictions the claim may make anyway, make room for it; the claim
//! is promised the node and takes it once the old replicas and the victims
//! are gone and its idle MIG GPUs are turned whole.

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};

use super::Scheduler;
use super::mig::{fits_layout, used_layout};
use super::place::creates_instance;
use super::preempt::{MAX_VICTIMS, URGENT_BACKOFF_FOR, preempted_this_cycle};
use super::reserve::{Mask, allows};
use super::snapshot::Cycle;
use super::types::{Job, MINUTE, Migration, Nanos, Phase, Reconfig, SECOND, WaitReason};
use super::victims::release;
use crate::cluster::{Assignment, State};
use crate::gpu::Layout;
use crate::placement::Request;
use crate::workload::{Class, Kind};

/// Bounds the replicas moved for one job: a node of small services needed
/// more than 8 for any three of its GPUs, and 32 kept too many replicas in
/// flight, each holding two places (docs/mixed.md).
const MAX_MOVES: usize = 24;

/// How long a service whose replica moved keeps its replicas where they
/// are: without it, a claim's plans moved one replica between two nodes at
/// one instant without end.
pub(super) const MOVE_COOLDOWN: Nanos = 30 * SECOND;

/// How long a move search for borrowed work that found nothing holds off
/// the next one, for any borrower: week-1000's backlog of borrowed 8-GPU
/// work asked one each cycle, 18 % of its wall time.
const BORROWER_MOVES_BACKOFF: Nanos = MINUTE;

/// Bounds the work a relocated job may lose: the time since its last
/// checkpoint; `RELOCATE_LOSS_OWED` for a claim owed for `OWED_LONG` or
/// more (pretraining gangs checkpoint every 30 minutes).
const RELOCATE_LOSS: Nanos = 15 * MINUTE;
const RELOCATE_LOSS_OWED: Nanos = 30 * MINUTE;
pub(super) const OWED_LONG: Nanos = MINUTE;

/// A replica's old placement, held until its new one is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MoveRef {
    pub node: String,
    pub task: String,
}

/// A placed task and its job.
#[derive(Debug, Clone, Copy)]
pub(super) struct TaskOf<'a> {
    pub job: &'a Job,
    pub task: usize,
    /// Its old copy is still held: not moved again until it is gone.
    pub moving: bool,
}

/// Each node's tasks (by node position, then task name) and their jobs.
pub(super) type Owners<'a> = Vec<FxHashMap<&'a str, TaskOf<'a>>>;

/// A plan found by `cheapest_moves`: the moves, the victims, the node and
/// the state after them.
struct MovePlan<'a> {
    moves: Vec<Migration>,
    victims: Vec<&'a Job>,
    node: String,
    next: State,
}

/// Why `try_moves` failed: a replica of this job found no room (`Some`),
/// or something else.
type Stuck<'a> = Option<&'a Job>;

fn holds_gpu(a: &Assignment, k: usize) -> bool {
    a.grants.iter().any(|g| g.gpu >= 0 && g.gpu as usize == k)
}

fn has(list: &[&Job], j: &Job) -> bool {
    list.iter().any(|x| std::ptr::eq(*x, j))
}

fn less3(a: &[usize; 3], b: &[usize; 3]) -> bool {
    a < b
}

impl Scheduler {
    /// Moves replicas for `j`, evicting what else is in their way that `j`
    /// may evict, when the victim search alone found no room; it returns
    /// `Moving` when it did (or another reason for what it did instead).
    /// With `now_only` (moves tried before victims the claim has found) it
    /// asks no MIG change for the moves.
    pub(super) fn consolidate<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
        now_only: bool,
    ) -> Option<WaitReason> {
        if !self.cfg.migrate
            || !self.cfg.mig
            || c.moved
            || c.now < self.memory_of(j).map_or(0, |m| m.move_backoff)
        {
            return None;
        }
        let borrower = j.spec.class != Class::Production && !self.within_guarantee(c, j);
        if borrower
            && (!self.cfg.move_for_whole_nodes
                || c.now < self.borrower_moves_at
                || !self.whole_nodes_only(c, reqs))
        {
            return None;
        }
        if reqs.iter().any(|r| r.kind() != Kind::WholeGpus) {
            return None;
        }
        c.moved = true; // one search a cycle: each places dozens of replicas
        let mut during = c.st.clone();
        let mut after = c.st.clone();
        let mut moves: Vec<Migration> = Vec::new();
        let mut refs: Vec<MoveRef> = Vec::new();
        let mut victims: Vec<&'a Job> = Vec::new();
        let mut gone: Vec<&'a Job> = Vec::new();
        let mut nodes: BTreeSet<String> = BTreeSet::new();
        let where_ = self.widest(c, j);
        for &r in reqs {
            let allowed: Mask = Some(
                (0..c.cluster.len())
                    .map(|i| !nodes.contains(c.cluster.node(i).name()) && allows(&where_, i))
                    .collect(),
            );
            if let Ok(a) = self.placer.place_at(&after, r, |i| allows(&allowed, i)) {
                // This task fits as things are (a gang's other task).
                if after.allocate(&a).is_err() {
                    return self.no_moves(c, j, borrower);
                }
                nodes.insert(a.node);
                continue;
            }
            let plan = self.cheapest_moves(c, &after, r, &allowed, j, moves.len(), &gone, false);
            let Some(plan) = plan else {
                if borrower || now_only {
                    // Idle GPUs turned to MIG for the moves, or victims
                    // first, only for a claim's own move search.
                    return self.no_moves(c, j, borrower);
                }
                if self.mig_for_moves(c, &after, r, &allowed, j, moves.len(), &gone) {
                    return Some(WaitReason::Reconfig);
                }
                let rounds_until = self.memory_of(j).map_or(0, |m| m.rounds_until);
                if reqs.len() == 1
                    && c.now >= rounds_until
                    && let Some((vs, held)) = self.victims_first(c, &after, r, &allowed, j)
                {
                    self.preempt(c, j, &vs, held);
                    self.count_round(c, j);
                    return Some(WaitReason::Preempting);
                }
                return self.no_moves(c, j, borrower);
            };
            for mut mv in plan.moves {
                mv.creates = creates_instance(&during, &mv.to);
                if during.allocate(&mv.to).is_err() {
                    return self.no_moves(c, j, borrower);
                }
                let v = self
                    .job(c, &mv.job)
                    .expect("a moved replica's job is in the input");
                let task = v.placed[mv.task]
                    .as_ref()
                    .expect("a moved replica is placed")
                    .task
                    .clone();
                refs.push(MoveRef {
                    node: plan.node.clone(),
                    task,
                });
                moves.push(mv);
            }
            gone.extend_from_slice(&plan.victims);
            victims.extend_from_slice(&plan.victims);
            after = plan.next;
            nodes.insert(plan.node);
        }
        if moves.is_empty() && !self.relocates(c, j, &victims) {
            return None; // nothing to move or relocate: the victim search's case
        }
        let until = self.memory_of(j).map_or(0, |m| m.rounds_until);
        if !victims.is_empty() && c.now < until {
            // Its preemption rounds are backing off: the next plan when
            // they end.
            if let Some(m) = self.memory_mut(j) {
                m.move_backoff = until;
            }
            return None;
        }
        c.st = during;
        c.plan_changed();
        for mv in &moves {
            let now = c.now;
            if let Some(s) = self.table.slot_of_id(&mv.job) {
                self.table.entries[s].memory.moved_at = Some(now);
            }
        }
        c.d.migrations.extend(moves);
        if !victims.is_empty() {
            self.preempt(c, j, &victims, nodes);
            self.count_round(c, j);
        } else {
            self.promise(c, j, nodes);
        }
        self.moving.insert(j.id().to_string(), refs);
        Some(WaitReason::Moving)
    }

    /// Whether every task of `reqs` asks for all the GPUs of the largest
    /// node. Such work, beyond its team's guarantee, has replicas moved for
    /// it too (`move_for_whole_nodes`): a one-GPU job finds a GPU as work
    /// ends, but a node is freed only by moves once MIG work has spread
    /// over every node.
    fn whole_nodes_only(&mut self, c: &Cycle<'_>, reqs: &[&Request]) -> bool {
        let largest = self
            .capacity_of(c.cluster)
            .max_gpus
            .values()
            .copied()
            .max()
            .unwrap_or(0)
            .max(0);
        !reqs.is_empty()
            && reqs
                .iter()
                .all(|r| r.kind() == Kind::WholeGpus && r.count() >= largest)
    }

    /// Turns idle whole GPUs to MIG for the replicas of a move plan that,
    /// without them, found no MIG room elsewhere, and says whether it asked
    /// for a change. The moves wait for the change: a replica's new
    /// instance must exist when it moves, and the claim plans again once
    /// it is done. The free space of MIG GPUs in use is re-partitioned for
    /// them too (`drop_free`).
    #[allow(clippy::too_many_arguments)]
    fn mig_for_moves<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        st: &State,
        r: &Request,
        allowed: &Mask,
        j: &'a Job,
        done: usize,
        gone: &[&'a Job],
    ) -> bool {
        let mut trial = st.clone();
        self.convert_idle(c, &mut trial, None);
        let reshaped = self.drop_free(c, &mut trial, None, self.cfg.reconfig_cooldown);
        let Some(plan) = self.cheapest_moves(c, &trial, r, allowed, j, done, gone, false) else {
            return false;
        };
        let mut layouts: Vec<((usize, usize), Layout)> = Vec::new();
        for mv in &plan.moves {
            let Some(at) = st.lookup(&mv.to.node) else {
                continue;
            };
            let n = st.node(at);
            for g in &mv.to.grants {
                let Some(slice) = &g.slice else { continue };
                let k = g.gpu as usize;
                let gpu = &n.gpus()[k];
                if gpu.mig() && !reshaped.contains(&(at, k)) {
                    continue;
                }
                let x = match layouts.iter().position(|(r, _)| *r == (at, k)) {
                    Some(x) => x,
                    None => {
                        let l = if gpu.mig() {
                            used_layout(gpu)
                        } else {
                            Layout::new()
                        };
                        layouts.push(((at, k), l));
                        layouts.len() - 1
                    }
                };
                layouts[x].1.push(slice.clone());
            }
        }
        let mut asked = false;
        for ((at, k), mut layout) in layouts {
            let n = st.node(at);
            let g = &n.gpus()[k];
            if g.mig() {
                if fits_layout(g, &layout) {
                    continue; // the replicas take instances the GPU has free already
                }
                // The free instances the replicas do not need stay (the warm
                // pool's among them).
                for sl in g.slices() {
                    if sl.task().is_some() || layout.contains(sl.placement()) {
                        continue;
                    }
                    let mut next = layout.clone();
                    next.push(sl.placement().clone());
                    if g.model().validate(&next).is_ok() {
                        layout = next;
                    }
                }
            }
            let rc = Reconfig {
                node: n.name().to_string(),
                gpu: k,
                mig: true,
                layout,
                add: false,
                for_job: j.id().to_string(),
            };
            let turn_on = !g.mig();
            if self.apply(c, Some(j), rc, turn_on) {
                asked = true;
            }
        }
        asked
    }

    /// The plan for when the replicas to move find no room while the
    /// claim's victims are still there, but would on the GPUs the victims
    /// free elsewhere, turned to MIG: those victims, to evict now, and the
    /// claim's node, held for it until they are gone. The claim plans
    /// again then, and moves the replicas once the freed GPUs are MIG.
    fn victims_first<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        st: &State,
        r: &Request,
        allowed: &Mask,
        j: &'a Job,
    ) -> Option<(Vec<&'a Job>, BTreeSet<String>)> {
        let plan = self.cheapest_moves(c, st, r, allowed, j, 0, &[], true)?;
        if plan.victims.is_empty() {
            return None;
        }
        Some((plan.victims, BTreeSet::from([plan.node])))
    }

    fn no_moves(&mut self, c: &Cycle<'_>, j: &Job, borrower: bool) -> Option<WaitReason> {
        let now = c.now;
        if let Some(m) = self.memory_mut(j) {
            m.move_backoff = now + URGENT_BACKOFF_FOR;
        }
        if borrower {
            self.borrower_moves_at = now + BORROWER_MOVES_BACKOFF;
        }
        None
    }

    /// Whether `v`'s task on `a` may be moved: a running production replica
    /// on MIG instances only, not preempted in this cycle nor moved within
    /// `MOVE_COOLDOWN`.
    fn movable(&self, c: &Cycle<'_>, owners: &Owners<'_>, v: &Job, a: &Assignment) -> bool {
        if v.phase != Phase::Running || v.spec.class != Class::Production || a.grants.is_empty() {
            return false;
        }
        if let Some(at) = self.memory_of(v).and_then(|m| m.moved_at)
            && c.now - at < MOVE_COOLDOWN
        {
            return false;
        }
        if a.grants.iter().any(|g| g.slice.is_none()) {
            return false;
        }
        let moving = c
            .cluster
            .lookup(&a.node)
            .and_then(|i| owners[i].get(a.task.as_str()))
            .is_some_and(|o| o.moving);
        !preempted_this_cycle(c, v) && !moving
    }

    /// Each node's tasks and their jobs, made once a cycle.
    fn owners<'a>(&self, c: &Cycle<'a>) -> Owners<'a> {
        let moving: FxHashSet<&str> = self
            .moving
            .values()
            .flatten()
            .map(|r| r.task.as_str())
            .collect();
        let mut owners: Owners<'a> = vec![FxHashMap::default(); c.cluster.len()];
        for &v in c.jobs {
            for (i, a) in v.placed.iter().enumerate() {
                let Some(a) = a else { continue };
                if let Some(at) = c.cluster.lookup(&a.node) {
                    owners[at].insert(
                        a.task.as_str(),
                        TaskOf {
                            job: v,
                            task: i,
                            moving: moving.contains(a.task.as_str()),
                        },
                    );
                }
            }
        }
        owners
    }

    /// The node where `r` fits at least cost, among those allowed, once
    /// replicas are moved off it and, where moves alone do not do,
    /// eligible victims evicted: fewest victims first, then the least work
    /// they lose, then fewest moves. The plan has the moves, the victims,
    /// the node and the state after them (victims gone, replicas moved,
    /// idle MIG GPUs of the node turned whole, `r` placed). `done` is the
    /// moves already planned for `j`'s other tasks; `gone` the victims.
    /// With `victims_first`, only plans that evict (no relocation) and move
    /// are tried, the replicas placed once the victims are gone.
    #[allow(clippy::too_many_arguments)]
    fn cheapest_moves<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        st: &State,
        r: &Request,
        allowed: &Mask,
        j: &'a Job,
        done: usize,
        gone: &[&'a Job],
        victims_first: bool,
    ) -> Option<MovePlan<'a>> {
        let owners = match c.owner_of.take() {
            Some(o) => o,
            None => self.owners(c),
        };
        let plan =
            self.cheapest_moves_with(c, &owners, st, r, allowed, j, done, gone, victims_first);
        c.owner_of = Some(owners);
        plan
    }

    #[allow(clippy::too_many_arguments)]
    fn cheapest_moves_with<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        owners: &Owners<'a>,
        st: &State,
        r: &Request,
        allowed: &Mask,
        j: &'a Job,
        done: usize,
        gone: &[&'a Job],
        victims_first: bool,
    ) -> Option<MovePlan<'a>> {
        /// Per GPU, the replicas to move and the jobs to evict to free it.
        #[derive(Clone, Default)]
        struct Freeing<'a> {
            tasks: Vec<TaskOf<'a>>,
            victims: Vec<&'a Job>,
        }
        struct Cand<'a> {
            node: usize,
            tasks: Vec<TaskOf<'a>>,
            victims: Vec<&'a Job>,
            cost: [usize; 3],
        }
        // What freeing a GPU adds to a plan that evicts those already
        // evicted: victims, their victim_cost, moves.
        let cost_of = |s: &Scheduler, c: &Cycle<'_>, f: &Freeing<'_>, evicted: &[&Job]| {
            let mut cost = [0usize; 3];
            for &v in &f.victims {
                if !has(evicted, v) {
                    cost[0] += 1;
                    cost[1] += s.victim_cost(c, v);
                }
            }
            cost[2] = f.tasks.len();
            cost
        };
        let mut cands: Vec<Cand<'a>> = Vec::new();
        let count = r.count().max(0) as usize;
        for i in 0..st.len() {
            let n = st.node(i);
            if n.gpus().len() < count || !allows(allowed, i) {
                continue;
            }
            let mut gpus: Vec<Freeing<'a>> = Vec::new();
            for (k, g) in n.gpus().iter().enumerate() {
                if g.cordoned()
                    || !r.allows_model(g.model())
                    || g.mig() && !self.cooled(c, n.name(), k)
                {
                    continue;
                }
                let mut f = Freeing::default();
                let mut ok = true;
                for a in n.tasks() {
                    if !holds_gpu(a, k) {
                        continue;
                    }
                    let o = owners.get(i).and_then(|m| m.get(a.task.as_str())).copied();
                    match o {
                        None => ok = false,                              // an old copy being moved
                        Some(o) if std::ptr::eq(o.job, j) => ok = false, // j's own
                        Some(o) if has(gone, o.job) => {}
                        Some(o) => {
                            let placed = o.job.placed[o.task].as_deref();
                            if g.mig() && placed.is_some_and(|p| self.movable(c, owners, o.job, p))
                            {
                                f.tasks.push(o);
                            } else if self.eligible(c, j, o.job) && !preempted_this_cycle(c, o.job)
                            {
                                f.victims.push(o.job);
                            } else if self.relocatable(c, j, o.job) {
                                f.victims.push(o.job); // try_moves finds it room elsewhere
                            } else {
                                ok = false;
                            }
                        }
                    }
                    if !ok {
                        break;
                    }
                }
                if ok {
                    gpus.push(f);
                }
            }
            if gpus.len() < count {
                continue;
            }
            if count == 1 {
                // One GPU (a team's experiments): each is a candidate of
                // its own, since the cheapest one's replicas may find no
                // room where another's do.
                for f in gpus {
                    let cost = cost_of(self, c, &f, &[]);
                    let cd = Cand {
                        node: i,
                        tasks: f.tasks,
                        victims: f.victims,
                        cost,
                    };
                    if self.usable(c, j, &cd.tasks, &cd.victims, done, victims_first) {
                        cands.push(cd);
                    }
                }
                continue;
            }
            // The cheapest `count` GPUs: a victim holding several is paid
            // for once, so GPUs are taken greedily by what each adds.
            let mut cd = Cand {
                node: i,
                tasks: Vec::new(),
                victims: Vec::new(),
                cost: [0; 3],
            };
            let mut picked = vec![false; gpus.len()];
            let mut picked_n = 0;
            let mut evicted: Vec<&'a Job> = Vec::new();
            while cd.tasks.len() <= MAX_MOVES && picked_n < count {
                let mut best: Option<(usize, [usize; 3])> = None;
                for (x, f) in gpus.iter().enumerate() {
                    if picked[x] {
                        continue;
                    }
                    let cost = cost_of(self, c, f, &evicted);
                    if best.is_none_or(|(_, b)| less3(&cost, &b)) {
                        best = Some((x, cost));
                    }
                }
                let (x, cost) = best.expect("fewer picked than GPUs");
                picked[x] = true;
                picked_n += 1;
                cd.tasks.extend_from_slice(&gpus[x].tasks);
                for &v in &gpus[x].victims {
                    if !has(&evicted, v) {
                        evicted.push(v);
                        cd.victims.push(v);
                    }
                }
                for (sum, add) in cd.cost.iter_mut().zip(cost) {
                    *sum += add;
                }
            }
            if self.usable(c, j, &cd.tasks, &cd.victims, done, victims_first) {
                cands.push(cd);
            }
        }
        // Stable, as Go's SliceStable.
        cands.sort_by_key(|a| a.cost);
        // Every candidate is tried, cheapest first. A try fails when a
        // replica to move finds no room elsewhere, and a dearer node's
        // replicas may fit. A replica with no room, of a service j may
        // evict anyway, is evicted instead once j has been owed a while
        // (evicts_stuck).
        for cd in cands {
            let node = st.node(cd.node).name().to_string();
            let (mut tasks, mut victims) = (cd.tasks, cd.victims);
            loop {
                match self.try_moves(c, st, r, &node, &tasks, &victims, j, victims_first) {
                    Ok((moves, extra, next)) => {
                        victims.extend(extra);
                        return Some(MovePlan {
                            moves,
                            victims,
                            node,
                            next,
                        });
                    }
                    Err(stuck) => {
                        let Some(stuck) = stuck else { break };
                        if !self.evicts_stuck(c, j, stuck) || victims.len() >= MAX_VICTIMS {
                            break;
                        }
                        tasks.retain(|t| !std::ptr::eq(t.job, stuck));
                        victims.push(stuck);
                    }
                }
            }
        }
        None
    }

    /// A plan moves or relocates something (else it is the victim
    /// search's case), within the bounds.
    fn usable<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        tasks: &[TaskOf<'a>],
        victims: &[&'a Job],
        done: usize,
        victims_first: bool,
    ) -> bool {
        if victims_first
            && (victims.is_empty() || tasks.is_empty() || self.relocates(c, j, victims))
        {
            return false;
        }
        (!tasks.is_empty() || self.relocates(c, j, victims))
            && done + tasks.len() <= MAX_MOVES
            && victims.len() <= MAX_VICTIMS
    }

    /// Whether `v`, whose replica `j`'s plan could not move for want of
    /// room, is evicted instead: `j` has been owed for `evict_stuck_after`
    /// and may evict `v` anyway (borrowed work).
    fn evicts_stuck<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, v: &'a Job) -> bool {
        self.cfg.evict_stuck_after > 0
            && self.owed_for(c, j, self.cfg.evict_stuck_after)
            && self.eligible(c, j, v)
            && !preempted_this_cycle(c, v)
    }

    /// Evicts `victims` and moves `tasks` off `node` on a copy of `st`,
    /// turns the node's idle MIG GPUs whole and places `r` there. With
    /// `victims_first`, the victims leave before the tasks find their new
    /// places, and every idle GPU may be turned to MIG for them. On
    /// failure, the job of the replica that found no room, if that is why.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn try_moves<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        st: &State,
        r: &Request,
        node: &str,
        tasks: &[TaskOf<'a>],
        victims: &[&'a Job],
        j: &'a Job,
        victims_first: bool,
    ) -> Result<(Vec<Migration>, Vec<&'a Job>, State), Stuck<'a>> {
        let mut trial = st.clone();
        for t in tasks {
            let name = &t.job.placed[t.task].as_ref().ok_or(None)?.task;
            trial.release(node, name).map_err(|_| None)?;
        }
        let mut victims = victims;
        if victims_first {
            // The victims leave first, and the GPUs they free are turned
            // to MIG for the replicas.
            for v in victims {
                release(&mut trial, v).map_err(|_| None)?;
            }
            self.convert_idle(c, &mut trial, None);
            victims = &[];
        }
        // Otherwise the replicas move at once, the victims leave after
        // their grace: the replicas' new places are found with the victims
        // still there. Nothing moved or relocated for j goes to nodes held
        // for a job that outranks j (another claim's promise): j may not
        // take them itself.
        let at = st.lookup(node);
        let closed = self.widest(c, j);
        let open = |where_: &Mask| -> Mask {
            Some(
                (0..st.len())
                    .map(|i| Some(i) != at && allows(&closed, i) && allows(where_, i))
                    .collect(),
            )
        };
        let mut moves = Vec::new();
        for t in tasks {
            let req = self
                .placer
                .request(t.job.spec.tasks[t.task].clone())
                .map_err(|_| None)?;
            let where_ = self.widest(c, t.job);
            let mask = open(&where_);
            let Ok(a) = self.placer.place_at(&trial, &req, |i| allows(&mask, i)) else {
                return Err(Some(t.job));
            };
            trial.allocate(&a).map_err(|_| None)?;
            moves.push(Migration {
                job: t.job.id().to_string(),
                task: t.task,
                to: a,
                creates: false,
                for_job: j.id().to_string(),
            });
        }
        for v in victims {
            release(&mut trial, v).map_err(|_| None)?;
        }
        // Work evicted only to be started again elsewhere must find room
        // there, or its team loses what it is owed.
        let mut extra: Vec<&'a Job> = Vec::new();
        for &v in victims {
            if self.eligible(c, j, v) {
                continue;
            }
            let mut reqs = Vec::with_capacity(v.spec.tasks.len());
            for t in &v.spec.tasks {
                reqs.push(self.placer.request(t.clone()).map_err(|_| None)?);
            }
            let reqs: Vec<&Request> = reqs.iter().collect();
            // Idle MIG GPUs elsewhere count, turned whole: the job's own
            // placement turns them when it queues again (repartition).
            let where_ = self.widest(c, v);
            let elsewhere = open(&where_);
            let mut placed = self
                .placer
                .place_all_at(&trial, &reqs, |i| allows(&elsewhere, i));
            if placed.is_err() {
                self.whole_idle(c, &mut trial, None);
                placed = self
                    .placer
                    .place_all_at(&trial, &reqs, |i| allows(&elsewhere, i));
            }
            if placed.is_err() {
                // No room elsewhere: the claim makes some, evicting on
                // other nodes work it may evict anyway (room_elsewhere; for
                // a gang, task by task once the claim has been owed
                // gang_room_after).
                let mut taken = victims.to_vec();
                taken.extend_from_slice(&extra);
                let vs = if reqs.len() == 1 {
                    self.room_elsewhere(c, &trial, j, &reqs, &elsewhere, &taken, tasks)
                } else if self.cfg.gang_room_after > 0
                    && self.owed_for(c, j, self.cfg.gang_room_after)
                {
                    self.room_for_gang(c, &trial, j, &reqs, &elsewhere, &taken, tasks)
                } else {
                    Vec::new()
                };
                let released = !vs.is_empty() && vs.iter().all(|x| release(&mut trial, x).is_ok());
                if released {
                    self.whole_idle(c, &mut trial, None);
                    placed = self
                        .placer
                        .place_all_at(&trial, &reqs, |i| allows(&elsewhere, i));
                    if placed.is_ok() {
                        extra.extend(vs);
                    }
                }
            }
            let Ok((_, next)) = placed else {
                return Err(None);
            };
            trial = next;
        }
        self.whole_idle(c, &mut trial, Some(node));
        let at = at.ok_or(None)?;
        let a = self
            .placer
            .place_at(&trial, r, |i| i == at)
            .map_err(|_| None)?;
        trial.allocate(&a).map_err(|_| None)?;
        Ok((moves, extra, trial))
    }

    /// For `v`, a one-task job that `j` relocates and that finds no room
    /// elsewhere, the victims `j` may evict anyway (borrowed work, in
    /// victims' order) on another node whose eviction makes room for `v`
    /// there.
    #[allow(clippy::too_many_arguments)]
    fn room_elsewhere<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        st: &State,
        j: &'a Job,
        reqs: &[&Request],
        where_: &Mask,
        taken: &[&'a Job],
        tasks: &[TaskOf<'a>],
    ) -> Vec<&'a Job> {
        let mut cands: Vec<&'a Job> = Vec::new();
        for &x in c.jobs {
            if has(taken, x) || tasks.iter().any(|t| std::ptr::eq(t.job, x)) {
                continue;
            }
            if self.eligible(c, j, x) && !preempted_this_cycle(c, x) {
                cands.push(x);
            }
        }
        if cands.is_empty() {
            return Vec::new();
        }
        self.victim_order(c, &mut cands);
        let need: i64 = reqs.iter().map(|r| i64::from(r.count()) * 1000).sum();
        self.cheapest_node(c, st, reqs, need, &cands, where_, 0)
            .map_or_else(Vec::new, |(vs, _)| vs)
    }

    /// `room_elsewhere` for a gang that `j` relocates: each task that finds
    /// no room beside those placed before it gets room from victims `j` may
    /// evict anyway on another node; none when some task gets none.
    #[allow(clippy::too_many_arguments)]
    fn room_for_gang<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        st: &State,
        j: &'a Job,
        reqs: &[&Request],
        where_: &Mask,
        taken: &[&'a Job],
        tasks: &[TaskOf<'a>],
    ) -> Vec<&'a Job> {
        let mut t = st.clone();
        let mut vs: Vec<&'a Job> = Vec::new();
        for &r in reqs {
            let a = match self.placer.place_at(&t, r, |i| allows(where_, i)) {
                Ok(a) => a,
                Err(_) => {
                    let mut all = taken.to_vec();
                    all.extend_from_slice(&vs);
                    let more = self.room_elsewhere(c, &t, j, &[r], where_, &all, tasks);
                    if more.is_empty() || !more.iter().all(|x| release(&mut t, x).is_ok()) {
                        return Vec::new();
                    }
                    vs.extend(more);
                    self.whole_idle(c, &mut t, None);
                    match self.placer.place_at(&t, r, |i| allows(where_, i)) {
                        Ok(a) => a,
                        Err(_) => return Vec::new(),
                    }
                }
            };
            if t.allocate(&a).is_err() {
                return Vec::new();
            }
        }
        vs
    }

    /// The work a job relocated for `j` may lose.
    fn loss_allowed<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> Nanos {
        if self.owed_for(c, j, OWED_LONG) {
            RELOCATE_LOSS_OWED
        } else {
            RELOCATE_LOSS
        }
    }

    /// Whether `v`, which `j` may not evict, may be evicted for `j` to start
    /// again at once elsewhere: work on whole GPUs, all its tasks (a gang
    /// restarts whole from its checkpoint), checkpointed within
    /// `loss_allowed`, of a lower class than `j`'s or of `j`'s class and
    /// another team (not production: a service is not restarted for
    /// another). Its team keeps what it is owed (the claim's plan finds it
    /// room on other nodes, and it is within its guarantee, so it goes
    /// first when it queues again); it loses its grace period and the work
    /// since its checkpoint.
    fn relocatable<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, v: &'a Job) -> bool {
        if !self.cfg.relocate || v.phase != Phase::Running || v.spec.class > j.spec.class {
            return false;
        }
        if v.spec.class == j.spec.class
            && (v.spec.team == j.spec.team || v.spec.class == Class::Production)
        {
            return false;
        }
        if c.now - v.checkpoint > self.loss_allowed(c, j) || preempted_this_cycle(c, v) {
            return false;
        }
        v.placed.iter().all(|a| {
            a.as_ref()
                .is_some_and(|a| a.grants.iter().all(|g| g.slice.is_none()))
        })
    }

    /// Whether some of `victims` are there to be relocated (`j` may not
    /// simply evict them). A node that only relocation frees is
    /// consolidate's too: the victim search leaves such jobs alone.
    pub(super) fn relocates<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        victims: &[&'a Job],
    ) -> bool {
        victims.iter().any(|&v| !self.eligible(c, j, v))
    }

    /// Whether the replicas moved for a job have all left their old places
    /// (the world releases each when its new one is ready).
    pub(super) fn moves_done(c: &Cycle<'_>, refs: &[MoveRef]) -> bool {
        refs.iter().all(|r| {
            c.cluster
                .node_by_name(&r.node)
                .is_none_or(|n| n.task(&r.task).is_none())
        })
    }
}

#[cfg(test)]
impl Scheduler {
    /// Records that a replica of the job with that ID moved at `at`
    /// (tests).
    pub(super) fn set_moved_at(&mut self, id: &str, at: Nanos) {
        let s = self.table.slot_for_id(id);
        self.table.entries[s].memory.moved_at = Some(at);
    }

    /// When a replica of the job with that ID last moved (tests).
    pub(super) fn moved_at(&self, id: &str) -> Option<Nanos> {
        self.table
            .slot_of_id(id)
            .and_then(|s| self.table.entries[s].memory.moved_at)
    }
}
