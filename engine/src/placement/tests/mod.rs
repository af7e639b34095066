//! The fixtures of the module's tests, ported from the Go build's
//! helpers_test.go: named builders for nodes, tasks and what already runs
//! on a node. Numbers in a test are always named by the builder method
//! that takes them.

mod accounting;
mod bench;
mod fit;
mod golden;
mod picker;
mod placer;
mod property;
mod request;

use std::fmt::Display;

use crate::cluster::{Assignment, Grant, Node, NodeSpec, State, build_node};
use crate::gpu::{Layout, Placement};
use crate::workload::{Demand, Kind, Task};

use super::Request;

/// Builds a node: `node("n1").cpu(8000).gpus(4, "V100-16GB").rank(2)`.
#[derive(Clone)]
pub(super) struct NodeBuilder {
    spec: NodeSpec,
    rank: Option<i64>,
}

/// A node with room for most tests (32 CPUs, 256 GiB) and no GPU.
pub(super) fn node(name: &str) -> NodeBuilder {
    NodeBuilder {
        spec: NodeSpec {
            name: name.to_string(),
            cpu_milli: 32000,
            memory_mib: 256 * 1024,
            ..NodeSpec::default()
        },
        rank: None,
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
    pub(super) fn rank(mut self, r: i64) -> Self {
        self.rank = Some(r);
        self
    }
    pub(super) fn gpus(mut self, count: i32, model: &str) -> Self {
        self.spec.gpus = count;
        self.spec.gpu_model = model.to_string();
        self
    }
    /// Gives every GPU the MIG instances in text form ("1g.10gb@0,3g.40gb@4").
    pub(super) fn layout(mut self, text: &str) -> Self {
        self.spec.layout = Layout::parse(text).expect("a valid layout text");
        self
    }
    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }
    #[track_caller]
    pub(super) fn build(&self) -> Node {
        let mut n = build_node(&self.spec)
            .unwrap_or_else(|e| panic!("build_node({}): {e}", self.spec.name));
        if let Some(r) = self.rank {
            n.set_rank(r);
        }
        n
    }
}

/// A State of the nodes, in order.
#[track_caller]
pub(super) fn world(nodes: &[NodeBuilder]) -> State {
    State::new(nodes.iter().map(NodeBuilder::build).collect())
        .unwrap_or_else(|e| panic!("State::new: {e}"))
}

/// Builds a task: `task("t").cpu(1000).share(250).on(&["V100M16"])`.
#[derive(Clone)]
pub(super) struct TaskBuilder(Task);

pub(super) fn task(name: &str) -> TaskBuilder {
    TaskBuilder(Task {
        name: name.to_string(),
        ..Task::default()
    })
}

impl TaskBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.0.cpu_milli = milli;
        self
    }
    pub(super) fn memory(mut self, mib: i64) -> Self {
        self.0.memory_mib = mib;
        self
    }
    /// Replaces the GPU demand, keeping the models.
    fn demand(mut self, d: Demand) -> Self {
        let models = std::mem::take(&mut self.0.gpu.models);
        self.0.gpu = Demand { models, ..d };
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
    /// A memory profile: peak GPU memory and a compute share.
    pub(super) fn gpu_memory(self, peak_mib: i64, compute: f64) -> Self {
        self.demand(Demand {
            kind: Kind::MemoryProfile,
            peak_memory_mib: peak_mib,
            compute,
            ..Demand::default()
        })
    }
    pub(super) fn on(mut self, models: &[&str]) -> Self {
        self.0.gpu.models = models.iter().map(|m| m.to_string()).collect();
        self
    }
    pub(super) fn build(&self) -> Task {
        self.0.clone()
    }
}

/// The task prepared with no memory headroom, failing the test on a
/// refusal.
#[track_caller]
pub(super) fn request(b: &TaskBuilder) -> Request {
    request_with(b, 0.0)
}

#[track_caller]
pub(super) fn request_with(b: &TaskBuilder, headroom: f64) -> Request {
    Request::new(b.build(), headroom).unwrap_or_else(|e| panic!("Request::new({}): {e}", b.0.name))
}

/// Builds what already runs on a node: `running("old").cpu(1000).share(0, 500)`.
#[derive(Clone)]
pub(super) struct RunningBuilder(Assignment);

pub(super) fn running(name: &str) -> RunningBuilder {
    RunningBuilder(Assignment {
        task: name.to_string(),
        ..Assignment::default()
    })
}

impl RunningBuilder {
    pub(super) fn cpu(mut self, milli: i64) -> Self {
        self.0.cpu_milli = milli;
        self
    }
    pub(super) fn memory(mut self, mib: i64) -> Self {
        self.0.memory_mib = mib;
        self
    }
    pub(super) fn share(mut self, gpu: i32, milli: i32) -> Self {
        self.0.grants.push(Grant::share(gpu, milli));
        self
    }
    /// Holds the MIG instance "profile@start" of GPU `gpu`.
    pub(super) fn instance(mut self, gpu: i32, placement: &str) -> Self {
        let p = Placement::parse(placement).expect("a valid placement text");
        self.0.grants.push(Grant::instance(gpu, p));
        self
    }
}

/// Runs the tasks on the named node, failing the test on a refusal.
#[track_caller]
pub(super) fn allocate_on(st: &mut State, node: &str, tasks: &[RunningBuilder]) {
    for b in tasks {
        let mut a = b.0.clone();
        a.node = node.to_string();
        st.allocate(&a)
            .unwrap_or_else(|e| panic!("allocate({} on {node}): {e}", a.task));
    }
}

/// Fails unless `err` is an error whose text holds every substring.
#[track_caller]
pub(super) fn want_err<T: std::fmt::Debug, E: Display>(got: Result<T, E>, subs: &[&str]) -> E {
    let err = match got {
        Ok(v) => panic!("got {v:?}, want an error containing {subs:?}"),
        Err(e) => e,
    };
    let text = err.to_string();
    for sub in subs {
        assert!(
            text.contains(sub),
            "error {text:?} does not contain {sub:?}"
        );
    }
    err
}

/// The text a test expects of a pick: "gpu:milli" or "gpu:profile@start",
/// one per grant.
pub(super) fn grants_text(gs: &[Grant]) -> Vec<String> {
    gs.iter()
        .map(|g| match &g.slice {
            Some(s) => format!("{}:{s}", g.gpu),
            None => format!("{}:{}", g.gpu, g.milli),
        })
        .collect()
}
