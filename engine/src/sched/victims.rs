//! The victim search: which running jobs to evict so that a job fits,
//! losing the least. For one task, the node where the cheapest victims make
//! it fit (`cheapest_node`); for a small gang of whole-GPU tasks, node by
//! node (`victims_per_task`); otherwise victims are added in their order of
//! preference until the job fits, and those it does not need are given
//! back. Freed GPUs count as they will be once the victims are gone: idle
//! MIG GPUs turned whole, or whole GPUs turned to MIG for a MIG task.

use std::collections::BTreeSet;

use super::Scheduler;
use super::place::{enough_whole_gpus_in, least_whole_gpus};
use super::preempt::{MAX_VICTIMS, preempted_this_cycle};
use super::reserve::{Mask, allows};
use super::snapshot::Cycle;
use super::types::{Job, Nanos};
use crate::cluster::{Assignment, ClusterError, Node, State};
use crate::gpu::COMPUTE_SLICES;
use crate::placement::Request;
use crate::workload::Kind;

/// The most tasks a gang may have for `victims_per_task`: each task is a
/// search over the nodes, and with gangs of up to 32 tasks a week took
/// more than twice as long.
const MAX_PER_TASK: usize = 8;

/// How far a victim search's milli count may be short and still try a
/// placement; `MIG_SLACK` is added for each MIG GPU counted: a MIG
/// instance's share is rounded down to milli (1g is 142 of 1000), so a
/// GPU's instances and free compute add up to as little as 994.
const ROUNDING_SLACK: i64 = 8;
const MIG_SLACK: i64 = 6;

/// The rounding slack of a count over `mig_gpus` MIG GPUs.
pub(super) fn slack_for(mig_gpus: i64) -> i64 {
    ROUNDING_SLACK + MIG_SLACK * mig_gpus
}

/// Victims and the nodes the job will use once they are gone.
pub(super) type Found<'a> = (Vec<&'a Job>, BTreeSet<String>);

/// Releases everything `v` holds on `st`.
pub(super) fn release(st: &mut State, v: &Job) -> Result<(), ClusterError> {
    for a in v.placed.iter().flatten() {
        st.release(&a.node, &a.task)?;
    }
    Ok(())
}

/// `release` on one node only: where a search asks whether that node alone
/// can seat a job, a victim's tasks elsewhere need not be released.
pub(super) fn release_on(st: &mut State, v: &Job, node: &str) -> Result<(), ClusterError> {
    for a in v.placed.iter().flatten() {
        if a.node == node {
            st.release(&a.node, &a.task)?;
        }
    }
    Ok(())
}

/// Allocates again everything `v` holds.
fn restore(st: &mut State, v: &Job) -> Result<(), ClusterError> {
    for a in v.placed.iter().flatten() {
        st.allocate(a)?;
    }
    Ok(())
}

/// The number of GPUs of `n` with MIG on.
pub(super) fn mig_count(n: &Node) -> usize {
    n.gpus().iter().filter(|g| g.mig()).count()
}

/// The compute of `n`'s MIG GPUs not taken by busy instances, in milli
/// (free instances count as free).
pub(super) fn mig_free_milli(n: &Node) -> i64 {
    let mut total = 0;
    for g in n.gpus() {
        if !g.mig() || g.cordoned() {
            continue;
        }
        let mut busy = 0;
        for sl in g.slices() {
            if sl.task().is_some()
                && let Ok(p) = g.model().profile(sl.profile())
            {
                busy += p.compute;
            }
        }
        total += i64::from(COMPUTE_SLICES - busy) * 1000 / 7;
    }
    total
}

/// The GPU free in `st`: whole and shared GPUs' milli left, and the free
/// compute of MIG GPUs; and how many MIG GPUs it counted.
fn free_milli(st: &State) -> (i64, i64) {
    let (mut free, mut mig_gpus) = (0, 0);
    for n in st.nodes() {
        free += i64::from(n.gpu_free_milli()) + mig_free_milli(n);
        mig_gpus += mig_count(n) as i64;
    }
    (free, mig_gpus)
}

/// The nodes the assignments use.
fn nodes_of(target: &[Assignment]) -> BTreeSet<String> {
    target.iter().map(|a| a.node.clone()).collect()
}

impl Cycle<'_> {
    /// The free GPU milli of the plan, computed once until it changes.
    pub fn free_now(&mut self) -> i64 {
        if self.free < 0 {
            (self.free, self.mig_gpus) = free_milli(&self.st);
        }
        self.free
    }

    /// The rounding slack of a search over the whole plan.
    pub fn slack(&mut self) -> i64 {
        self.free_now();
        slack_for(self.mig_gpus)
    }

    /// `gpu_count` zeroed, making it and `gpu_base` on first use. The
    /// plan's nodes and their GPUs are the same all cycle.
    fn gpu_counts(&mut self) {
        if self.gpu_base.is_empty() {
            self.gpu_base = vec![0; self.st.len() + 1];
            for i in 0..self.st.len() {
                self.gpu_base[i + 1] = self.gpu_base[i] + self.st.node(i).gpus().len();
            }
            self.gpu_count = vec![0; self.gpu_base[self.st.len()]];
        } else {
            self.gpu_count.iter_mut().for_each(|x| *x = 0);
        }
    }
}

impl Scheduler {
    /// The running jobs to evict so that `j` fits, losing the least, and
    /// the nodes `j` will use; none when no set of victims makes it fit.
    pub(super) fn victims<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
    ) -> Option<Found<'a>> {
        let mut cands: Vec<&'a Job> = Vec::new();
        for &v in c.jobs {
            if self.eligible(c, j, v) && !preempted_this_cycle(c, v) {
                cands.push(v);
            }
        }
        if cands.is_empty() {
            return None;
        }
        // Even evicting every candidate would not free enough: do not
        // search.
        let freeable: i64 = cands.iter().map(|v| self.held_of(v)).sum();
        let need = self.demand_of(j);
        if freeable + c.free_now() + c.slack() < need {
            return None;
        }
        if !self.whole_room_after(c, reqs, &cands) {
            return None;
        }
        self.victim_order(c, &mut cands);
        if reqs.len() == 1 {
            // One task fits on one node: free the node that costs least.
            return self.victims_on_one_node(c, j, reqs, &cands);
        }
        if let Some(found) = self.victims_per_task(c, j, reqs, &cands) {
            return Some(found);
        }
        if cands.len() > MAX_VICTIMS {
            cands.truncate(MAX_VICTIMS);
            // The search stops at MAX_VICTIMS: if those free too little,
            // so would the search, after dozens of placements.
            let freeable: i64 = cands.iter().map(|v| self.held_of(v)).sum();
            if freeable + c.free_now() + c.slack() < need || !self.whole_room_after(c, reqs, &cands)
            {
                return None;
            }
        }
        // j must fit where it would actually be placed: the same node sets
        // try_start uses, or the victims' room goes to someone else and j
        // preempts again.
        let allowed = self.candidates(c, j, reqs.len());
        let convert = self.wants_mig(reqs);
        let cool = self.change_cooldown(c, j);
        // A fit check places the whole job; make none until the GPU freed,
        // with what is free already, could cover what j asks.
        let mut short = need - c.free_now();
        let slack = c.slack();
        let mut trial = c.st.clone();
        let mut chosen: Vec<&'a Job> = Vec::new();
        let mut fits = false;
        for &v in &cands {
            let held = self.held_of(v);
            if release(&mut trial, v).is_err() {
                continue;
            }
            chosen.push(v);
            short -= held;
            if short <= slack
                && self
                    .fits_in(c, &mut trial, reqs, &allowed, convert, cool)
                    .is_some()
            {
                fits = true;
                break;
            }
        }
        if !fits {
            return None;
        }
        // Give back, newest choice first, every victim j fits without.
        // When the trial turned freed GPUs to MIG a victim cannot go back
        // onto them as it was: the trial without it is rebuilt from the
        // plan.
        let mut k = chosen.len();
        while k > 0 {
            k -= 1;
            let mut back;
            if convert {
                back = c.st.clone();
                let all = chosen
                    .iter()
                    .enumerate()
                    .all(|(x, v)| x == k || release(&mut back, v).is_ok());
                if !all {
                    continue;
                }
            } else {
                back = trial.clone();
                if restore(&mut back, chosen[k]).is_err() {
                    continue;
                }
            }
            if self
                .fits_in(c, &mut back, reqs, &allowed, convert, cool)
                .is_some()
            {
                trial = back;
                chosen.remove(k);
            }
        }
        // The target of the final set of victims.
        let target = self
            .fits_in(c, &mut trial, reqs, &allowed, convert, cool)
            .unwrap_or_default();
        Some((chosen, nodes_of(&target)))
    }

    /// Turns `st`'s idle GPUs as the job needs them and places it on the
    /// first allowed node set where it fits; `victims`' fit check.
    fn fits_in(
        &mut self,
        c: &Cycle<'_>,
        st: &mut State,
        reqs: &[&Request],
        allowed: &[Mask],
        convert: bool,
        cool: Nanos,
    ) -> Option<Vec<Assignment>> {
        if convert {
            self.convert_idle(c, st, None);
            self.drop_free(c, st, None, cool);
        } else {
            self.whole_idle(c, st, None);
            if !enough_whole_gpus_in(st, reqs, &None) {
                return None;
            }
        }
        for a in allowed {
            if let Ok((as_, _)) = self.placer.place_all_at(st, reqs, |i| allows(a, i)) {
                return Some(as_);
            }
        }
        None
    }

    /// False when whole-GPU requests could not all fit even with every
    /// candidate evicted: per node, the GPUs that would then be whole
    /// (free, held only by candidates, or MIG GPUs left idle and out of
    /// their cooldown) do not make enough slots. True for other kinds of
    /// requests. A search that cannot succeed costs dozens of trial
    /// placements; on a backlog, gangs owed their guarantee searched every
    /// 15 s and found nothing 99% of the time.
    pub(super) fn whole_room_after(
        &self,
        c: &mut Cycle<'_>,
        reqs: &[&Request],
        cands: &[&Job],
    ) -> bool {
        let least = least_whole_gpus(reqs);
        if least == 0 {
            return true;
        }
        // How many grants the candidates hold on each GPU: a GPU is left
        // whole when they are all its holders or busy instances.
        c.gpu_counts();
        for v in cands {
            for a in v.placed.iter().flatten() {
                let Some(i) = c.st.lookup(&a.node) else {
                    continue;
                };
                let (base, gpus) = (c.gpu_base[i], c.gpu_base[i + 1] - c.gpu_base[i]);
                for g in &a.grants {
                    if g.gpu >= 0 && (g.gpu as usize) < gpus {
                        c.gpu_count[base + g.gpu as usize] += 1;
                    }
                }
            }
        }
        let mut slots = 0;
        for i in 0..c.st.len() {
            if slots >= reqs.len() {
                break;
            }
            let n = c.st.node(i);
            let mut whole = 0;
            for (k, g) in n.gpus().iter().enumerate() {
                if g.cordoned() || g.mig() && !self.cfg.mig {
                    continue;
                }
                let busy = if g.mig() {
                    g.slices().iter().filter(|sl| sl.task().is_some()).count()
                } else {
                    g.holders().len()
                };
                // The cooldown last: a look-up, needed only for a GPU the
                // candidates would leave whole.
                if busy == c.gpu_count[c.gpu_base[i] + k]
                    && (!g.mig() || self.cooled(c, n.name(), k))
                {
                    whole += 1;
                }
            }
            slots += whole / least as usize;
        }
        slots >= reqs.len()
    }

    /// Whether, under dynamic MIG, a victim search for `reqs` should count
    /// freed GPUs as splittable: a victim's GPU, once free, can be turned to
    /// MIG for a MIG task (`repartition` does it when the victims are
    /// gone).
    pub(super) fn wants_mig(&self, reqs: &[&Request]) -> bool {
        self.cfg.mig
            && reqs
                .iter()
                .any(|r| r.kind() == Kind::MigProfile || r.kind() == Kind::MemoryProfile)
    }

    /// Turns MIG on, in a trial state, on the idle whole GPUs of a
    /// MIG-capable model that `repartition` could change (out of its
    /// cooldown: victims freed for a change that cannot come would be
    /// evicted for nothing, and evicted again), on `node` or everywhere.
    pub(super) fn convert_idle(&self, c: &Cycle<'_>, st: &mut State, node: Option<&str>) {
        self.turn_idle(c, st, node, true);
    }

    /// Turns MIG off, in a trial state, on the idle MIG GPUs that
    /// `repartition` could turn whole, on `node` or everywhere: the
    /// victims of a whole-GPU job may leave it MIG GPUs, which are whole
    /// again one change later.
    pub(super) fn whole_idle(&self, c: &Cycle<'_>, st: &mut State, node: Option<&str>) {
        if self.cfg.mig {
            self.turn_idle(c, st, node, false);
        }
    }

    /// Sets MIG mode to `mig`, in a trial state, on the idle GPUs of a
    /// MIG-capable model that `repartition` could change (not cordoned, out
    /// of their cooldown), on `node` or everywhere.
    fn turn_idle(&self, c: &Cycle<'_>, st: &mut State, node: Option<&str>, mig: bool) {
        let range = match node {
            Some(name) => match st.lookup(name) {
                Some(i) => i..i + 1,
                None => return,
            },
            None => 0..st.len(),
        };
        let mut turn: Vec<usize> = Vec::new();
        for i in range {
            let n = st.node(i);
            turn.clear();
            for (k, g) in n.gpus().iter().enumerate() {
                if g.mig() != mig
                    && g.model().mig
                    && g.idle()
                    && !g.cordoned()
                    && self.cooled(c, n.name(), k)
                {
                    turn.push(k);
                }
            }
            if turn.is_empty() {
                continue;
            }
            let name = n.name().to_string();
            for &k in &turn {
                let _ = st.set_mig(&name, k, mig);
            }
        }
    }

    /// For a single task, the node where evicting the fewest candidates (in
    /// their order of preference) makes it fit: those victims and the
    /// node.
    fn victims_on_one_node<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
        cands: &[&'a Job],
    ) -> Option<Found<'a>> {
        let need = self.demand_of(j);
        let where_ = self.widest(c, j);
        let cool = self.change_cooldown(c, j);
        let st = c.st.clone();
        let (best, node) = self.cheapest_node(c, &st, reqs, need, cands, &where_, cool)?;
        Some((best, BTreeSet::from([node])))
    }

    /// For a gang of whole-GPU tasks (two 8-GPU fine-tunes), node by node:
    /// for each task the cheapest victims that make it fit on one node,
    /// after the victims chosen for the tasks before it; then the whole
    /// gang is checked where `try_start` would place it. The search in
    /// `victims` adds victims in their order of preference over all nodes
    /// and rarely clears whole nodes. None when it finds none; `victims`
    /// then searches its own way.
    fn victims_per_task<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
        cands: &[&'a Job],
    ) -> Option<Found<'a>> {
        if reqs.len() > MAX_PER_TASK {
            return None;
        }
        if reqs
            .iter()
            .any(|r| r.kind() != Kind::WholeGpus || r.count() < 1)
        {
            return None;
        }
        let where_ = self.widest(c, j);
        let mut trial = c.st.clone();
        let mut left: Vec<&'a Job> = cands.to_vec();
        let mut chosen: Vec<&'a Job> = Vec::new();
        for &r in reqs {
            let one = [r];
            let node = match self.placer.place_at(&trial, r, |i| allows(&where_, i)) {
                // Room the victims before left, or free.
                Ok(a) => a.node,
                Err(_) => {
                    let need = i64::from(r.count()) * 1000;
                    let (vs, node) =
                        self.cheapest_node(c, &trial, &one, need, &left, &where_, 0)?;
                    for v in vs {
                        release(&mut trial, v).ok()?;
                        chosen.push(v);
                        left.retain(|x| !std::ptr::eq(*x, v));
                    }
                    node
                }
            };
            self.whole_idle(c, &mut trial, Some(&node));
            let at = trial.lookup(&node)?;
            let a = self.placer.place_at(&trial, r, |i| i == at).ok()?;
            trial.allocate(&a).ok()?;
        }
        if chosen.is_empty() || chosen.len() > MAX_VICTIMS {
            return None;
        }
        // The gang must fit where try_start would place it; then, as in
        // victims, every victim it fits without is given back, newest
        // first.
        let allowed = self.candidates(c, j, reqs.len());
        let mut target = self.fits_without(c, reqs, &allowed, &chosen)?;
        let mut k = chosen.len();
        while k > 0 && chosen.len() > 1 {
            k -= 1;
            let mut without = chosen[..k].to_vec();
            without.extend_from_slice(&chosen[k + 1..]);
            if let Some(as_) = self.fits_without(c, reqs, &allowed, &without) {
                chosen = without;
                target = as_;
            }
        }
        Some((chosen, nodes_of(&target)))
    }

    /// Where the gang goes once `vs` are gone, if it fits.
    fn fits_without(
        &mut self,
        c: &Cycle<'_>,
        reqs: &[&Request],
        allowed: &[Mask],
        vs: &[&Job],
    ) -> Option<Vec<Assignment>> {
        let mut back = c.st.clone();
        for v in vs {
            release(&mut back, v).ok()?;
        }
        self.whole_idle(c, &mut back, None);
        for a in allowed {
            if let Ok((as_, _)) = self.placer.place_all_at(&back, reqs, |i| allows(a, i)) {
                return Some(as_);
            }
        }
        None
    }

    /// The node of `base` where evicting the cheapest candidates
    /// (`victim_cost`, in their order of preference) makes `reqs` (`need`
    /// GPU milli in all) fit on that one node. With `relayout`, a MIG task
    /// may also fit once the free instances of MIG GPUs last changed at
    /// least that long ago are re-partitioned (`drop_free`); 0: not.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cheapest_node<'a>(
        &mut self,
        c: &Cycle<'a>,
        base: &State,
        reqs: &[&Request],
        need: i64,
        cands: &[&'a Job],
        where_: &Mask,
        relayout: Nanos,
    ) -> Option<(Vec<&'a Job>, String)> {
        // The candidates on each node, nodes in the order first met.
        let mut nodes: Vec<&str> = Vec::new();
        let mut on_node: rustc_hash::FxHashMap<&str, Vec<&'a Job>> =
            rustc_hash::FxHashMap::default();
        for &v in cands {
            let mut seen: Vec<&str> = Vec::new();
            for a in v.placed.iter().flatten() {
                if seen.contains(&a.node.as_str()) {
                    continue;
                }
                seen.push(&a.node);
                let list = on_node.entry(&a.node).or_default();
                if list.is_empty() {
                    nodes.push(&a.node);
                }
                list.push(v);
            }
        }
        let mut best: Option<Vec<&'a Job>> = None;
        let (mut best_node, mut best_cost) = (String::new(), 0usize);
        // A MIG task prefers, between nodes of as many victims, one where
        // it fits once they are gone without a MIG change: it then waits
        // for the grace only, not the grace and then the change.
        let convert = self.wants_mig(reqs);
        let mut best_changes = false;
        for &node in &nodes {
            let Some(at) = base.lookup(node) else {
                continue;
            };
            let n = base.node(at);
            if !allows(where_, at) {
                continue;
            }
            if best.is_some() && best_cost <= 1 && mig_count(n) == 0 {
                continue; // only a change could seat the task here, and one victim is the least
            }
            let mut trial = base.clone();
            let mut chosen: Vec<&'a Job> = Vec::new();
            let mut cost = 0;
            let mut short = need - i64::from(n.gpu_free_milli()) - mig_free_milli(n);
            let slack = slack_for(mig_count(n) as i64);
            for &v in &on_node[node] {
                if best.is_some() && cost >= best_cost {
                    break;
                }
                let held = self.held_of(v);
                if release_on(&mut trial, v, node).is_err() {
                    continue;
                }
                chosen.push(v);
                cost += self.victim_cost(c, v);
                short -= held;
                if short > slack {
                    continue;
                }
                let (fits, mut changes) =
                    self.fits_after(c, &mut trial, node, at, reqs, convert, relayout);
                if !fits {
                    continue;
                }
                // Victims are added in their order of preference over the
                // node's GPUs, so those on GPUs that end up not turned may
                // not be needed: give back, newest first, every one within
                // its team's guarantee the task fits without, or it is owed
                // at once. Borrowed ones go all the same.
                let mut k = chosen.len();
                while k > 0 && chosen.len() > 1 {
                    k -= 1;
                    if self.borrowing(c, chosen[k]) {
                        continue;
                    }
                    let mut back = base.clone();
                    let all = chosen
                        .iter()
                        .enumerate()
                        .all(|(x, w)| x == k || release_on(&mut back, w, node).is_ok());
                    if !all {
                        continue;
                    }
                    let (fits_back, changes_back) =
                        self.fits_after(c, &mut back, node, at, reqs, convert, relayout);
                    if fits_back {
                        cost -= self.victim_cost(c, chosen[k]);
                        chosen.remove(k);
                        changes = changes_back;
                    }
                }
                if best.is_none()
                    || cost < best_cost
                    || cost == best_cost && best_changes && !changes
                {
                    best = Some(chosen.clone());
                    best_node = node.to_string();
                    best_cost = cost;
                    best_changes = changes;
                }
                break;
            }
            if best.is_some() && best_cost <= 1 && !best_changes {
                break; // one victim: no node can do better, and ties keep the first
            }
        }
        best.map(|b| (b, best_node))
    }

    /// Turns the trial's idle GPUs of the node as the task needs them and
    /// says whether it fits, and whether MIG changes were needed.
    #[allow(clippy::too_many_arguments)]
    fn fits_after(
        &mut self,
        c: &Cycle<'_>,
        trial: &mut State,
        node: &str,
        at: usize,
        reqs: &[&Request],
        convert: bool,
        relayout: Nanos,
    ) -> (bool, bool) {
        let mut changes = false;
        if convert {
            changes = !self.fits_on(trial, at, reqs);
            if changes {
                self.convert_idle(c, trial, Some(node));
                if relayout > 0 && !self.fits_on(trial, at, reqs) {
                    self.drop_free(c, trial, Some(node), relayout);
                }
            }
        } else {
            self.whole_idle(c, trial, Some(node));
        }
        (self.fits_on(trial, at, reqs), changes)
    }

    /// Whether `reqs` fit together on node `at` of `st`.
    pub(super) fn fits_on(&mut self, st: &State, at: usize, reqs: &[&Request]) -> bool {
        if reqs.len() == 1 {
            return self.placer.fits(st.node(at), reqs[0]);
        }
        self.placer.place_all_at(st, reqs, |i| i == at).is_ok()
    }
}
