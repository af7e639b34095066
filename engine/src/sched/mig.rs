//! Dynamic MIG. When a job does not fit because the GPUs are split the
//! wrong way, re-partition one:
//!   - a MIG task with no slice: on a MIG GPU, replace the free instances
//!     by the profile needed (busy instances stay); else turn MIG on on an
//!     idle GPU, on a node that already runs MIG work if there is one, so
//!     whole nodes stay whole for training;
//!   - a whole-GPU task: turn MIG off on idle MIG GPUs of the node where
//!     that makes the task fit.
//!
//! A GPU changes at most once per `reconfig_cooldown`, so a shifting mix
//! does not make it thrash. The world cordons a GPU while its change is
//! applied.

use std::sync::Arc;

use super::Scheduler;
use super::reserve::{Mask, allows};
use super::snapshot::Cycle;
use super::table::AskedChange;
use super::types::{Job, MINUTE, Nanos, Reconfig, WaitReason};
use super::victims::mig_count;
use crate::cluster::{Gpu, Node, State};
use crate::gpu::{Layout, Model, Placement, Profile};
use crate::placement::Request;
use crate::workload::Kind;

/// Bounds how long a job waits for a change made for it rather than start
/// on an instance created elsewhere: a change that has not ended by then
/// may have failed (on Kubernetes a failed change keeps its node cordoned
/// until someone looks).
pub(super) const CHANGE_WAIT: Nanos = 2 * MINUTE;

/// The MIG profile `r` takes on GPUs of model `m`, if any.
pub(super) fn profile_for<'m>(r: &Request, m: &'m Model) -> Option<&'m Profile> {
    if !m.mig || !r.allows_model(m) {
        return None;
    }
    match r.kind() {
        Kind::MigProfile => m.profile(r.profile()).ok(),
        Kind::MemoryProfile => r.resolve(m).0,
        _ => None,
    }
}

/// The instances of `g` that hold a task.
pub(super) fn used_layout(g: &Gpu) -> Layout {
    g.slices()
        .iter()
        .filter(|sl| sl.task().is_some())
        .map(|sl| sl.placement().clone())
        .collect()
}

/// Whether an instance of `g` holds no task.
pub(super) fn has_free_instance(g: &Gpu) -> bool {
    g.slices().iter().any(|sl| sl.task().is_none())
}

/// Whether every instance of `l` exists on `g` already.
pub(super) fn fits_layout(g: &Gpu, l: &[Placement]) -> bool {
    l.iter()
        .all(|p| g.slices().iter().any(|sl| sl.placement() == p))
}

/// A GPU to re-partition for a MIG task, as `mig_for` weighs it.
struct MigOption {
    node: usize,
    gpu: usize,
    /// The instance added beside the busy ones.
    place: Placement,
    turn_on: bool,
    /// Lower is better.
    rank: [i64; 3],
}

/// Plans one GPU: keep busy instances, drop free ones, add `p`. Preference:
/// the node with the most MIG GPUs (MIG gathers on few nodes so the others
/// stay whole for training), then a GPU already split rather than one
/// turned to MIG, then the fewest instances dropped. `busy` is a buffer,
/// reused from one GPU to the next.
fn region_for(
    node: usize,
    g: &Gpu,
    p: &Profile,
    mig_gpus: usize,
    busy: &mut Vec<Placement>,
) -> Option<MigOption> {
    busy.clear();
    let mut dropped = 0i64;
    if g.mig() {
        for sl in g.slices() {
            if sl.task().is_some() {
                busy.push(sl.placement().clone());
            } else {
                dropped += 1;
            }
        }
    } else if !g.idle() {
        return None;
    }
    let starts = g.model().free_starts(busy, &p.name).ok()?;
    if starts == 0 {
        return None;
    }
    // The last allowed start keeps the low slices, where the big profiles
    // (4g@0, 7g@0) must start, free longest.
    let start = 7 - starts.leading_zeros() as i32;
    let turning = i64::from(!g.mig());
    Some(MigOption {
        node,
        gpu: g.index(),
        place: Placement {
            profile: p.name.clone(),
            start,
        },
        turn_on: !g.mig(),
        rank: [-(mig_gpus as i64), turning, dropped - busy.len() as i64],
    })
}

impl Scheduler {
    /// Asks a change that will let `j` run and returns `Reconfig`, or none.
    /// It changes GPUs only where `j` may be placed (outside another gang's
    /// reservation), and backs off a job whose last change did not let it
    /// start, so it cannot churn GPUs forever, unless the job holds nodes
    /// its victims left.
    pub(super) fn repartition<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
    ) -> Option<WaitReason> {
        if self.awaiting_change(c, j) {
            return Some(WaitReason::Reconfig);
        }
        let until = self.memory_of(j).map_or(0, |m| m.backoff);
        if c.now < until && !self.holds_nodes(j) {
            // Not a job holding nodes: it evicted for them, and the
            // victims' instances, kept for a change it could not ask, took
            // the victims back.
            return None;
        }
        let where_ = self.widest(c, j); // outside reservations
        let mut asked = self.mig_off_for(c, j, reqs, &where_);
        for &r in reqs {
            if r.kind() == Kind::MigProfile || r.kind() == Kind::MemoryProfile {
                asked = self.mig_for(c, j, r, &where_) || asked;
            }
        }
        if !asked {
            return None;
        }
        let (now, cooldown) = (c.now, self.cfg.reconfig_cooldown);
        let backed_off = match self.memory_mut(j) {
            Some(m) => {
                m.attempts += 1;
                if m.attempts >= 2 {
                    m.backoff = now + cooldown;
                    m.attempts = 0;
                    true
                } else {
                    false
                }
            }
            None => false,
        };
        if backed_off {
            self.note_backoff(c, j);
        }
        Some(WaitReason::Reconfig)
    }

    /// Turns whole, while `j`'s victims are in their grace, the idle MIG
    /// GPUs that `j` will need on the node held for it, so that the change
    /// and the grace run together: a claim for whole GPUs that waited for
    /// its victims to leave and only then for the change took 60 s + a
    /// search, past a guarantee's 60 s + grace. Only a single task on one
    /// node, and only when the GPUs turned, the node's free whole GPUs and
    /// those its victims free are enough for it.
    pub(super) fn whole_during_grace<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) {
        if !self.cfg.mig || self.change_pending(c, j.id()) {
            return;
        }
        let name = match self.promised_nodes.get(j.id()) {
            Some(nodes) if nodes.len() == 1 => nodes.iter().next().expect("one node").clone(),
            _ => return,
        };
        let Ok(reqs) = self.requests(j) else {
            return;
        };
        let count = match reqs.as_slice() {
            [r] if r.kind() == Kind::WholeGpus => Some(r.count()),
            _ => None,
        };
        self.give_back(j, reqs);
        let Some(count) = count else {
            return;
        };
        let Some(at) = c.st.lookup(&name) else {
            return;
        };
        // Milli of the node's non-MIG GPUs that j's victims hold.
        let gpus = c.st.node(at).gpus().len();
        let mut freed = vec![0i32; gpus];
        for id in self.promised.get(j.id()).into_iter().flatten() {
            let Some(v) = self.job(c, id) else { continue };
            for a in v.placed.iter().flatten() {
                if a.node != name {
                    continue;
                }
                for g in &a.grants {
                    if g.slice.is_none()
                        && let Some(f) = usize::try_from(g.gpu).ok().and_then(|k| freed.get_mut(k))
                    {
                        *f += g.milli;
                    }
                }
            }
        }
        let n = c.st.node(at);
        let mut have = 0;
        let mut idle = Vec::new();
        for (k, g) in n.gpus().iter().enumerate() {
            if g.cordoned() {
            } else if !g.mig() && g.used() == freed[k] {
                have += 1;
            } else if g.mig() && g.idle() && self.cooled(c, &name, k) {
                idle.push(k);
            }
        }
        let need = count - have;
        if need <= 0 || need as usize > idle.len() {
            return;
        }
        for &k in &idle[..need as usize] {
            let rc = Reconfig {
                node: name.clone(),
                gpu: k,
                mig: false,
                layout: Layout::new(),
                add: false,
                for_job: j.id().to_string(),
            };
            self.apply(c, Some(j), rc, false);
        }
    }

    /// Whether a change asked for `j` is still being applied; forgets the
    /// request once it is not.
    pub(super) fn awaiting_change(&mut self, c: &Cycle<'_>, j: &Job) -> bool {
        if self.change_pending(c, j.id()) {
            return true;
        }
        if let Some(m) = self.memory_mut(j) {
            m.awaiting.clear();
        }
        false
    }

    /// Whether a change asked for the job is still being applied (its GPU
    /// is cordoned in the world's cluster).
    pub(super) fn change_pending(&self, c: &Cycle<'_>, job: &str) -> bool {
        self.change_asked_within(c, job, -1)
    }

    /// `change_pending` for the changes asked less than `within` ago (any
    /// when `within` < 0). A GPU cordoned for another job's change is not
    /// one: a job once started, evicted and queued again read its old
    /// change in the cordon of a change asked later for someone else, and
    /// waited for it instead of searching for room.
    fn change_asked_within(&self, c: &Cycle<'_>, job: &str, within: Nanos) -> bool {
        let Some(s) = self.table.slot_of_id(job) else {
            return false;
        };
        for a in &self.table.entries[s].memory.awaiting {
            let Some(n) = c.cluster.node_by_name(&a.node) else {
                continue;
            };
            if !n.gpus().get(a.gpu).is_some_and(Gpu::cordoned) {
                continue;
            }
            if self.last_change_of(&a.node, a.gpu).unwrap_or(0) == a.at
                && (within < 0 || c.now - a.at < within)
            {
                return true;
            }
        }
        false
    }

    /// Whether a change asked for the job less than `CHANGE_WAIT` ago is
    /// still being applied.
    pub(super) fn change_under_way(&self, c: &Cycle<'_>, job: &str) -> bool {
        self.change_asked_within(c, job, CHANGE_WAIT)
    }

    /// When GPU `k` of `node` was last re-partitioned.
    fn last_change_of(&self, node: &str, k: usize) -> Option<Nanos> {
        self.last_change
            .get(node)
            .and_then(|v| v.get(k).copied().flatten())
    }

    /// Whether GPU `k` of `node` is out of its cooldown.
    pub(super) fn cooled(&self, c: &Cycle<'_>, node: &str, k: usize) -> bool {
        self.cooled_for(c, node, k, self.cfg.reconfig_cooldown)
    }

    /// `cooled` with another cooldown.
    pub(super) fn cooled_for(&self, c: &Cycle<'_>, node: &str, k: usize, cooldown: Nanos) -> bool {
        self.last_change_of(node, k)
            .is_none_or(|last| c.now - last >= cooldown)
    }

    /// The cooldown a change for `j` waits out: `claim_cooldown` for
    /// production within its team's guarantee, `reconfig_cooldown` for the
    /// rest.
    pub(super) fn change_cooldown<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> Nanos {
        if self.cfg.claim_cooldown > 0
            && j.spec.class == crate::workload::Class::Production
            && self.within_guarantee(c, j)
        {
            return self.cfg.reconfig_cooldown.min(self.cfg.claim_cooldown);
        }
        self.cfg.reconfig_cooldown
    }

    /// Finds a GPU to re-partition for a MIG task, on the nodes `where_`
    /// allows.
    fn mig_for<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job, r: &Request, where_: &Mask) -> bool {
        if self.extend_change(c, j, r) {
            return true;
        }
        let cool = self.change_cooldown(c, j);
        let mut opts: Vec<MigOption> = Vec::new();
        let mut busy: Vec<Placement> = Vec::new();
        for i in 0..c.st.len() {
            let n = c.st.node(i);
            if r.cpu_milli() > n.cpu_free() || r.mem_mib() > n.mem_free() || !allows(where_, i) {
                continue;
            }
            let mig_gpus = mig_count(n);
            for (k, g) in n.gpus().iter().enumerate() {
                let Some(p) = profile_for(r, g.model()) else {
                    continue;
                };
                if g.cordoned() || !self.cooled_for(c, n.name(), k, cool) {
                    continue;
                }
                if let Some(o) = region_for(i, g, p, mig_gpus, &mut busy) {
                    opts.push(o);
                }
            }
        }
        // Stable, as Go's SliceStable: the first of equal ranks.
        opts.sort_by_key(|a| a.rank);
        let Some(o) = opts.into_iter().next() else {
            return false;
        };
        let n = c.st.node(o.node);
        let g = &n.gpus()[o.gpu];
        let mut layout = if g.mig() {
            used_layout(g)
        } else {
            Layout::new()
        };
        layout.push(o.place);
        let rc = Reconfig {
            node: n.name().to_string(),
            gpu: o.gpu,
            mig: true,
            layout,
            add: false,
            for_job: j.id().to_string(),
        };
        self.apply(c, Some(j), rc, o.turn_on)
    }

    /// Adds `r`'s instance to a GPU already being re-partitioned for `j` in
    /// this cycle, where it fits: replicas of a service then wait for one
    /// change, not for a change and then an instance created at their
    /// start.
    fn extend_change(&mut self, c: &mut Cycle<'_>, j: &Job, r: &Request) -> bool {
        for x in 0..c.d.reconfigs.len() {
            let rc = &c.d.reconfigs[x];
            if rc.for_job != j.id() || !rc.mig || rc.add {
                continue;
            }
            let Some(n) = c.st.node_by_name(&rc.node) else {
                continue;
            };
            let Some(g) = n.gpus().get(rc.gpu) else {
                continue;
            };
            let m = g.model();
            let Some(p) = profile_for(r, m) else {
                continue;
            };
            if r.cpu_milli() > n.cpu_free() || r.mem_mib() > n.mem_free() {
                continue;
            }
            let Ok(places) = m.free_placements(&rc.layout, &p.name) else {
                continue;
            };
            let Some(last) = places.last() else {
                continue;
            };
            let mut layout = rc.layout.clone();
            layout.push(last.clone());
            let (node, gpu) = (rc.node.clone(), rc.gpu);
            if c.st.set_layout(&node, gpu, &layout).is_err() {
                continue;
            }
            c.d.reconfigs[x].layout = layout;
            c.plan_changed();
            return true;
        }
        false
    }

    /// Turns MIG off on idle MIG GPUs when `j`'s whole-GPU tasks do not
    /// fit: each task needs its GPUs on one node, so for each it picks the
    /// node where free and idle-MIG GPUs together cover it, preferring
    /// nodes with fewest MIG GPUs (MIG gathers on the others) and then the
    /// fewest conversions, and turns off just what that task lacks.
    fn mig_off_for<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
        where_: &Mask,
    ) -> bool {
        struct Cand {
            node: String,
            free: Vec<usize>,
            idle: Vec<usize>,
            mig: usize,
        }
        if !reqs.iter().any(|r| r.kind() == Kind::WholeGpus) || !self.any_idle_mig(c, where_) {
            return false; // nothing to turn whole: skip building the candidates
        }
        let mut cands: Vec<Cand> = Vec::new();
        for i in 0..c.st.len() {
            if !allows(where_, i) {
                continue;
            }
            let n = c.st.node(i);
            let mut cd = Cand {
                node: n.name().to_string(),
                free: Vec::new(),
                idle: Vec::new(),
                mig: mig_count(n),
            };
            for (k, g) in n.gpus().iter().enumerate() {
                if g.cordoned() {
                } else if !g.mig() && g.used() == 0 {
                    cd.free.push(k);
                } else if g.mig() && g.idle() && self.cooled(c, n.name(), k) {
                    cd.idle.push(k);
                }
            }
            cands.push(cd);
        }
        let mut asked = false;
        for r in reqs {
            if r.kind() != Kind::WholeGpus {
                continue;
            }
            let count = r.count().max(0) as usize;
            let short_of = |cd: &Cand| count.saturating_sub(cd.free.len());
            let mut best: Option<usize> = None;
            for (x, cd) in cands.iter().enumerate() {
                if cd.free.len() + cd.idle.len() < count {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some(b) => {
                        let b = &cands[b];
                        cd.mig < b.mig || cd.mig == b.mig && short_of(cd) < short_of(b)
                    }
                };
                if better {
                    best = Some(x);
                }
            }
            let Some(b) = best else {
                continue;
            };
            let short = short_of(&cands[b]);
            let turn: Vec<usize> = cands[b].idle[..short].to_vec();
            let node = cands[b].node.clone();
            for k in turn {
                let rc = Reconfig {
                    node: node.clone(),
                    gpu: k,
                    mig: false,
                    layout: Layout::new(),
                    add: false,
                    for_job: j.id().to_string(),
                };
                if self.apply(c, Some(j), rc, false) {
                    asked = true;
                }
            }
            // The task takes these GPUs; the next task looks at what is
            // left.
            let cd = &mut cands[b];
            cd.idle.drain(..short);
            let taken = count.min(cd.free.len());
            cd.free.drain(..taken);
        }
        asked
    }

    /// Whether some node `where_` allows has a MIG GPU that `mig_off_for`
    /// could turn whole. The nodes with such a GPU are listed once per
    /// change of the plan: every job that misses asks.
    fn any_idle_mig(&self, c: &mut Cycle<'_>, where_: &Mask) -> bool {
        if c.idle_mig.is_none() {
            let mut nodes = Vec::new();
            for i in 0..c.st.len() {
                let n = c.st.node(i);
                let any = n.gpus().iter().enumerate().any(|(k, g)| {
                    g.mig() && !g.cordoned() && g.idle() && self.cooled(c, n.name(), k)
                });
                if any {
                    nodes.push(i);
                }
            }
            c.idle_mig = Some(nodes);
        }
        c.idle_mig
            .as_ref()
            .expect("computed above")
            .iter()
            .any(|&i| allows(where_, i))
    }

    /// Records a change, applies it to the plan and cordons the GPU so
    /// nothing else is placed there this cycle (an `add` only creates
    /// instances in free space and cordons nothing).
    pub(super) fn apply(
        &mut self,
        c: &mut Cycle<'_>,
        j: Option<&Job>,
        rc: Reconfig,
        turn_on: bool,
    ) -> bool {
        let res = if !rc.mig {
            c.st.set_mig(&rc.node, rc.gpu, false)
        } else if turn_on {
            c.st.set_mig(&rc.node, rc.gpu, true)
                .and_then(|()| c.st.set_layout(&rc.node, rc.gpu, &rc.layout))
        } else {
            c.st.set_layout(&rc.node, rc.gpu, &rc.layout)
        };
        if res.is_err() {
            return false;
        }
        if !rc.add && c.st.cordon(&rc.node, rc.gpu, true).is_err() {
            return false;
        }
        c.plan_changed();
        let gpus = c.st.node_by_name(&rc.node).map_or(0, |n| n.gpus().len());
        let per_gpu = self
            .last_change
            .entry(rc.node.clone())
            .or_insert_with(|| vec![None; gpus]);
        if per_gpu.len() <= rc.gpu {
            per_gpu.resize(rc.gpu + 1, None);
        }
        per_gpu[rc.gpu] = Some(c.now);
        if let Some(j) = j {
            let node: Arc<str> = Arc::from(rc.node.as_str());
            let now = c.now;
            if let Some(m) = self.memory_mut(j) {
                m.awaiting.push(AskedChange {
                    node,
                    gpu: rc.gpu,
                    at: now,
                });
            }
        }
        c.d.reconfigs.push(rc);
        true
    }

    /// Removes, in a trial state, the free instances of MIG GPUs that a
    /// change may re-partition (not cordoned, last changed at least `cool`
    /// ago), on `node` or everywhere, and returns those GPUs (by node
    /// position and index). Two searches ask: moves (a replica to move
    /// finds no room where the free space is cut into smaller instances),
    /// and a MIG task's victim search (a victim's instance stays behind as
    /// a free instance of its own profile, which `mig_for` replaces once
    /// the victims are gone).
    pub(super) fn drop_free(
        &self,
        c: &Cycle<'_>,
        st: &mut State,
        node: Option<&str>,
        cool: Nanos,
    ) -> Vec<(usize, usize)> {
        let range = match node {
            Some(name) => match st.lookup(name) {
                Some(i) => i..i + 1,
                None => return Vec::new(),
            },
            None => 0..st.len(),
        };
        let mut out = Vec::new();
        let mut change: Vec<(usize, Layout)> = Vec::new();
        for i in range {
            let n: &Node = st.node(i);
            change.clear();
            for (k, g) in n.gpus().iter().enumerate() {
                if !g.mig() || g.cordoned() || !self.cooled_for(c, n.name(), k, cool) {
                    continue;
                }
                if !has_free_instance(g) {
                    continue;
                }
                change.push((k, used_layout(g)));
            }
            if change.is_empty() {
                continue;
            }
            let name = n.name().to_string();
            for (k, l) in change.drain(..) {
                if st.set_layout(&name, k, &l).is_ok() {
                    out.push((i, k));
                }
            }
        }
        out
    }

    /// Whether nodes are kept for `j`: its settled promise or its
    /// reservation.
    pub(super) fn holds_nodes(&self, j: &Job) -> bool {
        self.promised_nodes.contains_key(j.id())
            || self
                .reservation
                .as_ref()
                .is_some_and(|r| same_id(&r.job, j.id()))
    }
}

/// Whether two job IDs are equal, their last bytes compared first: asked
/// of every job in a backlog while a gang holds a reservation, and IDs of
/// one length mostly differ at the end.
fn same_id(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

#[cfg(test)]
impl Scheduler {
    /// Sets when GPU `k` of `node` was last re-partitioned (tests).
    pub(super) fn set_last_change(&mut self, node: &str, k: usize, at: Nanos) {
        let per_gpu = self.last_change.entry(node.to_string()).or_default();
        if per_gpu.len() <= k {
            per_gpu.resize(k + 1, None);
        }
        per_gpu[k] = Some(at);
    }
}

#[cfg(test)]
impl Scheduler {
    /// Backs the job with that ID off MIG changes until `until` (tests).
    pub(super) fn set_backoff(&mut self, id: &str, until: Nanos) {
        let s = self.table.slot_for_id(id);
        self.table.entries[s].memory.backoff = until;
    }
}
