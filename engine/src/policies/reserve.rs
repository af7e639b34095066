//! Partita's reservation: keeps enough nodes able to host multi-GPU
//! tasks. Node-local scores (FGD's and Partita's) cannot see that the last
//! few empty 8-GPU nodes are about to go; the cluster can. From the request
//! distribution we know what share f_k of GPU demand comes as k-GPU tasks,
//! so of the R free GPUs about R·f_k/k will be asked for by k-GPU tasks.
//! While the nodes that can still host one (k fully free GPUs, and the CPU
//! and memory such tasks typically ask) are no more than that, a placement
//! that would take one of them below k goes behind every placement that
//! would not.
//!
//! Models get the same treatment: a model whose free GPUs are no more than
//! the expected demand of the tasks constrained to it (a task allowed on
//! several models counts a share on each) is kept for those tasks; a task
//! that may also run on a model that is not scarce goes there first.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::{Node, NodeSet, State};
use crate::frag::Shape;
use crate::gpu::ModelRef;
use crate::placement::{Adjuster, Hint, Request};
use crate::workload::Kind;

/// Moves a placement behind every unpenalised one while keeping the order
/// among penalised ones (scores stay below 2^41, MIG's included).
pub(super) const RESERVE_PENALTY: i64 = 1 << 50;

/// The largest k-GPU task the reservation plans for.
const MAX_K: usize = 64;

/// Partita's adjuster: see the module documentation. Built once per policy
/// from the request distribution; `prepare` brings its view of the cluster
/// up to date before each placement, `adjust` penalises the placements
/// that would take what it keeps.
pub(super) struct Reserve {
    /// The k-GPU tasks of the request distribution, k ≥ 2, ascending.
    multi: Vec<Multi>,
    /// Safety margin on the expected demand.
    factor: f64,
    /// The share of GPU demand constrained to each model.
    model_frac: BTreeMap<String, f64>,

    // What the last `prepare` saw, kept per node by generation so that a
    // placement re-reads only the nodes that changed since the last one.
    /// The node set the generations in `nodes` and `version` belong to.
    set: Option<Arc<NodeSet>>,
    /// The State version the totals were computed for: they depend on the
    /// cluster alone, so a placement on an unchanged cluster (a gang's
    /// tasks tried again, a victim search) reuses them.
    version: u64,
    /// Per node: the generation its contribution was read at (0: none
    /// yet), apart from the contributions so that the pass that looks for
    /// changed nodes reads one dense array.
    generations: Vec<u64>,
    nodes: Vec<Contribution>,
    free_milli: i64,
    /// Per `multi`: the nodes that can host such a task.
    hosts: Vec<i64>,
    /// Every model the cluster has shown, by name. A model stays once seen
    /// (with no free GPU if its nodes are gone), as in the Go build.
    models: BTreeMap<String, ModelFree>,
    /// Bit x: the hosts of `multi[x]` are scarce.
    scarce: u64,

    /// The models the request of the current placement is kept off.
    penalised: Vec<String>,
}

/// The tasks of one size k ≥ 2 in the request distribution.
struct Multi {
    k: i64,
    /// Their share of all GPU demand.
    frac: f64,
    /// Their mean CPU (milli) and memory (MiB), rounded toward zero.
    cpu: i64,
    mem: i64,
}

impl Multi {
    /// Whether a node with `free` fully free GPUs and this CPU and memory
    /// left can host one such task.
    fn hosted(&self, free: i64, cpu: i64, mem: i64) -> bool {
        free >= self.k && cpu >= self.cpu && mem >= self.mem
    }
}

/// What the cluster has free of one model, and whether that is no more
/// than the tasks constrained to the model are expected to ask.
#[derive(Default)]
struct ModelFree {
    milli: i64,
    scarce: bool,
}

/// What one node adds to the totals, and what `adjust` needs of it, read
/// once per change of the node rather than once per placement.
#[derive(Clone, Default)]
struct Contribution {
    /// Whether it is counted in the totals.
    counted: bool,
    /// GPU milli free.
    free: i64,
    model: Option<ModelRef>,
    /// Bit x: the node can host a task of `multi[x]`.
    hosts: u64,
    fully_free: i64,
    cpu_free: i64,
    mem_free: i64,
}

impl Reserve {
    /// The reservation for the request distribution `shapes` (model names
    /// as `canonical` maps them), keeping `factor` times the expected
    /// demand.
    pub(super) fn new(shapes: &[Shape], factor: f64, canonical: fn(&str) -> String) -> Reserve {
        #[derive(Default)]
        struct Sums {
            milli: f64,
            cpu: i64,
            mem: i64,
            count: i64,
        }
        let mut total = 0.0;
        let mut model_frac: BTreeMap<String, f64> = BTreeMap::new();
        let mut by_k: BTreeMap<usize, Sums> = BTreeMap::new();
        for s in shapes {
            let milli = s.milli * s.num as i64;
            total += milli as f64;
            if !s.spec.is_empty() && s.milli > 0 {
                let models = spec_models(&s.spec, canonical);
                for m in &models {
                    *model_frac.entry(m.clone()).or_insert(0.0) +=
                        milli as f64 / models.len() as f64;
                }
            }
            if s.milli == 1000 && s.num >= 2 {
                let sums = by_k.entry(s.num).or_default();
                sums.milli += (1000 * s.num as i64) as f64;
                sums.cpu += s.cpu_milli;
                sums.mem += s.mem_mib;
                sums.count += 1;
            }
        }
        for frac in model_frac.values_mut() {
            *frac /= total;
        }
        let multi: Vec<Multi> = by_k
            .range(2..=MAX_K)
            .map(|(&k, s)| Multi {
                k: k as i64,
                frac: s.milli / total,
                cpu: s.cpu / s.count,
                mem: s.mem / s.count,
            })
            .collect();
        Reserve {
            hosts: vec![0; multi.len()],
            scarce: 0,
            multi,
            factor,
            model_frac,
            set: None,
            version: 0,
            generations: Vec::new(),
            nodes: Vec::new(),
            free_milli: 0,
            models: BTreeMap::new(),
            penalised: Vec::new(),
        }
    }

    /// Brings the totals and the scarcity flags up to date with `st`.
    fn refresh(&mut self, st: &State) {
        let same_set = self
            .set
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, st.node_set()));
        if self.nodes.len() != st.len() {
            self.generations = vec![0; st.len()];
            self.nodes = vec![Contribution::default(); st.len()];
            self.free_milli = 0;
            self.hosts.fill(0);
            self.models.clear();
        }
        for i in 0..st.len() {
            let known = self.generations[i];
            // Generations are numbered per node set: from another set,
            // every node is new.
            if same_set && known != 0 && known == st.generation(i) {
                continue;
            }
            let old = std::mem::take(&mut self.nodes[i]);
            self.add(&old, -1);
            let new = self.contribution_of(st.node(i));
            self.add(&new, 1);
            self.nodes[i] = new;
            self.generations[i] = st.generation(i);
        }
        self.set = Some(Arc::clone(st.node_set()));
        self.version = st.version();
        self.scarce = 0;
        for (x, m) in self.multi.iter().enumerate() {
            let expected = self.free_milli as f64 / 1000.0 * m.frac / m.k as f64 * self.factor;
            if self.hosts[x] as f64 <= expected {
                self.scarce |= 1 << x;
            }
        }
        for (name, model) in &mut self.models {
            let frac = self.model_frac.get(name).copied().unwrap_or(0.0);
            model.scarce =
                frac > 0.0 && model.milli as f64 <= self.free_milli as f64 * frac * self.factor;
        }
    }

    fn contribution_of(&self, n: &Node) -> Contribution {
        let fully_free = i64::from(n.fully_free_gpus());
        let mut hosts = 0;
        for (x, m) in self.multi.iter().enumerate() {
            if m.hosted(fully_free, n.cpu_free(), n.mem_free()) {
                hosts |= 1 << x;
            }
        }
        Contribution {
            counted: true,
            free: i64::from(n.gpu_free_milli()),
            model: n.model_ref().cloned(),
            hosts,
            fully_free,
            cpu_free: n.cpu_free(),
            mem_free: n.mem_free(),
        }
    }

    /// Adds (`sign` 1) or removes (-1) a node's contribution to the totals.
    fn add(&mut self, c: &Contribution, sign: i64) {
        if !c.counted {
            return;
        }
        self.free_milli += sign * c.free;
        if let Some(m) = c.model.as_ref().filter(|m| !m.name.is_empty()) {
            match self.models.get_mut(&m.name) {
                Some(model) => model.milli += sign * c.free,
                None => {
                    let model = ModelFree {
                        milli: sign * c.free,
                        scarce: false,
                    };
                    self.models.insert(m.name.clone(), model);
                }
            }
        }
        for (x, hosts) in self.hosts.iter_mut().enumerate() {
            if c.hosts & (1 << x) != 0 {
                *hosts += sign;
            }
        }
    }

    /// Whether `r` may run on a model of the cluster, other than `model`,
    /// that is not scarce.
    fn elsewhere(&self, r: &Request, model: &str) -> bool {
        self.models.iter().any(|(name, m)| {
            name != model && !m.scarce && (r.models().is_empty() || r.models().contains(name))
        })
    }
}

impl Adjuster for Reserve {
    fn prepare(&mut self, st: &State, r: &Request) {
        let same_set = self
            .set
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, st.node_set()));
        if !same_set || st.version() != self.version {
            self.refresh(st);
        }
        // Which models this request is kept off depends on the request, so
        // it is decided anew for every placement.
        self.penalised.clear();
        if r.kind() == Kind::NoGpu {
            return;
        }
        for (name, m) in &self.models {
            if m.scarce && self.elsewhere(r, name) {
                self.penalised.push(name.clone());
            }
        }
    }

    /// Reads node `i` from what `prepare` kept of it (the placer calls
    /// `prepare` on the same State first): a pass over a dense array
    /// instead of over 1,213 nodes scattered in memory.
    fn adjust(&mut self, i: usize, n: &Node, r: &Request, score: i64, hint: Option<&Hint>) -> i64 {
        debug_assert_eq!(
            self.generations[i],
            n.generation(),
            "adjust on a State prepare did not see"
        );
        let c = &self.nodes[i];
        if !self.penalised.is_empty()
            && let Some(m) = &c.model
            && self.penalised.contains(&m.name)
        {
            return score - RESERVE_PENALTY;
        }
        // The scarce sizes this node can host now: taking it below one of
        // them is penalised.
        let at_stake = c.hosts & self.scarce;
        if at_stake == 0 {
            return score;
        }
        let after = c.fully_free - takes_free(n, r, hint);
        let (cpu, mem) = (c.cpu_free - r.cpu_milli(), c.mem_free - r.mem_mib());
        for (x, m) in self.multi.iter().enumerate() {
            if at_stake & (1 << x) != 0 && !m.hosted(after, cpu, mem) {
                return score - RESERVE_PENALTY;
            }
        }
        score
    }
}

/// How many fully free GPUs of `n` the request would take: whole GPUs
/// their count, a share the hinted GPU if that one is fully free (a share
/// without a hint is counted as taking none, as in the Go build).
fn takes_free(n: &Node, r: &Request, hint: Option<&Hint>) -> i64 {
    match r.kind() {
        Kind::WholeGpus => return i64::from(r.count()),
        Kind::NoGpu => return 0,
        _ => {}
    }
    match hint.and_then(|h| n.gpus().get(h.gpu)) {
        Some(g) if g.used() == 0 && !g.mig() => 1,
        _ => 0,
    }
}

/// The canonical models of a `|`-separated spec, without repeats.
fn spec_models(spec: &str, canonical: fn(&str) -> String) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in spec.split('|').filter(|m| !m.is_empty()) {
        let c = canonical(m);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}
