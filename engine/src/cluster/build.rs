use std::collections::BTreeMap;
use std::sync::Arc;

use super::node::NodeInfo;
use super::{ClusterError, Gpu, NO_LINK, Node, Slice, State, parse_tier, topology_from_labels};
use crate::gpu::{self, Layout, Placement};

/// The NVLink shape of a PCIe-only node.
pub const LINK_NONE: &str = "none";
/// The NVLink shape of one NVSwitch domain (HGX/DGX boards).
pub const LINK_ALL: &str = "all";
/// The NVLink shape of bridges between GPU pairs (0-1, 2-3, ...).
pub const LINK_PAIRS: &str = "pairs";

/// A node to build: the form nodes take in scenario files and traces.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub labels: BTreeMap<String, String>,
    /// A tier name `parse_tier` reads; "" is reserved.
    pub tier: String,
    /// Any name `gpu::lookup` accepts; "" for a CPU-only node.
    pub gpu_model: String,
    pub gpus: i32,
    /// MIG mode on for every GPU.
    pub mig: bool,
    /// Initial MIG instances on every GPU (MIG only).
    pub layout: Layout,
    /// `LINK_NONE`, `LINK_ALL` or `LINK_PAIRS`; "" picks all for
    /// MIG-capable models, none otherwise.
    pub nvlink: String,
}

/// Makes a node from a spec, checking it.
pub fn build_node(spec: &NodeSpec) -> Result<Node, ClusterError> {
    let node = || spec.name.clone();
    if spec.gpus < 0 {
        return Err(ClusterError::NegativeGpus {
            node: node(),
            gpus: spec.gpus,
        });
    }
    if spec.gpus > 0 && spec.gpu_model.is_empty() {
        return Err(ClusterError::NoGpuModel {
            node: node(),
            gpus: spec.gpus,
        });
    }
    let tier = parse_tier(&spec.tier).map_err(|source| ClusterError::BadTier {
        node: node(),
        source,
    })?;
    let mut n = Node {
        info: Arc::new(NodeInfo {
            name: spec.name.clone(),
            cpu_milli: spec.cpu_milli,
            memory_mib: spec.memory_mib,
            labels: spec.labels.clone(),
            tier,
            topology: topology_from_labels(&spec.labels),
            rank: 0,
        }),
        gpus: Vec::new(),
        cpu_used: 0,
        mem_used: 0,
        tasks: Vec::new(),
        generation: 0,
    };
    if spec.gpus == 0 {
        return Ok(n);
    }
    let model = gpu::lookup(&spec.gpu_model);
    if spec.mig && !model.mig {
        return Err(ClusterError::NodeWithoutMig {
            node: node(),
            model: model.name.clone(),
        });
    }
    if !spec.layout.is_empty() {
        if !spec.mig {
            return Err(ClusterError::LayoutWithoutMig { node: node() });
        }
        model
            .validate(&spec.layout)
            .map_err(|source| ClusterError::BadSpecLayout {
                node: node(),
                source: Box::new(source),
            })?;
    }
    let link = match spec.nvlink.as_str() {
        "" if model.mig => LINK_ALL,
        "" => LINK_NONE,
        other => other,
    };
    // The instances of every GPU, with the model's own spelling of the
    // profile names (so node copies copy no string).
    let slices: Vec<Slice> = spec
        .layout
        .iter()
        .map(|p| Slice {
            placement: match model.find(&p.profile) {
                Some(profile) => Placement {
                    profile: profile.name.clone(),
                    start: p.start,
                },
                None => p.clone(),
            },
            task: None,
        })
        .collect();
    for i in 0..spec.gpus as usize {
        let link = link_of(link, i).ok_or_else(|| ClusterError::BadNvlink {
            node: node(),
            nvlink: link.to_string(),
        })?;
        let mut g = Gpu::new(i, model.clone(), spec.mig, link);
        g.slices = slices.clone();
        g.recount();
        n.gpus.push(g);
    }
    Ok(n)
}

fn link_of(shape: &str, i: usize) -> Option<i32> {
    match shape {
        LINK_NONE => Some(NO_LINK),
        LINK_ALL => Some(0),
        LINK_PAIRS => Some((i / 2) as i32),
        _ => None,
    }
}

impl State {
    /// Builds every node of `specs` and a State of them.
    pub fn build(specs: &[NodeSpec]) -> Result<State, ClusterError> {
        let nodes = specs
            .iter()
            .map(build_node)
            .collect::<Result<Vec<Node>, ClusterError>>()?;
        State::new(nodes)
    }

    /// Checks every invariant of the State; tests call it after random
    /// operation sequences. Besides the Go build's checks it checks the
    /// counters kept beside the lists (the holders' milli, the instances'
    /// memory mask and compute).
    pub fn check(&self) -> Result<(), ClusterError> {
        for n in self.nodes() {
            check_node(n).map_err(|problem| ClusterError::Broken {
                node: n.name().to_string(),
                problem,
            })?;
        }
        Ok(())
    }
}

fn check_node(n: &Node) -> Result<(), String> {
    let (mut cpu, mut mem) = (0i64, 0i64);
    let mut used = vec![0i32; n.gpus.len()];
    // (GPU, instance) -> the task holding it.
    let mut owner: BTreeMap<(usize, &Placement), &str> = BTreeMap::new();
    for a in &n.tasks {
        cpu += a.cpu_milli;
        mem += a.memory_mib;
        for g in &a.grants {
            let Some(k) = usize::try_from(g.gpu).ok().filter(|k| *k < n.gpus.len()) else {
                return Err(format!(
                    "task {} holds gpu {}, of {} GPUs",
                    a.task,
                    g.gpu,
                    n.gpus.len()
                ));
            };
            match &g.slice {
                None => used[k] += g.milli,
                Some(p) => {
                    owner.insert((k, p), &a.task);
                }
            }
        }
    }
    if cpu != n.cpu_used || mem != n.mem_used {
        return Err(format!(
            "cpu/memory in use {}/{}, tasks add up to {cpu}/{mem}",
            n.cpu_used, n.mem_used
        ));
    }
    if cpu < 0 || mem < 0 || cpu > n.cpu_milli() || mem > n.memory_mib() {
        return Err(format!(
            "cpu/memory in use {cpu}/{mem} outside 0..{}/{}",
            n.cpu_milli(),
            n.memory_mib()
        ));
    }
    for (i, g) in n.gpus.iter().enumerate() {
        check_gpu(g, used[i], &mut owner).map_err(|e| format!("gpu {i}: {e}"))?;
    }
    Ok(())
}

fn check_gpu<'a>(
    g: &'a Gpu,
    used: i32,
    owner: &mut BTreeMap<(usize, &'a Placement), &str>,
) -> Result<(), String> {
    if used != g.used || !(0..=1000).contains(&g.used) {
        return Err(format!("used {} milli, tasks hold {used}", g.used));
    }
    let holders: i32 = g.holders.iter().map(|h| h.milli).sum();
    if holders != g.used {
        return Err(format!("used {} milli, holders hold {holders}", g.used));
    }
    if g.mig && g.used != 0 {
        return Err(format!("MIG GPU holds {} milli outside instances", g.used));
    }
    if !g.slices.is_empty() {
        g.model.validate(&g.layout()).map_err(|e| e.to_string())?;
    }
    let mut counted = g.clone();
    counted.recount();
    if (counted.mem_mask, counted.compute) != (g.mem_mask, g.compute) {
        return Err(format!(
            "instances take memory {:08b} and {} compute, counted {:08b} and {}",
            counted.mem_mask, counted.compute, g.mem_mask, g.compute
        ));
    }
    for s in &g.slices {
        let says = owner.remove(&(g.index, &s.placement)).unwrap_or("");
        let holds = s.task().unwrap_or("");
        if says != holds {
            return Err(format!(
                "instance {} held by {}, tasks say {}",
                s.placement,
                crate::quote::quote(holds),
                crate::quote::quote(says)
            ));
        }
    }
    if let Some(((_, p), t)) = owner.iter().find(|((k, _), _)| *k == g.index) {
        return Err(format!("task {t} holds a missing instance {p}"));
    }
    Ok(())
}
