//! The fixtures of the module's tests: named builders for node specs and
//! assignments, and `describe`, the canonical text of everything a State
//! holds, which tests compare before and after an operation.

mod alloc;
mod build;
mod check;
mod clone;
mod mig;
mod property;

use std::fmt::Write;
use std::sync::Arc;

use super::*;
use crate::gpu::{Layout, Placement};

/// Builds a `NodeSpec`: `node("n1").gpus(8, "V100-32GB").nvlink(LINK_PAIRS)`.
#[derive(Clone)]
pub(super) struct SpecBuilder(NodeSpec);

/// A spec for a node with room for most tests: 32 CPUs, 256 GiB.
pub(super) fn node(name: &str) -> SpecBuilder {
    SpecBuilder(NodeSpec {
        name: name.to_string(),
        cpu_milli: 32000,
        memory_mib: 256 * 1024,
        ..NodeSpec::default()
    })
}

impl SpecBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.0.cpu_milli = milli;
        self
    }
    pub(super) fn memory(mut self, mib: i64) -> Self {
        self.0.memory_mib = mib;
        self
    }
    pub(super) fn gpus(mut self, count: i32, model: &str) -> Self {
        self.0.gpus = count;
        self.0.gpu_model = model.to_string();
        self
    }
    pub(super) fn mig(mut self) -> Self {
        self.0.mig = true;
        self
    }
    /// The initial MIG instances of every GPU, from their text form.
    pub(super) fn layout(mut self, text: &str) -> Self {
        self.0.layout = must_layout(text);
        self
    }
    pub(super) fn nvlink(mut self, shape: &str) -> Self {
        self.0.nvlink = shape.to_string();
        self
    }
    pub(super) fn tier(mut self, t: &str) -> Self {
        self.0.tier = t.to_string();
        self
    }
    pub(super) fn label(mut self, key: &str, value: &str) -> Self {
        self.0.labels.insert(key.to_string(), value.to_string());
        self
    }
    pub(super) fn spec(&self) -> &NodeSpec {
        &self.0
    }
    /// The node, failing the test on a bad spec.
    #[track_caller]
    pub(super) fn build(&self) -> Node {
        build_node(&self.0).unwrap_or_else(|e| panic!("build_node({}): {e}", self.0.name))
    }
}

/// Every node built and a State of them.
#[track_caller]
pub(super) fn new_state(specs: &[SpecBuilder]) -> State {
    State::new(specs.iter().map(SpecBuilder::build).collect())
        .unwrap_or_else(|e| panic!("State::new: {e}"))
}

/// A fixture layout; a typo in a test is a programming error.
#[track_caller]
pub(super) fn must_layout(text: &str) -> Layout {
    Layout::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

#[track_caller]
pub(super) fn must_placement(text: &str) -> Placement {
    Placement::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

/// Builds an `Assignment`: `task("t1").on("n1").cpu(1000).share(0, 500)`.
#[derive(Clone)]
pub(super) struct TaskBuilder(Assignment);

pub(super) fn task(name: &str) -> TaskBuilder {
    TaskBuilder(Assignment {
        task: name.to_string(),
        ..Assignment::default()
    })
}

impl TaskBuilder {
    pub(super) fn on(mut self, node: &str) -> Self {
        self.0.node = node.to_string();
        self
    }
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.0.cpu_milli = milli;
        self
    }
    pub(super) fn memory(mut self, mib: i64) -> Self {
        self.0.memory_mib = mib;
        self
    }
    pub(super) fn share(mut self, index: i32, milli: i32) -> Self {
        self.0.grants.push(Grant::share(index, milli));
        self
    }
    pub(super) fn whole(self, index: i32) -> Self {
        self.share(index, 1000)
    }
    /// Asks for the MIG instance "profile@start" on GPU `index`.
    pub(super) fn instance(mut self, index: i32, placement: &str) -> Self {
        self.0
            .grants
            .push(Grant::instance(index, must_placement(placement)));
        self
    }
    pub(super) fn a(&self) -> &Assignment {
        &self.0
    }
}

/// Gives the tasks their assignments, failing the test on a refusal.
#[track_caller]
pub(super) fn allocate(s: &mut State, tasks: &[TaskBuilder]) {
    for t in tasks {
        s.allocate(t.a())
            .unwrap_or_else(|e| panic!("allocate({}): {e}", t.0.task));
    }
}

/// Fails the test when the State breaks an invariant.
#[track_caller]
pub(super) fn must_check(s: &State) {
    if let Err(e) = s.check() {
        panic!("check: {e}\n{}", describe(s));
    }
}

/// Fails unless the result is an error holding every substring.
#[track_caller]
pub(super) fn want_err<T: std::fmt::Debug>(
    r: Result<T, ClusterError>,
    subs: &[&str],
) -> ClusterError {
    let err = match r {
        Ok(v) => panic!("got {v:?}, want an error containing {subs:?}"),
        Err(e) => e,
    };
    for sub in subs {
        assert!(
            err.to_string().contains(sub),
            "error {:?} does not contain {sub:?}",
            err.to_string()
        );
    }
    err
}

/// The canonical text of everything a State holds, public or not,
/// including each node's gen: two States describe alike only when they
/// are the same in every respect the module can observe.
pub(super) fn describe(s: &State) -> String {
    let mut b = String::new();
    for n in s.nodes() {
        describe_node(&mut b, n);
    }
    b
}

fn describe_node(b: &mut String, n: &Node) {
    let _ = writeln!(
        b,
        "node {} tier={} topology={:?} rank={} labels={:?} gen={} cpu={}/{} memory={}/{}",
        n.name(),
        n.tier(),
        n.topology(),
        n.rank(),
        n.labels(),
        n.generation,
        n.cpu_used,
        n.cpu_milli(),
        n.mem_used,
        n.memory_mib()
    );
    for a in &n.tasks {
        let _ = writeln!(
            b,
            "  task {} node={} cpu={} memory={} grants={}",
            a.task,
            a.node,
            a.cpu_milli,
            a.memory_mib,
            grants_text(&a.grants)
        );
    }
    for g in &n.gpus {
        let _ = write!(
            b,
            "  gpu {} model={} mig={} link={} cordoned={} used={} holders={:?} memmask={:08b} compute={} slices=[",
            g.index,
            g.model.name,
            g.mig,
            g.link,
            g.cordoned,
            g.used,
            g.holders,
            g.mem_mask,
            g.compute
        );
        for (k, s) in g.slices.iter().enumerate() {
            if k > 0 {
                b.push(' ');
            }
            let _ = write!(b, "{}:{:?}", s.placement, s.task());
        }
        b.push_str("]\n");
    }
}

pub(super) fn grants_text(gs: &[Grant]) -> String {
    let parts: Vec<String> = gs
        .iter()
        .map(|g| match &g.slice {
            Some(p) => format!("{}:{}/{}", g.gpu, p, g.milli),
            None => format!("{}:{}m", g.gpu, g.milli),
        })
        .collect();
    format!("[{}]", parts.join(" "))
}

/// Each node's gen, in order.
pub(super) fn gens(s: &State) -> Vec<u64> {
    s.nodes().map(Node::generation).collect()
}

/// Where the State's nodes are, to tell whether an operation copied one.
/// Addresses, not handles: a handle held here would make the State copy
/// the node it shares on its next change.
pub(super) fn node_handles(s: &State) -> Vec<*const Node> {
    (0..s.len()).map(|i| Arc::as_ptr(&s.slot(i).node)).collect()
}

/// A State recorded to compare after an operation that must not change it.
pub(super) struct Snapshot {
    pub(super) text: String,
    check: Result<(), ClusterError>,
    pub(super) nodes: Vec<*const Node>,
    pub(super) gens: Vec<u64>,
}

pub(super) fn take_snapshot(s: &State) -> Snapshot {
    Snapshot {
        text: describe(s),
        check: s.check(),
        nodes: node_handles(s),
        gens: gens(s),
    }
}

impl Snapshot {
    /// Fails the test unless `s` still matches: same check result, same
    /// description (gens included) and not one node copied.
    #[track_caller]
    pub(super) fn same(&self, s: &State, what: &str) {
        assert_eq!(s.check(), self.check, "{what}: check changed");
        let got = describe(s);
        assert!(
            got == self.text,
            "{what} changed the State:\nbefore:\n{}\nafter:\n{got}",
            self.text
        );
        for (i, n) in node_handles(s).into_iter().enumerate() {
            assert!(
                std::ptr::eq(n, self.nodes[i]),
                "{what} copied node {}",
                s.node(i).name()
            );
        }
    }
}

/// A small cluster with work already on it, for refusals:
///   - cpu: CPU-only, 4 CPUs, 8 GiB;
///   - v100: 8 V100-32GB, 32 CPUs, 256 GiB; task "holder" has half of
///     GPU 0, 1 CPU and 1 GiB;
///   - h100: 2 H100-80GB in MIG mode; GPU 0 has 3g.40gb@0 (held by
///     "inst") and a free 1g.10gb+me@4; GPU 1 has no instances.
pub(super) fn busy_world() -> State {
    let mut s = new_state(&[
        node("cpu").cpu(4000).memory(8192),
        node("v100").gpus(8, "V100-32GB"),
        node("h100").gpus(2, "H100-80GB").mig(),
    ]);
    s.set_layout("h100", 0, &must_layout("3g.40gb@0,1g.10gb+me@4"))
        .unwrap();
    allocate(
        &mut s,
        &[
            task("holder")
                .on("v100")
                .cpu(1000)
                .memory(1024)
                .share(0, 500),
            task("inst")
                .on("h100")
                .cpu(1000)
                .memory(1024)
                .instance(0, "3g.40gb@0"),
        ],
    );
    must_check(&s);
    s
}
