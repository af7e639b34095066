//! Fixtures of the policy tests: named builders for nodes, tasks, what runs
//! on a node and the typical workload, and `score_on`, which runs one
//! policy's filters and scorer on one node.

use crate::cluster::{self, Assignment, Grant, NodeSpec, State};
use crate::frag::{self, Distribution, Shape};
use crate::gpu::{self, DEFAULT_HEADROOM, Layout, Placement};
use crate::placement::{Filter, Fit, Hint, PlaceError, Placer, Policy, Request, explain};
use crate::policies::{self, Config};
use crate::random::Rand;
use crate::workload::{Demand, Task};

/// Builds a node: `node("n1").cpu(8000).gpus(4, "V100-16GB")`.
pub(super) struct NodeBuilder {
    spec: NodeSpec,
}

/// A node with the Alibaba cluster's largest CPU and memory (128 CPUs, 512
/// GiB) and no GPU.
pub(super) fn node(name: &str) -> NodeBuilder {
    NodeBuilder {
        spec: NodeSpec {
            name: name.to_string(),
            cpu_milli: 128_000,
            memory_mib: 512 * 1024,
            ..NodeSpec::default()
        },
    }
}

impl NodeBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.spec.cpu_milli = milli;
        self
    }

    pub(super) fn memory(mut self, mib: i64) -> Self {
        self.spec.memory_mib = mib;
        self
    }

    pub(super) fn mig(mut self) -> Self {
        self.spec.mig = true;
        self
    }

    pub(super) fn gpus(mut self, count: i32, model: &str) -> Self {
        self.spec.gpus = count;
        self.spec.gpu_model = model.to_string();
        self
    }

    /// Gives every GPU the MIG instances in text form ("1g.10gb@6").
    pub(super) fn layout(mut self, text: &str) -> Self {
        self.spec.layout = Layout::parse(text).expect("a test layout parses");
        self
    }
}

/// A State of the nodes, in order; ranks are positions.
pub(super) fn world(nodes: Vec<NodeBuilder>) -> State {
    let ranks: Vec<usize> = (0..nodes.len()).collect();
    ranked_world(&ranks, nodes)
}

/// A State of the nodes, in order, node i with rank `ranks[i]`.
pub(super) fn ranked_world(ranks: &[usize], nodes: Vec<NodeBuilder>) -> State {
    let built = nodes
        .iter()
        .zip(ranks)
        .map(|(b, &rank)| {
            let mut n = cluster::build_node(&b.spec)
                .unwrap_or_else(|e| panic!("build_node({}): {e}", b.spec.name));
            n.set_rank(rank as i64);
            n
        })
        .collect();
    State::new(built).expect("a test cluster builds")
}

/// Builds a task: `task("t").cpu(1000).share(250).on(&["V100M16"])`.
#[derive(Clone)]
pub(super) struct TaskBuilder {
    t: Task,
}

pub(super) fn task(name: &str) -> TaskBuilder {
    TaskBuilder {
        t: Task {
            name: name.to_string(),
            ..Task::default()
        },
    }
}

impl TaskBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.t.cpu_milli = milli;
        self
    }

    pub(super) fn memory(mut self, mib: i64) -> Self {
        self.t.memory_mib = mib;
        self
    }

    /// Keeps the models already given, as the Go builders do.
    fn demand(mut self, d: Demand) -> Self {
        let models = std::mem::take(&mut self.t.gpu.models);
        self.t.gpu = Demand { models, ..d };
        self
    }

    pub(super) fn share(self, milli: i32) -> Self {
        self.demand(Demand::fraction(milli))
    }

    pub(super) fn gpus(self, count: i32) -> Self {
        self.demand(Demand::whole_gpus(count))
    }

    pub(super) fn mig_profile(self, name: &str) -> Self {
        self.demand(Demand::mig_profile(name))
    }

    pub(super) fn gpu_memory(self, peak_mib: i64, compute: f64) -> Self {
        self.demand(Demand::memory_profile(peak_mib, compute))
    }

    pub(super) fn on(mut self, models: &[&str]) -> Self {
        self.t.gpu.models = models.iter().map(|m| m.to_string()).collect();
        self
    }

    pub(super) fn build(&self) -> Task {
        self.t.clone()
    }

    pub(super) fn name(&self) -> &str {
        &self.t.name
    }
}

/// Builds what already runs on a node: `running("old").cpu(1000).share(0, 500)`.
pub(super) struct RunningBuilder {
    a: Assignment,
}

pub(super) fn running(name: &str) -> RunningBuilder {
    RunningBuilder {
        a: Assignment {
            task: name.to_string(),
            ..Assignment::default()
        },
    }
}

impl RunningBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.a.cpu_milli = milli;
        self
    }

    pub(super) fn share(mut self, gpu: i32, milli: i32) -> Self {
        self.a.grants.push(Grant::share(gpu, milli));
        self
    }

    pub(super) fn whole(mut self, gpus: &[i32]) -> Self {
        for &g in gpus {
            self.a.grants.push(Grant::whole(g));
        }
        self
    }

    pub(super) fn instance(mut self, gpu: i32, placement: &str) -> Self {
        let p = Placement::parse(placement).expect("a test placement parses");
        self.a.grants.push(Grant::instance(gpu, p));
        self
    }
}

/// Runs the tasks on the named node, failing the test on a refusal.
pub(super) fn allocate_on(st: &mut State, node_name: &str, tasks: Vec<RunningBuilder>) {
    for b in tasks {
        let a = Assignment {
            node: node_name.to_string(),
            ..b.a
        };
        if let Err(e) = st.allocate(&a) {
            panic!("allocate({} on {node_name}): {e}", a.task);
        }
    }
}

/// The normalisers of the Alibaba cluster: 128 CPUs, 8 GPUs.
pub(super) fn alibaba_norms() -> Config {
    norms(128_000, 8000)
}

/// A config with only the dot-product and best-fit norms.
pub(super) fn norms(cpu: i64, gpu: i64) -> Config {
    Config {
        norm_cpu: cpu,
        norm_gpu: gpu,
        ..Config::default()
    }
}

/// Builds a typical task: `shape().cpu(2000).share(500)`.
#[derive(Default)]
pub(super) struct ShapeBuilder {
    pub(super) s: Shape,
}

pub(super) fn shape() -> ShapeBuilder {
    ShapeBuilder::default()
}

impl ShapeBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.s.cpu_milli = milli;
        self
    }

    pub(super) fn share(mut self, milli: i64) -> Self {
        (self.s.milli, self.s.num) = (milli, 1);
        self
    }

    pub(super) fn gpus(mut self, n: usize) -> Self {
        (self.s.milli, self.s.num) = (1000, n);
        self
    }
}

/// A distribution of one copy of each shape: equal probabilities.
pub(super) fn typical(shapes: Vec<ShapeBuilder>) -> Distribution {
    let shapes: Vec<Shape> = shapes.into_iter().map(|b| b.s).collect();
    frag::typicals(&shapes, 1.0, Some(&canonical))
}

pub(super) fn canonical(name: &str) -> String {
    gpu::lookup(name).name.clone()
}

/// The named policy, failing the test on an error.
pub(super) fn must_policy(name: &str, c: Config) -> Policy {
    policies::new(name, c).unwrap_or_else(|e| panic!("new({name}): {e}"))
}

/// A policy that needs no typical workload.
pub(super) fn policy_named(name: &str) -> Policy {
    must_policy(name, alibaba_norms())
}

/// The request a placer of `p` makes of the task: rewritten as the
/// policy rewrites it.
pub(super) fn request(p: &Policy, b: &TaskBuilder) -> Request {
    let r = Request::new(b.build(), DEFAULT_HEADROOM)
        .unwrap_or_else(|e| panic!("request({}): {e}", b.name()));
    match &p.rewriter {
        Some(rw) => rw.rewrite(r),
        None => r,
    }
}

/// Runs the policy's rewriter, the shared filter, its own filters and its
/// scorer on node 0 of `st`; the node must pass the filters.
pub(super) fn score_on(p: &mut Policy, st: &State, b: &TaskBuilder) -> (i64, Option<Hint>) {
    let r = request(p, b);
    let n = st.node(0);
    let filters = std::iter::once(&Fit as &dyn Filter).chain(p.filters.iter().map(|f| &**f));
    for f in filters {
        if let Err(why) = f.filter(n, &r) {
            panic!(
                "filter {} refuses {} on {}: {} ({})",
                f.name(),
                b.name(),
                n.name(),
                why.code,
                explain(n, &r)
            );
        }
    }
    let scorer = p.scorer.as_mut().expect("the policy scores");
    scorer.score(n, &r)
}

/// Places a task with a fresh placer of the policy (seed 1).
pub(super) fn place_one(p: Policy, st: &State, b: &TaskBuilder) -> Result<Assignment, PlaceError> {
    Placer::new(p, Rand::new(1)).place(st, b.build())
}

/// The text form of a pick: "gpu:milli" or "gpu:profile@start", joined by
/// spaces.
pub(super) fn grants_text(gs: &[Grant]) -> String {
    let parts: Vec<String> = gs
        .iter()
        .map(|g| match &g.slice {
            Some(s) => format!("{}:{s}", g.gpu),
            None => format!("{}:{}", g.gpu, g.milli),
        })
        .collect();
    parts.join(" ")
}

/// Fails unless `err` is an error whose text holds every substring.
pub(super) fn want_err<T, E: std::fmt::Display>(got: Result<T, E>, subs: &[&str]) {
    let Err(err) = got else {
        panic!("got no error, want one containing {subs:?}");
    };
    let text = err.to_string();
    for sub in subs {
        assert!(
            text.contains(sub),
            "error {text:?} does not contain {sub:?}"
        );
    }
}
