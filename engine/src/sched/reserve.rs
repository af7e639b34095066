//! Gang reservation and backfill. A gang that has waited `reserve_after`
//! holds the nodes it will use: nothing new starts there, except jobs
//! declared to end before the gang can start (backfill), so as the running
//! work ends the nodes drain and the gang starts. Its wait is bounded by
//! the longest remaining run on those nodes; small jobs keep flowing
//! everywhere else. Nodes promised to a preemptor are closed the same way
//! (`widest`), and a gang tries one leaf switch at a time (`candidates`).

use std::collections::{BTreeMap, BTreeSet};

use super::Scheduler;
use super::snapshot::Cycle;
use super::types::{Job, Nanos, Phase};
use crate::cluster::State;
use crate::placement::Request;

/// The gang holding nodes.
#[derive(Debug, Clone)]
pub(super) struct Reservation {
    pub job: String,
    pub nodes: BTreeSet<String>,
    /// When the reserved nodes are expected free: the latest declared end
    /// of the work on them; 0 when some work has no estimate, and then
    /// nothing backfills.
    pub ready_at: Nanos,
    /// `ready_at` is from an earlier cycle; `backfills` recomputes it when
    /// first asked (a light cycle rarely needs it).
    pub stale: bool,
}

/// Which nodes a placement may use, by position: `None` for every node.
pub(super) type Mask = Option<Vec<bool>>;

/// Whether `mask` allows node `i`.
pub(super) fn allows(mask: &Mask, i: usize) -> bool {
    mask.as_ref().is_none_or(|m| m[i])
}

impl Scheduler {
    /// Drops a reservation whose gang started or left and marks when its
    /// nodes will be free for recomputing.
    pub(super) fn refresh_reservation(&mut self, c: &Cycle<'_>) {
        let Some(r) = &mut self.reservation else {
            return;
        };
        let gone = self
            .table
            .slot_of_id(&r.job)
            .and_then(|s| c.job_at(s))
            .is_none_or(|j| j.phase != Phase::Pending);
        if gone {
            self.reservation = None;
            return;
        }
        r.stale = true;
    }

    /// The latest declared end of the running work on `nodes`, or 0 when
    /// some of it has no estimate (from what the snapshot gathered per
    /// node while it read every job).
    pub(super) fn ready_at(c: &Cycle<'_>, nodes: &BTreeSet<String>) -> Nanos {
        let mut ready = 0;
        for name in nodes {
            let Some(i) = c.cluster.lookup(name) else {
                continue;
            };
            if c.end_unknown[i] {
                return 0;
            }
            ready = ready.max(c.ends_by[i]);
        }
        ready.max(c.now)
    }

    /// Whether `j` ends, by its estimate, before the reserved gang can
    /// start, so that it may run on the reserved nodes meanwhile.
    pub(super) fn backfills(&mut self, c: &Cycle<'_>, j: &Job) -> bool {
        let Some(r) = &mut self.reservation else {
            return false;
        };
        if j.estimate <= 0 {
            return false;
        }
        if r.stale {
            r.ready_at = Scheduler::ready_at(c, &r.nodes);
            r.stale = false;
        }
        r.ready_at > 0 && c.now + j.estimate <= r.ready_at
    }

    /// The node sets to try for `j`, best first: for a gang spread over
    /// several nodes, one leaf switch at a time (most free GPUs first),
    /// then anywhere; always outside another gang's reservation unless `j`
    /// ends before that gang can start. Every set but the last is the last
    /// narrowed to a leaf.
    pub(super) fn candidates<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        j: &'a Job,
        reqs: usize,
    ) -> Vec<Mask> {
        let widest = self.widest(c, j);
        narrowed(c, reqs, widest)
    }

    /// The last and widest of `j`'s candidates: the nodes not held for
    /// another job. Nodes held for another job (a gang's reservation, a
    /// preemptor's promise) are closed to jobs of its class or lower; a
    /// higher class goes first anyway.
    pub(super) fn widest<'a>(&mut self, c: &mut Cycle<'a>, j: &'a Job) -> Mask {
        let mut held: Vec<BTreeSet<String>> = Vec::new();
        if let Some(r) = self.reservation.clone()
            && r.job != j.id()
            && self.outranks_reserved(c, &r.job, j)
            && !self.backfills(c, j)
        {
            held.push(r.nodes);
        }
        let promised: Vec<(String, BTreeSet<String>)> = self
            .promised_nodes
            .iter()
            .filter(|(other, _)| other.as_str() != j.id())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (other, nodes) in promised {
            if self.outranks(c, &other, j) {
                held.push(nodes);
            }
        }
        if held.is_empty() {
            return None;
        }
        let mut open = vec![true; c.cluster.len()];
        for nodes in &held {
            for name in nodes {
                if let Some(i) = c.cluster.lookup(name) {
                    open[i] = false;
                }
            }
        }
        Some(open)
    }

    /// Picks the nodes the gang will use: those with the most GPUs free or
    /// held by work that ends soonest, until they cover its tasks.
    pub(super) fn reserve(&mut self, c: &Cycle<'_>, j: &Job, reqs: &[&Request]) {
        let mut ends: BTreeMap<&str, Nanos> = BTreeMap::new();
        for &v in c.jobs {
            if v.phase == Phase::Pending {
                continue;
            }
            for a in v.placed.iter().flatten() {
                let end = if v.estimate == 0 {
                    1 << 62
                } else {
                    v.started + v.estimate
                };
                let e = ends.entry(a.node.as_str()).or_insert(0);
                *e = (*e).max(end);
            }
        }
        struct Cand<'n> {
            node: &'n str,
            gpus: i64,
            ready: Nanos,
        }
        let mut cands: Vec<Cand<'_>> = Vec::new();
        for n in c.st.nodes() {
            if n.gpus().is_empty() {
                continue;
            }
            cands.push(Cand {
                node: n.name(),
                gpus: n.gpus().len() as i64,
                ready: ends.get(n.name()).copied().unwrap_or(0),
            });
        }
        cands.sort_by_key(|cd| cd.ready); // stable, as Go's SliceStable
        let mut need: i64 = reqs.iter().map(|r| i64::from(r.count().max(1))).sum();
        let mut nodes = BTreeSet::new();
        for cd in &cands {
            if need <= 0 {
                break;
            }
            nodes.insert(cd.node.to_string());
            need -= cd.gpus;
        }
        let ready_at = Scheduler::ready_at(c, &nodes);
        self.reservation = Some(Reservation {
            job: j.id().to_string(),
            nodes,
            ready_at,
            stale: false,
        });
    }

    /// Whether the room promised to the job with ID `holder` (its victims'
    /// GPUs) is closed to `j`. Guarantees come first: a claim within its
    /// team's guarantee beats a borrower whatever the classes, both ways;
    /// otherwise the holder must be of `j`'s class or higher. Within one
    /// team only the class counts: a team's own small claim let into the
    /// room its gang has just freed is evicted by that gang again.
    pub(super) fn outranks<'a>(&mut self, c: &mut Cycle<'a>, holder: &str, j: &'a Job) -> bool {
        self.outranks_as(c, holder, j, true)
    }

    /// `outranks` for the nodes of a gang's reservation, where guarantees
    /// come first within a team too: a reservation drains for hours, and
    /// the team's claims within its guarantee keep what it is owed
    /// meanwhile.
    pub(super) fn outranks_reserved<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        holder: &str,
        j: &'a Job,
    ) -> bool {
        self.outranks_as(c, holder, j, false)
    }

    fn outranks_as<'a>(
        &mut self,
        c: &mut Cycle<'a>,
        holder: &str,
        j: &'a Job,
        same_team_by_class: bool,
    ) -> bool {
        let Some(h) = self.job(c, holder).filter(|h| h.phase == Phase::Pending) else {
            return false; // the holder has gone: nothing is held for it
        };
        if self.cfg.borrow && (h.spec.team != j.spec.team || !same_team_by_class) {
            let hw = self.within_guarantee(c, h);
            let jw = self.within_guarantee(c, j);
            if jw && !hw {
                return false;
            }
            if hw && !jw {
                return true;
            }
        }
        !self.cfg.class_order || h.spec.class >= j.spec.class
    }
}

/// `candidates` given the widest set.
pub(super) fn narrowed(c: &mut Cycle<'_>, reqs: usize, outside: Mask) -> Vec<Mask> {
    let mut out = Vec::new();
    if reqs > 1 {
        let (n_leaves, rank) = leaves(c);
        for leaf in 0..*n_leaves {
            let mask = rank
                .iter()
                .enumerate()
                .map(|(i, &r)| r == leaf && allows(&outside, i))
                .collect();
            out.push(Some(mask));
        }
    }
    out.push(outside);
    out
}

/// The leaf switches of the plan, most free GPU first, as their number and
/// each node's rank among them, computed once per change of the plan:
/// every gang considered asks for it. (Compared by name for each node and
/// leaf, the masks were a tenth of a week-1000 run.)
pub(super) fn leaves<'c>(c: &'c mut Cycle<'_>) -> &'c (usize, Vec<usize>) {
    if c.leaves.is_none() {
        let order = leaves_by_free(&c.st);
        let rank =
            c.st.nodes()
                .map(|n| {
                    let leaf = n.topology().leaf.as_str();
                    order.iter().position(|l| l == leaf).unwrap_or(usize::MAX)
                })
                .collect();
        c.leaves = Some((order.len(), rank));
    }
    c.leaves.as_ref().expect("computed above")
}

/// The leaf switches, most free GPU first (ties by name); none when there
/// are fewer than two.
pub(super) fn leaves_by_free(st: &State) -> Vec<String> {
    let mut free: BTreeMap<&str, i64> = BTreeMap::new();
    for n in st.nodes() {
        let leaf = n.topology().leaf.as_str();
        if !leaf.is_empty() {
            *free.entry(leaf).or_insert(0) += i64::from(n.gpu_free_milli());
        }
    }
    if free.len() < 2 {
        return Vec::new();
    }
    let mut leaves: Vec<(&str, i64)> = free.into_iter().collect();
    leaves.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    leaves.into_iter().map(|(l, _)| l.to_string()).collect()
}
