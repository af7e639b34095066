//! The arrival sequence of one seed (fgd-protocol.md §2-§3): which pods
//! arrive, in which order, and how the cluster is built.

use crate::cluster::{self, NodeSpec, State};
use crate::frag::{self, Distribution, Shape};
use crate::gpu;
use crate::random::Rand;
use crate::trace;
use crate::workload::{Demand, Task};

use super::FillError;

/// One arriving pod of the experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct Pod {
    pub task: Task,
    /// num_gpu × gpu_milli: what the pod adds to the arrived total.
    pub gpu_milli: i64,
    /// Its request as fragmentation sees it, host memory included.
    pub shape: Shape,
}

/// Converts a trace row (§2): a pod asks for num_gpu GPUs at gpu_milli
/// each; it is a share only when it asks for one GPU below 1000.
pub fn pod_of(p: &trace::Pod, name: &str) -> Pod {
    let milli = p.gpu_milli.min(1000);
    let models: Vec<&str> = p.gpu_spec.iter().map(String::as_str).collect();
    let gpu = if p.num_gpu == 0 {
        Demand::none()
    } else if p.num_gpu == 1 && milli < 1000 {
        Demand::fraction(milli as i32).on(&models)
    } else {
        Demand::whole_gpus(p.num_gpu as i32).on(&models)
    };
    // The spec is ignored for CPU-only pods (§2), so it is not part of
    // their shape either.
    let shape = if p.num_gpu > 0 {
        Shape {
            cpu_milli: p.cpu_milli,
            mem_mib: p.memory_mib,
            milli,
            num: p.num_gpu,
            spec: p.gpu_spec_raw.clone(),
        }
    } else {
        Shape {
            cpu_milli: p.cpu_milli,
            mem_mib: p.memory_mib,
            ..Shape::default()
        }
    };
    Pod {
        task: Task {
            name: name.to_string(),
            cpu_milli: p.cpu_milli,
            memory_mib: p.memory_mib,
            gpu,
        },
        gpu_milli: p.num_gpu as i64 * milli,
        shape,
    }
}

/// The original trace's requests, host memory included: the request
/// distribution a policy may know in advance.
pub fn shapes(pods: &[trace::Pod]) -> Vec<Shape> {
    pods.iter().map(|p| pod_of(p, &p.name).shape).collect()
}

/// The expected workload FGD and partita plan for (§4 "Typical pods"):
/// computed once from the original trace, before any tuning or shuffling.
pub fn typical(pods: &[trace::Pod]) -> Distribution {
    let canonical = |name: &str| canonical(name);
    frag::typicals(
        &frag::without_memory(&shapes(pods)),
        frag::DEFAULT_THRESHOLD,
        Some(&canonical),
    )
}

/// The catalog's name for a model as a trace writes it.
pub fn canonical(name: &str) -> String {
    gpu::lookup(name).name.clone()
}

/// Builds the cluster (§1): each node's CPU, memory and GPUs of its model.
/// `ranks` gives each node's tie-break rank (§3.4); without it a node's
/// rank is its position.
pub fn nodes(rows: &[trace::Node], ranks: Option<&[usize]>) -> Result<State, FillError> {
    let mut built = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let spec = NodeSpec {
            name: r.name.clone(),
            cpu_milli: r.cpu_milli,
            memory_mib: r.memory_mib,
            gpu_model: r.model.clone(),
            gpus: r.gpus as i32,
            ..NodeSpec::default()
        };
        let mut n = cluster::build_node(&spec).map_err(|source| FillError::Node {
            node: r.name.clone(),
            line: r.line,
            source,
        })?;
        let rank = ranks.map_or(i, |ranks| ranks[i]);
        n.set_rank(rank as i64);
        built.push(n);
    }
    State::new(built).map_err(FillError::Cluster)
}

/// The arrival sequence of one seed (§3): the pods sorted by name, then
/// shuffled, then sampled up (with replacement, from the sorted list) or
/// trimmed down until their GPU demand is `tune` × the cluster's GPUs.
/// It draws in the published simulator's order (shuffle, then the tuning
/// draws; the node ranks come next, in `run`), from the project's
/// generator (docs/determinism.md).
pub fn arrivals(rows: &[trace::Pod], cluster_milli: i64, tune: f64, rng: &mut Rand) -> Vec<Pod> {
    let mut sorted: Vec<Pod> = rows.iter().map(|r| pod_of(r, &r.name)).collect();
    sorted.sort_by(|a, b| a.task.name.cmp(&b.task.name)); // stable, as Go's SliceStable
    let mut pods = sorted.clone();
    rng.shuffle(&mut pods);

    let mut total: i64 = pods.iter().map(|p| p.gpu_milli).sum();
    let target = tune * cluster_milli as f64;
    if tune <= 0.0 || total as f64 == target {
        return pods;
    }
    if total as f64 > target {
        // tuneDownPods: drop random pods of the current list.
        while total as f64 > target && !pods.is_empty() {
            let i = rng.below(pods.len());
            total -= pods.remove(i).gpu_milli;
        }
        return pods;
    }
    // tuneUpPods: append copies drawn with replacement; it stops at the
    // first draw whose per-GPU share (not its total) would cross the
    // target, so multi-GPU pods may overshoot, as in the original.
    for i in 0.. {
        let p = &sorted[rng.below(sorted.len())];
        if (total + p.shape.milli) as f64 > target {
            break;
        }
        let mut copy = p.clone();
        copy.task.name = format!("{}-tuned-{i}", p.task.name);
        total += copy.gpu_milli;
        pods.push(copy);
    }
    pods
}
