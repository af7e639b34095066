use std::borrow::Borrow;
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::Arc;

use thiserror::Error;

use crate::cluster::{Assignment, ClusterError, Node, NodeSet, State};
use crate::gpu::DEFAULT_HEADROOM;
use crate::gpu::Placement;
use crate::random::Rand;
use crate::workload::{Task, WorkloadError};

use super::fit::fits;
use super::request::RequestKey;
use super::{Adjuster, Code, DefaultPicker, Hint, Picker, Policy, Reason, Request};

/// Bounds the cache: past this many request classes it starts over, which
/// costs speed, never correctness.
pub(super) const MAX_CLASSES: usize = 512;

/// Runs the pipeline of one policy.
///
/// It keeps a cache of per-node verdicts (filters and score) per request
/// class, each stamped with the generation of the node it was computed on,
/// so a placement costs one comparison per unchanged node and a full
/// evaluation only of the nodes that changed since the same kind of request
/// was last placed (none at all when the State is the very one that class
/// last saw). The cache never changes a result: a verdict is reused only
/// for the very node state it was computed on (same node set, same
/// generation), and a `volatile` policy gets no reuse.
pub struct Placer {
    policy: Policy,
    rng: Rand,
    headroom: f64,
    mig_only: bool,
    brief: bool,
    /// Request class -> row of `rows`. Only looked up, never iterated.
    classes: FxHashMap<RequestKey, usize>,
    rows: Vec<Row>,
    /// Every node's tie-break rank, read once per node set: a rank is
    /// fixed before its node joins a State, so the nodes of one set keep
    /// theirs, and ties (frequent: empty nodes score alike) then cost no
    /// visit to a node.
    ranks: Ranks,
    /// Reused for the feasible nodes handed to a `Selector`.
    candidates: Vec<usize>,
    /// Reused for the nodes a class's row must judge again.
    changed: Vec<usize>,
}

/// The ranks of the nodes of one node set, by position.
#[derive(Default)]
struct Ranks {
    set: Option<Arc<NodeSet>>,
    of: Vec<i64>,
}

/// The cached verdicts of one request class, one entry per node position
/// in each vector, and the node set their generations number. The parts
/// of a verdict are kept apart so that the pass over every node that each
/// placement makes (generations, then ok and score) reads dense arrays.
#[derive(Default)]
struct Row {
    set: Option<Arc<NodeSet>>,
    /// The version of the State every verdict of the row was last brought
    /// up to date for (0: none): a placement on the very same State (a
    /// failed one leaves it as it was) need not look at the nodes at all.
    version: u64,
    /// The node generation the verdict was computed on; 0 (which no node
    /// has) when there is none yet.
    generations: Vec<u64>,
    /// Whether the node passed every filter.
    ok: Vec<bool>,
    /// Whether the node has a hint: its GPU in `hint_gpus`, and its MIG
    /// instance in `hint_slices` where `sliced` says. Most hints name a GPU
    /// alone, and keeping the GPUs apart in a dense array spares a
    /// re-scored node a read of the wide slot it replaces (which a pass
    /// over the nodes of a class last seen long ago finds cold: half the
    /// time of a cheap policy's placement went to that read).
    hinted: Vec<bool>,
    hint_gpus: Vec<usize>,
    sliced: Vec<bool>,
    scores: Vec<i64>,
    /// Why the node is out; written only when it is.
    reasons: Vec<Option<Reason>>,
    /// Read and written only where `sliced` says, before or after.
    hint_slices: Vec<Option<Placement>>,
}

impl Row {
    /// Empties the row and sizes it for `nodes` nodes.
    fn reset(&mut self, nodes: usize) {
        self.version = 0;
        self.generations.clear();
        self.generations.resize(nodes, 0);
        self.ok.clear();
        self.ok.resize(nodes, false);
        self.hinted.clear();
        self.hinted.resize(nodes, false);
        self.hint_gpus.clear();
        self.hint_gpus.resize(nodes, 0);
        self.sliced.clear();
        self.sliced.resize(nodes, false);
        self.scores.clear();
        self.scores.resize(nodes, 0);
        self.reasons.clear();
        self.reasons.resize(nodes, None);
        self.hint_slices.clear();
        self.hint_slices.resize(nodes, None);
    }

    fn len(&self) -> usize {
        self.generations.len()
    }

    fn hint(&self, i: usize) -> Option<Hint> {
        if !self.hinted[i] {
            return None;
        }
        let slice = if self.sliced[i] {
            self.hint_slices[i].clone()
        } else {
            None
        };
        Some(Hint {
            gpu: self.hint_gpus[i],
            slice,
        })
    }

    fn set_hint(&mut self, i: usize, hint: Option<Hint>) {
        self.hinted[i] = hint.is_some();
        let (gpu, slice) = hint.map_or((0, None), |h| (h.gpu, h.slice));
        self.hint_gpus[i] = gpu;
        if self.sliced[i] || slice.is_some() {
            self.sliced[i] = slice.is_some();
            self.hint_slices[i] = slice;
        }
    }
}

/// Why a task could not be placed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlaceError {
    /// The task itself is invalid (`Task::validate`).
    #[error(transparent)]
    Invalid(#[from] WorkloadError),
    /// No node fits, from a placer with brief failures.
    #[error("no node fits the task")]
    NoFit,
    /// No node fits, with the count of each reason.
    #[error(transparent)]
    Failure(#[from] Failure),
    /// A node passed the filters but the picker found no device on it: a
    /// bug in a policy.
    #[error(
        "task {task}: policy {policy}: node {node} passed the filters but no device could be picked"
    )]
    NoDevice {
        task: String,
        policy: String,
        node: String,
    },
    /// `place_all` could not apply a placement to its trial state.
    #[error("task {task}: {source}")]
    Allocate { task: String, source: ClusterError },
}

/// Why a task fits nowhere: how many nodes were ruled out for each reason.
/// A node that passed the filters but was not allowed counts as
/// `Code::Policy`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct Failure {
    /// The task's name.
    pub task: String,
    /// The nodes of the cluster, all ruled out.
    pub nodes: usize,
    /// How many nodes each reason ruled out; the counts add up to `nodes`.
    pub reasons: BTreeMap<Code, usize>,
}

impl Failure {
    /// The reasons in the order the text gives them: most nodes first, then
    /// by code name.
    pub fn sorted(&self) -> Vec<(Code, usize)> {
        let mut v: Vec<(Code, usize)> = self.reasons.iter().map(|(&c, &k)| (c, k)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.as_str().cmp(b.0.as_str())));
        v
    }
}

/// "task t: 0/5 nodes fit (2 cpu, 1 gpu-model, 1 no-gpu, 1 policy)".
impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}: 0/{} nodes fit (", self.task, self.nodes)?;
        for (k, (code, count)) in self.sorted().into_iter().enumerate() {
            if k > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{count} {code}")?;
        }
        f.write_str(")")
    }
}

impl Placer {
    /// A placer for `policy` (a missing picker becomes `DefaultPicker`).
    /// `rng` is its only source of randomness: the same policy, seed and
    /// inputs give the same placements.
    pub fn new(mut policy: Policy, rng: Rand) -> Placer {
        if policy.picker.is_none() {
            policy.picker = Some(Box::new(DefaultPicker));
        }
        Placer {
            policy,
            rng,
            headroom: DEFAULT_HEADROOM,
            mig_only: false,
            brief: false,
            classes: FxHashMap::default(),
            rows: Vec::new(),
            ranks: Ranks::default(),
            candidates: Vec::new(),
            changed: Vec::new(),
        }
    }

    /// The placer's policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The placer's random stream, for a caller that draws from the same
    /// stream between placements.
    pub fn rng_mut(&mut self) -> &mut Rand {
        &mut self.rng
    }

    /// Changes the GPU memory kept above a memory profile's peak, for the
    /// requests prepared from now on.
    pub fn set_headroom(&mut self, h: f64) {
        self.headroom = h;
    }

    /// Makes memory profiles take MIG instances on MIG-capable models (see
    /// `Request::mig_only`), for the requests prepared from now on.
    pub fn set_mig_only(&mut self, on: bool) {
        self.mig_only = on;
    }

    /// Makes a failed placement return `PlaceError::NoFit` instead of a
    /// `Failure` counting why each node was ruled out: a scheduling cycle
    /// that only needs to know that a job did not fit spent a third of each
    /// failed placement counting reasons.
    pub fn set_brief_failures(&mut self, on: bool) {
        self.brief = on;
    }

    /// Whether the policy rewrites requests (k8s-default places a memory
    /// profile or a fraction on a whole GPU): what a task is granted then
    /// differs from what it asks.
    pub fn rewrites(&self) -> bool {
        self.policy.rewriter.is_some()
    }

    /// Prepares a task with the placer's headroom, MIG setting and policy
    /// rewrite.
    pub fn request(&self, t: Task) -> Result<Request, WorkloadError> {
        let mut r = Request::new(t, self.headroom)?;
        r.set_mig_only(self.mig_only);
        if let Some(w) = &self.policy.rewriter {
            r = w.rewrite(r);
        }
        Ok(r)
    }

    /// Finds where a task goes on `st`, without changing `st`. The caller
    /// applies the assignment with `State::allocate`.
    pub fn place(&mut self, st: &State, t: Task) -> Result<Assignment, PlaceError> {
        let r = self.request(t)?;
        self.place_request(st, &r)
    }

    /// `place` for a prepared request.
    pub fn place_request(&mut self, st: &State, r: &Request) -> Result<Assignment, PlaceError> {
        self.place_where(st, r, |_| true)
    }

    /// `place_request` restricted to the nodes `allowed` says yes to. It
    /// asks only about nodes that passed the filters.
    pub fn place_in<F>(
        &mut self,
        st: &State,
        r: &Request,
        allowed: F,
    ) -> Result<Assignment, PlaceError>
    where
        F: Fn(&Node) -> bool,
    {
        self.place_where(st, r, |i| allowed(st.node(i)))
    }

    /// `place_in` with `allowed` asked by node position rather than by
    /// node: a caller that keeps its node sets by position (the scheduler)
    /// answers without reaching the node or hashing its name.
    pub fn place_at<A>(
        &mut self,
        st: &State,
        r: &Request,
        allowed: A,
    ) -> Result<Assignment, PlaceError>
    where
        A: Fn(usize) -> bool,
    {
        self.place_where(st, r, allowed)
    }

    /// `fits_somewhere` with `allowed` asked by node position (`place_at`).
    pub fn fits_somewhere_at<A>(&mut self, st: &State, r: &Request, allowed: A) -> bool
    where
        A: Fn(usize) -> bool,
    {
        let c = self.evaluate(st, r);
        let row = &self.rows[c];
        (0..row.len()).any(|i| row.ok[i] && allowed(i))
    }

    /// `place_all` with `allowed` asked by node position (`place_at`).
    pub fn place_all_at<R, A>(
        &mut self,
        st: &State,
        reqs: &[R],
        allowed: A,
    ) -> Result<(Vec<Assignment>, State), PlaceError>
    where
        R: Borrow<Request>,
        A: Fn(usize) -> bool,
    {
        place_each(st, reqs, |st, r| self.place_where(st, r, &allowed))
    }

    /// `place_in` with `allowed` asked by node position: `place_request`
    /// allows every node without reaching any.
    fn place_where<A>(
        &mut self,
        st: &State,
        r: &Request,
        allowed: A,
    ) -> Result<Assignment, PlaceError>
    where
        A: Fn(usize) -> bool,
    {
        let c = self.evaluate(st, r);
        let row = &self.rows[c];
        // `allowed` is applied on the fly: the cached row must keep the
        // true verdicts, and copying it per call would cost more than the
        // placement.
        let feasible = |i: usize| row.ok[i] && allowed(i);
        let best = match self.policy.selector.as_deref_mut() {
            Some(selector) => {
                self.candidates.clear();
                self.candidates
                    .extend((0..row.len()).filter(|&i| feasible(i)));
                if self.candidates.is_empty() {
                    None
                } else {
                    Some(selector.select(st, &self.candidates, &mut self.rng))
                }
            }
            None => argmax(
                st,
                r,
                row,
                &self.ranks.of,
                self.policy.adjuster.as_mut(),
                feasible,
            ),
        };
        let Some(best) = best else {
            if self.brief {
                return Err(PlaceError::NoFit);
            }
            return Err(failure(r, row, feasible).into());
        };
        let n = st.node(best);
        let hint = row.hint(best);
        let grants = match self.policy.picker.as_deref_mut() {
            Some(picker) => picker.pick(n, r, hint.as_ref(), &mut self.rng),
            None => DefaultPicker.pick(n, r, hint.as_ref(), &mut self.rng),
        };
        let Some(grants) = grants else {
            return Err(PlaceError::NoDevice {
                task: r.task().name.clone(),
                policy: self.policy.name.clone(),
                node: n.name().to_string(),
            });
        };
        Ok(Assignment {
            task: r.task().name.clone(),
            node: n.name().to_string(),
            cpu_milli: r.cpu_milli(),
            memory_mib: r.mem_mib(),
            grants,
        })
    }

    /// Whether `r` fits on some node `allowed` says yes to, that is whether
    /// `place_in` would succeed. It neither ranks nor picks: a caller about
    /// to try `r` on several subsets of those nodes learns at the cost of
    /// one pass that every try would fail.
    pub fn fits_somewhere<F>(&mut self, st: &State, r: &Request, allowed: F) -> bool
    where
        F: Fn(&Node) -> bool,
    {
        let c = self.evaluate(st, r);
        let row = &self.rows[c];
        (0..row.len()).any(|i| row.ok[i] && allowed(st.node(i)))
    }

    /// Whether `r` fits on `n`: the placer's filters pass there, so placing
    /// `r` with `n` the only node allowed would succeed. It reads `n` alone
    /// and no cache: a search that asks about one node at a time needs no
    /// pass over the cluster.
    pub fn fits(&self, n: &Node, r: &Request) -> bool {
        fits(n, r).is_ok() && self.policy.filters.iter().all(|f| f.filter(n, r).is_ok())
    }

    /// Places every request, each after the ones before it, on a clone of
    /// `st`: all of them or none. It returns the assignments and the clone
    /// with them applied, which the caller may adopt.
    pub fn place_all<R, F>(
        &mut self,
        st: &State,
        reqs: &[R],
        allowed: F,
    ) -> Result<(Vec<Assignment>, State), PlaceError>
    where
        R: Borrow<Request>,
        F: Fn(&Node) -> bool,
    {
        place_each(st, reqs, |st, r| self.place_in(st, r, &allowed))
    }

    /// Brings the verdict of every node for `r`'s class up to date (from the
    /// cache where the node has not changed) and returns the class's row.
    fn evaluate(&mut self, st: &State, r: &Request) -> usize {
        self.ranks_for(st);
        let c = self.slot(r, st);
        let row = &mut self.rows[c];
        let volatile = self.policy.volatile;
        if !volatile && row.version == st.version() {
            return c;
        }
        if volatile {
            // Nothing is reused: every node is judged again.
            for (i, n) in st.nodes().enumerate() {
                judge(&mut self.policy, n, r, row, i);
            }
            return c;
        }
        row.version = st.version();
        // The nodes that changed since the row was last brought up to
        // date, found in one pass over the dense generations, then judged.
        // Generations start at 1, so an empty verdict never matches.
        let changed = &mut self.changed;
        changed.clear();
        let cached = &mut row.generations;
        st.for_each_generation(|i, generation| {
            if cached[i] != generation {
                cached[i] = generation;
                changed.push(i);
            }
        });
        for &i in &self.changed {
            judge(&mut self.policy, st.node(i), r, row, i);
        }
        c
    }

    /// Reads the nodes' ranks if `st` is of another node set than the
    /// ranks held.
    fn ranks_for(&mut self, st: &State) {
        let same = self
            .ranks
            .set
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, st.node_set()));
        if !same || self.ranks.of.len() != st.len() {
            self.ranks.of.clear();
            self.ranks.of.extend(st.nodes().map(Node::rank));
            self.ranks.set = Some(Arc::clone(st.node_set()));
        }
    }

    /// The cache row of `r`'s class, sized for `st` and emptied if it was
    /// filled for another node set.
    fn slot(&mut self, r: &Request, st: &State) -> usize {
        let c = match self.classes.get(r.key()) {
            Some(&c) => c,
            None => {
                if self.rows.len() >= MAX_CLASSES {
                    self.classes.clear();
                    self.rows.clear();
                }
                let c = self.rows.len();
                self.classes.insert(r.key().clone(), c);
                self.rows.push(Row::default());
                c
            }
        };
        let row = &mut self.rows[c];
        let same_set = row
            .set
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, st.node_set()));
        if !same_set || row.len() != st.len() {
            row.reset(st.len());
            row.set = Some(Arc::clone(st.node_set()));
        }
        c
    }
}

impl fmt::Debug for Placer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Placer")
            .field("policy", &self.policy)
            .field("headroom", &self.headroom)
            .field("mig_only", &self.mig_only)
            .field("brief", &self.brief)
            .field("classes", &self.rows.len())
            .finish()
    }
}

/// Filters and scores node `n`, at position `i`, into `row`.
fn judge(policy: &mut Policy, n: &Node, r: &Request, row: &mut Row, i: usize) {
    let why = match fits(n, r) {
        Err(code) => Some(Reason {
            filter: "fit",
            code,
        }),
        Ok(()) => policy.filters.iter().find_map(|f| f.filter(n, r).err()),
    };
    let (score, hint) = match (why, policy.scorer.as_deref_mut()) {
        (None, Some(s)) => s.score(n, r),
        _ => (0, None),
    };
    row.ok[i] = why.is_none();
    if why.is_some() {
        row.reasons[i] = why;
    }
    row.scores[i] = score;
    if row.hinted[i] || hint.is_some() {
        row.set_hint(i, hint);
    }
}

/// The feasible node with the best (adjusted) score, ties to the lower
/// rank, then to the earlier node.
fn argmax(
    st: &State,
    r: &Request,
    row: &Row,
    ranks: &[i64],
    adjuster: Option<&mut Box<dyn Adjuster>>,
    feasible: impl Fn(usize) -> bool,
) -> Option<usize> {
    let Some(a) = adjuster else {
        return best_unadjusted(row, ranks, feasible);
    };
    a.prepare(st, r);
    let mut adjuster = Some(a);
    let mut best: Option<(usize, i64)> = None;
    for i in 0..row.len() {
        if !feasible(i) {
            continue;
        }
        let mut score = row.scores[i];
        if let Some(a) = adjuster.as_mut() {
            score = a.adjust(i, st.node(i), r, score, row.hint(i).as_ref());
        }
        let better = match best {
            None => true,
            Some((b, best_score)) => {
                score > best_score || (score == best_score && ranks[i] < ranks[b])
            }
        };
        if better {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}

/// `argmax` without an adjuster: the same choice, in one pass over the
/// row's dense arrays that keeps the best node's score and rank at hand
/// (this pass is a fifth of a cheap policy's placement).
fn best_unadjusted(row: &Row, ranks: &[i64], feasible: impl Fn(usize) -> bool) -> Option<usize> {
    // The comparisons are combined with `&` and `|`, not `&&` and `||`,
    // so that they compile to flags and conditional moves: which node
    // wins a tie is as good as random, and a branch on it was mispredicted
    // half the time.
    let (mut found, mut best) = (false, 0);
    let (mut best_score, mut best_rank) = (0, 0);
    let nodes = row.ok.iter().zip(&row.scores).zip(ranks).enumerate();
    for (i, ((&ok, &score), &rank)) in nodes {
        let beats = !found | (score > best_score) | ((score == best_score) & (rank < best_rank));
        if ok & beats && feasible(i) {
            found = true;
            best = i;
            best_score = score;
            best_rank = rank;
        }
    }
    found.then_some(best)
}

/// Counts the reasons nodes were ruled out; a node that passed the filters
/// but is not allowed counts as ruled out by policy. (Counted in a short
/// list first: a map update per node was a third of a failed placement's
/// cost in the Go build.)
fn failure(r: &Request, row: &Row, feasible: impl Fn(usize) -> bool) -> Failure {
    let mut counts: Vec<(Code, usize)> = Vec::new();
    for i in 0..row.len() {
        let code = match row.reasons[i] {
            Some(why) if !row.ok[i] => why.code,
            // Not feasible although it passed: `allowed` said no.
            _ if !feasible(i) => Code::Policy,
            // Unreachable: a feasible node means a placement, not a failure.
            _ => continue,
        };
        match counts.iter_mut().find(|(c, _)| *c == code) {
            Some((_, k)) => *k += 1,
            None => counts.push((code, 1)),
        }
    }
    Failure {
        task: r.task().name.clone(),
        nodes: row.len(),
        reasons: counts.into_iter().collect(),
    }
}

/// Places every request with `place`, each after the ones before it, on a
/// clone of `st`: all of them or none (`Placer::place_all`). The first is
/// placed on `st` itself (placing does not change the state): most
/// attempts that fail, fail there, before a clone.
fn place_each<R, P>(
    st: &State,
    reqs: &[R],
    mut place: P,
) -> Result<(Vec<Assignment>, State), PlaceError>
where
    R: Borrow<Request>,
    P: FnMut(&State, &Request) -> Result<Assignment, PlaceError>,
{
    let Some(head) = reqs.first() else {
        return Ok((Vec::new(), st.clone()));
    };
    let mut first = Some(place(st, head.borrow())?);
    let mut trial = st.clone();
    let mut out = Vec::with_capacity(reqs.len());
    for r in reqs {
        let r = r.borrow();
        let a = match first.take() {
            Some(a) => a,
            None => place(&trial, r)?,
        };
        trial.allocate(&a).map_err(|source| PlaceError::Allocate {
            task: r.task().name.clone(),
            source,
        })?;
        out.push(a);
    }
    Ok((out, trial))
}
