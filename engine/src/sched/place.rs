//! Placing a job on the plan: its prepared requests, its shape (what the
//! memo of failed shapes keys on), its validation, and the attempt itself,
//! all of a gang at once or nothing (one leaf switch at a time, outside
//! nodes held for others), or task by task without gangs.

use std::fmt::Write;

use super::Scheduler;
use super::quota::{demand, task_milli};
use super::reserve::{Mask, allows, narrowed};
use super::snapshot::{Cycle, first_task};
use super::table::{ReqEntry, Shape, TaskSet};
use super::types::{Job, Start, WaitReason};
use crate::cluster::{Assignment, State};
use crate::placement::Request;
use crate::workload::{Class, Kind, Task, WorkloadError};

/// The table of memo and search keys starts over past this many (a server
/// that has seen that many shapes), after which jobs cached before and
/// after share no memo.
const MAX_KEYS: usize = 1 << 16;

/// The indexes of `j`'s tasks not started yet, in the order `requests`
/// returns their requests.
pub(super) fn pending_tasks(j: &Job) -> Vec<usize> {
    (0..j.spec.tasks.len())
        .filter(|&i| !j.placed.get(i).is_some_and(Option::is_some))
        .collect()
}

/// `j`'s pending tasks as a `TaskSet`; none for jobs of more than 64
/// tasks (or none), which are not cached.
fn pending_set(j: &Job) -> Option<TaskSet> {
    let n = j.spec.tasks.len();
    if n == 0 || n > 64 {
        return None;
    }
    let mut mask = 0u64;
    for i in 0..n {
        if !j.placed.get(i).is_some_and(Option::is_some) {
            mask |= 1 << i;
        }
    }
    Some(TaskSet {
        tasks: first_task(j).expect("a job with tasks"),
        n,
        mask,
    })
}

/// Whether `a` uses a MIG instance missing from `st`.
pub(super) fn creates_instance(st: &State, a: &Assignment) -> bool {
    let n = st.node_by_name(&a.node);
    for g in &a.grants {
        let (Some(slice), Some(n)) = (&g.slice, n) else {
            continue;
        };
        let Some(gpu) = usize::try_from(g.gpu).ok().and_then(|k| n.gpus().get(k)) else {
            return true;
        };
        if !gpu.slices().iter().any(|sl| sl.placement() == slice) {
            return true;
        }
    }
    false
}

/// The fewest GPUs any of `reqs` asks for when all ask for whole GPUs,
/// else 0.
pub(super) fn least_whole_gpus(reqs: &[&Request]) -> i32 {
    let mut least = 0;
    for r in reqs {
        if r.kind() != Kind::WholeGpus || r.count() < 1 {
            return 0;
        }
        if least == 0 || r.count() < least {
            least = r.count();
        }
    }
    least
}

/// False when requests for whole GPUs cannot all fit for want of free
/// GPUs on the nodes `allowed` says yes to, whatever else: a check far
/// cheaper than placing them. True for other kinds of requests.
pub(super) fn enough_whole_gpus_in(st: &State, reqs: &[&Request], allowed: &Mask) -> bool {
    let least = least_whole_gpus(reqs);
    if least == 0 {
        return true;
    }
    let mut slots = 0;
    for i in 0..st.len() {
        if slots >= reqs.len() {
            break;
        }
        if allows(allowed, i) {
            slots += (st.node(i).fully_free_gpus() / least) as usize;
        }
    }
    slots >= reqs.len()
}

/// The shape key of `j`: jobs that ask for the same thing, so that one
/// that did not fit spares the others the search. Runs of equal tasks
/// are written once with their count.
fn shape_key(j: &Job) -> String {
    let mut b = String::with_capacity(64);
    let mut last: Option<(&Task, String)> = None;
    let mut run = 0;
    let flush = |b: &mut String, last: &Option<(&Task, String)>, run: i64| {
        if let Some((t, g)) = last
            && run > 0
        {
            let _ = write!(b, "{run}*{g}/{}/{};", t.cpu_milli, t.memory_mib);
        }
    };
    for (i, t) in j.spec.tasks.iter().enumerate() {
        if j.placed.get(i).is_some_and(Option::is_some) {
            continue;
        }
        let g = t.gpu.to_string();
        if let Some((l, lg)) = &last
            && *lg == g
            && t.cpu_milli == l.cpu_milli
            && t.memory_mib == l.memory_mib
        {
            run += 1;
            continue;
        }
        flush(&mut b, &last, run);
        last = Some((t, g));
        run = 1;
    }
    flush(&mut b, &last, run);
    b
}

impl Scheduler {
    /// `j`'s demand and key numbers, cached on its entry. The last job
    /// asked for is remembered for the cycle (by its address and task
    /// list): considering one job asks for its shape many times.
    pub(super) fn shape(&mut self, j: &Job) -> Shape {
        let addr = std::ptr::from_ref(j) as usize;
        let first = first_task(j);
        let (last, last_first, cycle, sh) = self.last_shape;
        if last == addr && last_first == first && cycle == self.cycles {
            return sh;
        }
        let sh = self.shape_of(j, first);
        self.last_shape = (addr, first, self.cycles, sh);
        sh
    }

    /// `shape` without the memory of the last job.
    fn shape_of(&mut self, j: &Job, first: Option<usize>) -> Shape {
        let slot = self.table.slot(j);
        if let Some(s) = slot
            && let Some((f, sh)) = self.table.entries[s].held.shape
            && Some(f) == first
        {
            return sh;
        }
        let demand = self.granted_demand(j);
        let prefix = format!("{}|{}|{}|", shape_key(j), j.spec.class, j.spec.team);
        let ids = [
            self.key_id(format!("{prefix}false")),
            self.key_id(format!("{prefix}true")),
            self.key_id(format!("{prefix}lapsed")),
        ];
        let sh = Shape { demand, ids };
        if let (Some(s), Some(f)) = (slot, first) {
            self.table.entries[s].held.shape = Some((f, sh));
        }
        sh
    }

    /// `demand(j)` as the placement will grant it: naive and gang-drf
    /// place a memory profile or a GPU fraction on a whole GPU
    /// (k8s-default's rewrite), and their quotas must count that whole GPU,
    /// not the profile's share. For partita the requests are the tasks'
    /// own, and it is `demand(j)`.
    fn granted_demand(&mut self, j: &Job) -> i64 {
        if !self.placer.rewrites() {
            return demand(j);
        }
        let Ok(reqs) = self.requests(j) else {
            return demand(j); // an invalid job: consider says why
        };
        let total = reqs.iter().map(|r| task_milli(r.task())).sum();
        self.give_back(j, reqs);
        total
    }

    /// The number of a memo or search key, numbering it if new.
    fn key_id(&mut self, key: String) -> u32 {
        if let Some(&id) = self.key_ids.get(&key) {
            return id;
        }
        if self.key_ids.len() >= MAX_KEYS {
            self.key_ids.clear();
        }
        self.next_key += 1;
        self.key_ids.insert(key, self.next_key);
        self.next_key
    }

    /// Why `j` can never run on the cluster, if so. A job is validated
    /// once (again if rebuilt with other tasks, or placed anew).
    pub(super) fn invalid(&mut self, c: &Cycle<'_>, j: &Job) -> Option<WaitReason> {
        let slot = self.table.slot(j);
        let first = first_task(j);
        if let Some(s) = slot
            && let Some((f, why)) = &self.table.entries[s].held.checked
            && *f == first
        {
            return why.clone();
        }
        let cap = self.capacity_of(c.cluster);
        let why = j.spec.validate(Some(cap)).err().map(WaitReason::invalid);
        if let Some(s) = slot {
            self.table.entries[s].held.checked = Some((first, why.clone()));
        }
        why
    }

    /// The requests of `j`'s pending tasks, taken out of the cache (built
    /// when missing); `give_back` returns them. A backlog asks for the
    /// same requests every cycle.
    pub(super) fn requests(&mut self, j: &Job) -> Result<Vec<Request>, WorkloadError> {
        let set = pending_set(j);
        let slot = self.table.id_slot(j);
        if let (Some(set), Some(s)) = (set, slot) {
            let m = &mut self.table.entries[s].memory;
            if m.reqs.as_ref().is_some_and(|e| e.set == set) {
                return Ok(m.reqs.take().expect("checked above").reqs);
            }
        }
        let mut reqs = Vec::new();
        for (i, t) in j.spec.tasks.iter().enumerate() {
            if j.placed.get(i).is_some_and(Option::is_some) {
                continue;
            }
            reqs.push(self.placer.request(t.clone())?);
        }
        Ok(reqs)
    }

    /// Returns requests `requests` gave for `j` to the cache.
    pub(super) fn give_back(&mut self, j: &Job, reqs: Vec<Request>) {
        let (Some(set), Some(s)) = (pending_set(j), self.table.id_slot(j)) else {
            return;
        };
        self.table.entries[s].memory.reqs = Some(ReqEntry { set, reqs });
    }

    /// Places tasks `idx` of `j` (their requests `reqs`) on the plan, all
    /// of them or none.
    pub(super) fn try_start<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        idx: &[usize],
        reqs: &[&Request],
    ) -> bool {
        let widest = self.widest(c, j);
        // Every candidate narrows the widest: when the first task fits
        // nowhere there, each placement would fail on it. (A backlog's
        // gangs failed a placement per leaf switch, every cycle.)
        if reqs.len() > 1
            && !self
                .placer
                .fits_somewhere_at(&c.st, reqs[0], |i| allows(&widest, i))
        {
            return false;
        }
        let mut cands = narrowed(c, reqs.len(), widest.clone());
        if let Some(pinned) = self.pinned_slice_nodes(c, j, reqs) {
            let mask = (0..c.cluster.len())
                .map(|i| pinned[i] && allows(&widest, i))
                .collect();
            cands.insert(0, Some(mask));
        }
        for allowed in &cands {
            if reqs.len() > 1 && !enough_whole_gpus_in(&c.st, reqs, allowed) {
                continue; // would fail for want of free GPUs, after a clone
            }
            let Ok((as_, trial)) = self
                .placer
                .place_all_at(&c.st, reqs, |i| allows(allowed, i))
            else {
                continue;
            };
            if self.change_under_way(c, j.id()) && as_.iter().any(|a| creates_instance(&c.st, a)) {
                // A change made for j is still being applied: its
                // instances are ready no later than one created now, and
                // made for it. (Started elsewhere on a new instance, a
                // replica waited as long and the change was wasted.)
                return false;
            }
            self.commit(c, j, idx, as_, trial);
            return true;
        }
        false
    }

    /// For a MIG task that cannot be moved (a notebook, anything but a
    /// production replica), the nodes that hold such tasks already, tried
    /// before the others; none for other jobs. A claim for a whole node
    /// moves services off it but not these: spread one or two to a node,
    /// notebooks kept every node from being freed for 8-GPU fine-tunes.
    fn pinned_slice_nodes(
        &self,
        c: &mut Cycle<'_>,
        j: &Job,
        reqs: &[&Request],
    ) -> Option<Vec<bool>> {
        if !self.cfg.group_pinned
            || !self.cfg.migrate
            || j.spec.class == Class::Production
            || reqs.len() != 1
        {
            return None;
        }
        let k = reqs[0].kind();
        if k != Kind::MigProfile && (k != Kind::MemoryProfile || !self.cfg.mig) {
            return None;
        }
        self.pinned_nodes(c)
    }

    /// The nodes where running work other than production holds MIG
    /// instances, by position, computed once a cycle when first asked;
    /// none when there is no such node.
    fn pinned_nodes(&self, c: &mut Cycle<'_>) -> Option<Vec<bool>> {
        if c.pinned.is_none() {
            let mut pinned = vec![false; c.cluster.len()];
            let mut any = false;
            for &j in c.jobs {
                let Some(s) = self.table.slot(j) else {
                    continue;
                };
                let e = &self.table.entries[s].held;
                if j.phase != super::types::Phase::Pending
                    && j.spec.class != Class::Production
                    && e.milli > 0
                    && e.slices
                {
                    for &i in &e.nodes {
                        pinned[i] = true;
                        any = true;
                    }
                }
            }
            c.pinned = Some(if any { pinned } else { Vec::new() });
        }
        c.pinned.as_ref().filter(|p| !p.is_empty()).cloned()
    }

    /// Adopts a placement: the trial state becomes the plan and the tasks
    /// become starts.
    pub(super) fn commit<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        idx: &[usize],
        as_: Vec<Assignment>,
        trial: State,
    ) {
        let before = std::mem::replace(&mut c.st, trial);
        c.plan_changed();
        for (a, &i) in as_.into_iter().zip(idx) {
            let creates = creates_instance(&before, &a);
            if let Some(n) = c.st.node_by_name(&a.node) {
                let milli = i64::from(a.gpu_milli(n));
                self.add_usage(c, j, milli);
            }
            c.d.starts.push(Start {
                job: j.id().to_string(),
                task: i,
                assignment: a,
                creates,
            });
        }
        self.started(c, j);
    }

    /// Forgets what was kept for `j` while it waited: it started.
    fn started(&mut self, c: &mut Cycle<'_>, j: &Job) {
        if self.reservation.as_ref().is_some_and(|r| r.job == j.id()) {
            self.reservation = None;
        }
        self.promised_nodes.remove(j.id());
        c.in_flight = None;
        c.holdings += 1;
        self.moving.remove(j.id());
        if let Some(s) = self.table.id_slot(j) {
            let m = &mut self.table.entries[s].memory;
            m.attempts = 0;
            m.backoff = 0;
            m.move_backoff = 0;
            m.search_backoff = 0;
            m.owed_since = None;
            m.rounds = 0;
            m.rounds_until = 0;
        }
        if self
            .quota_hold
            .get(&j.spec.team)
            .is_some_and(|h| h == j.id())
        {
            self.quota_hold.remove(&j.spec.team);
        }
    }

    /// The naive path: each task takes what it finds and holds it while
    /// the others wait.
    pub(super) fn place_one_by_one<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: &[&Request],
    ) -> Option<WaitReason> {
        let mut placed_any = false;
        let mut k = 0;
        for i in 0..j.spec.tasks.len() {
            if j.placed.get(i).is_some_and(Option::is_some) {
                continue;
            }
            let r = reqs[k];
            k += 1;
            let Ok(a) = self.placer.place_at(&c.st, r, |_| true) else {
                continue;
            };
            if c.st.allocate(&a).is_err() {
                continue;
            }
            placed_any = true;
            c.plan_changed();
            if let Some(n) = c.st.node_by_name(&a.node) {
                let milli = i64::from(a.gpu_milli(n));
                self.add_usage(c, j, milli);
            }
            c.d.starts.push(Start {
                job: j.id().to_string(),
                task: i,
                assignment: a,
                creates: false,
            });
        }
        let started = c.d.starts.iter().filter(|s| s.job == j.id()).count();
        if started == reqs.len() {
            return None;
        }
        if placed_any || reqs.len() < j.spec.tasks.len() {
            return Some(WaitReason::Gang);
        }
        Some(WaitReason::NoRoom)
    }
}
