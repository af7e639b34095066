use std::collections::BTreeMap;
use std::fmt::{self, Write};
use std::sync::Arc;

use super::{Assignment, ParseTierError};
use crate::gpu::{COMPUTE_SLICES, Model, ModelRef, Placement, Profile, Usage};

/// How capacity is bought; it decides price and whether it can be taken
/// back (spot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Tier {
    /// Owned or reserved hardware: the default.
    #[default]
    Reserved,
    OnDemand,
    Spot,
}

impl Tier {
    /// "reserved", "on-demand" or "spot".
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Reserved => "reserved",
            Tier::OnDemand => "on-demand",
            Tier::Spot => "spot",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reads a tier name; "" means reserved, the default for owned hardware.
pub fn parse_tier(s: &str) -> Result<Tier, ParseTierError> {
    match s {
        "" | "reserved" => Ok(Tier::Reserved),
        "on-demand" => Ok(Tier::OnDemand),
        "spot" => Ok(Tier::Spot),
        _ => Err(ParseTierError(s.to_string())),
    }
}

impl std::str::FromStr for Tier {
    type Err = ParseTierError;
    fn from_str(s: &str) -> Result<Tier, ParseTierError> {
        parse_tier(s)
    }
}

/// The label naming a node's network block. Training gangs prefer nodes
/// under one leaf switch, then one spine, then one block.
pub const LABEL_BLOCK: &str = "partita.dev/network-block";
/// The label naming a node's spine switch.
pub const LABEL_SPINE: &str = "partita.dev/network-spine";
/// The label naming a node's leaf switch.
pub const LABEL_LEAF: &str = "partita.dev/network-leaf";

/// Where a node sits in the network; "" where its labels do not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Topology {
    pub block: String,
    pub spine: String,
    pub leaf: String,
}

/// Reads the network position from a node's labels.
pub fn topology_from_labels(labels: &BTreeMap<String, String>) -> Topology {
    let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
    Topology {
        block: get(LABEL_BLOCK),
        spine: get(LABEL_SPINE),
        leaf: get(LABEL_LEAF),
    }
}

/// The `link` of a GPU that reaches its peers only over PCIe.
pub const NO_LINK: i32 = -1;

/// A task's share of a non-MIG GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub(super) task: Arc<str>,
    pub(super) milli: i32,
}

impl Hold {
    /// The task holding the share.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The share, in thousandths of the GPU.
    pub fn milli(&self) -> i32 {
        self.milli
    }
}

/// A MIG instance and the task on it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub(super) placement: Placement,
    pub(super) task: Option<Arc<str>>,
}

impl Slice {
    /// Where the instance is: its profile and start.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The instance's profile name.
    pub fn profile(&self) -> &str {
        &self.placement.profile
    }

    /// The instance's start memory slice.
    pub fn start(&self) -> i32 {
        self.placement.start
    }

    /// The task on the instance; none when it is free.
    pub fn task(&self) -> Option<&str> {
        self.task.as_deref()
    }

    /// Whether no task holds the instance.
    pub fn is_free(&self) -> bool {
        self.task.is_none()
    }
}

/// One physical GPU of a node. Without MIG it is shared in thousandths
/// (milli); with MIG it is split into instances. What is in use is kept
/// counted as it changes (`used`, the memory mask and compute of the
/// instances), so the getters below never walk a list they need not.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub(super) index: usize,
    pub(super) model: ModelRef,
    /// MIG mode is on: only MIG instances can be allocated.
    pub(super) mig: bool,
    pub(super) link: i32,
    /// A cordoned GPU takes no new work: a MIG change is in flight, or the
    /// GPU is being drained. What runs on it keeps running.
    pub(super) cordoned: bool,
    /// Milli held, without MIG.
    pub(super) used: i32,
    /// Who holds those milli.
    pub(super) holders: Vec<Hold>,
    pub(super) slices: Vec<Slice>,
    /// Memory slices taken by instances.
    pub(super) mem_mask: u8,
    /// Compute slices taken by instances.
    pub(super) compute: u8,
}

impl Gpu {
    pub(super) fn new(index: usize, model: ModelRef, mig: bool, link: i32) -> Gpu {
        Gpu {
            index,
            model,
            mig,
            link,
            cordoned: false,
            used: 0,
            holders: Vec::new(),
            slices: Vec::new(),
            mem_mask: 0,
            compute: 0,
        }
    }

    /// The GPU's position on its node.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The GPU's model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The handle on the GPU's model, to compare models by identity.
    pub fn model_ref(&self) -> &ModelRef {
        &self.model
    }

    /// Whether MIG mode is on: only MIG instances can be allocated.
    pub fn mig(&self) -> bool {
        self.mig
    }

    /// The NVLink/NVSwitch domain inside the node: GPUs with the same link
    /// talk over NVLink. `NO_LINK` for PCIe-only GPUs.
    pub fn link(&self) -> i32 {
        self.link
    }

    /// The milli left on a non-MIG GPU; a MIG GPU or a cordoned GPU has
    /// none to give as a share or a whole GPU.
    pub fn free(&self) -> i32 {
        if self.mig || self.cordoned {
            0
        } else {
            1000 - self.used
        }
    }

    /// Whether the GPU takes no new work.
    pub fn cordoned(&self) -> bool {
        self.cordoned
    }

    /// The milli held on a non-MIG GPU.
    pub fn used(&self) -> i32 {
        self.used
    }

    /// The tasks sharing a non-MIG GPU, in the order they came.
    pub fn holders(&self) -> &[Hold] {
        &self.holders
    }

    /// The MIG instances, free or in use.
    pub fn slices(&self) -> &[Slice] {
        &self.slices
    }

    /// The current MIG layout, as a new list.
    pub fn layout(&self) -> crate::gpu::Layout {
        let mut l = Vec::with_capacity(self.slices.len());
        self.append_layout(&mut l);
        crate::gpu::Layout(l)
    }

    /// Appends the GPU's instances to `l`: `layout` into a buffer the caller
    /// reuses (a busy week lists layouts by the million, each thrown away
    /// at once).
    pub fn append_layout(&self, l: &mut Vec<Placement>) {
        l.extend(self.slices.iter().map(|s| s.placement.clone()));
    }

    /// Whether nothing runs on the GPU.
    pub fn idle(&self) -> bool {
        self.used == 0 && self.slices.iter().all(Slice::is_free)
    }

    /// The memory slices (bit i for slice i) free for new instances; none
    /// on a cordoned GPU.
    pub fn free_memory_slices(&self) -> u8 {
        if self.cordoned { 0 } else { !self.mem_mask }
    }

    /// The compute slices free for new instances; none on a cordoned GPU.
    pub fn free_compute_slices(&self) -> i32 {
        if self.cordoned {
            0
        } else {
            COMPUTE_SLICES - i32::from(self.compute)
        }
    }

    /// The starts (bit s for start s) at which a new instance of `p` could
    /// be created beside the instances there: what
    /// `model().free_placements(&layout(), &p.name)` offers, from the
    /// counters and without building a list. Like that, it ignores the
    /// cordon.
    pub fn free_starts(&self, p: &Profile) -> u8 {
        let mut count = 0;
        let mut me = None;
        for (i, s) in self.slices.iter().enumerate() {
            if s.placement.profile == p.name {
                count += 1;
            }
            if me.is_none()
                && self
                    .model
                    .find(&s.placement.profile)
                    .is_some_and(|q| q.media_ext)
            {
                me = Some(i);
            }
        }
        let u = Usage {
            mask: self.mem_mask,
            compute: i32::from(self.compute),
            me,
        };
        u.free_starts(p, count)
    }

    /// The position of the instance at `p`, if there is one.
    pub(super) fn slice_at(&self, p: &Placement) -> Option<usize> {
        self.slices.iter().position(|s| s.placement == *p)
    }

    /// Derives the memory mask and compute in use from the instances.
    pub(super) fn recount(&mut self) {
        let (mut mask, mut compute) = (0u8, 0i32);
        for s in &self.slices {
            // The layout was validated; an unknown profile cannot be here.
            if let Some(p) = self.model.find(&s.placement.profile) {
                mask |= p.mask(s.placement.start);
                compute += p.compute;
            }
        }
        self.mem_mask = mask;
        self.compute = compute.clamp(0, i32::from(u8::MAX)) as u8;
    }
}

/// A node's fixed facts: shared, unchanged, by every copy of the node.
#[derive(Debug, Clone)]
pub(super) struct NodeInfo {
    pub(super) name: String,
    pub(super) cpu_milli: i64,
    pub(super) memory_mib: i64,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) tier: Tier,
    pub(super) topology: Topology,
    pub(super) rank: i64,
}

/// One machine: its fixed facts, its GPUs and what runs on it. What is in
/// use changes only through `State`, which keeps its invariants.
///
/// A node is copied whenever a change reaches one that another `State`
/// shares, so a copy must be cheap: the fixed facts are shared behind one
/// `Arc`, the tasks behind one each, and the GPUs' lists are short.
#[derive(Debug, Clone)]
pub struct Node {
    pub(super) info: Arc<NodeInfo>,
    pub(super) gpus: Vec<Gpu>,
    pub(super) cpu_used: i64,
    pub(super) mem_used: i64,
    pub(super) tasks: Vec<Arc<Assignment>>,
    pub(super) generation: u64,
}

impl Node {
    pub fn name(&self) -> &str {
        &self.info.name
    }

    pub fn cpu_milli(&self) -> i64 {
        self.info.cpu_milli
    }

    pub fn memory_mib(&self) -> i64 {
        self.info.memory_mib
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.info.labels
    }

    pub fn tier(&self) -> Tier {
        self.info.tier
    }

    pub fn topology(&self) -> &Topology {
        &self.info.topology
    }

    /// Breaks ties between equally good nodes: lower wins, and among equal
    /// ranks the earlier node. Left at 0 it makes ties go by position.
    pub fn rank(&self) -> i64 {
        self.info.rank
    }

    /// Sets the tie-break rank, before the node joins a `State`. Worlds set
    /// it (the fill simulator does, from a seeded permutation, as the FGD
    /// protocol does).
    pub fn set_rank(&mut self, rank: i64) {
        Arc::make_mut(&mut self.info).rank = rank;
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    pub fn cpu_free(&self) -> i64 {
        self.info.cpu_milli - self.cpu_used
    }

    pub fn mem_free(&self) -> i64 {
        self.info.memory_mib - self.mem_used
    }

    pub fn cpu_used(&self) -> i64 {
        self.cpu_used
    }

    pub fn mem_used(&self) -> i64 {
        self.mem_used
    }

    /// What runs on the node, in the order it started.
    pub fn tasks(&self) -> &[Arc<Assignment>] {
        &self.tasks
    }

    /// The assignment of the named task on this node.
    pub fn task(&self, name: &str) -> Option<&Assignment> {
        self.tasks.iter().find(|a| a.task == name).map(|a| &**a)
    }

    /// Go's `Gen` (`gen` is a keyword in Rust 2024): changes whenever the
    /// node's allocations, layouts or cordons change. Two nodes of States
    /// with the same node set (see `State::node_set`) and the same
    /// generation have the same contents; a cache keyed by the generation
    /// must also key on the node set, since States built apart number their
    /// changes apart.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The milli left on the node's non-MIG GPUs.
    pub fn gpu_free_milli(&self) -> i32 {
        self.gpus.iter().map(Gpu::free).sum()
    }

    /// The non-MIG, uncordoned GPUs with nothing on them.
    pub fn fully_free_gpus(&self) -> i32 {
        self.gpus
            .iter()
            .filter(|g| !g.mig && !g.cordoned && g.used == 0)
            .count() as i32
    }

    /// The model of the node's GPUs (nodes are homogeneous in practice;
    /// the first GPU decides), or none for a CPU-only node.
    pub fn model(&self) -> Option<&Model> {
        self.gpus.first().map(Gpu::model)
    }

    /// The handle on the node's model, to compare models by identity.
    pub fn model_ref(&self) -> Option<&ModelRef> {
        self.gpus.first().map(Gpu::model_ref)
    }

    /// The node's GPUs and what runs on them, one line per GPU: the
    /// canonical text form tests compare and the demo prints.
    pub fn describe(&self) -> String {
        let mut b = String::new();
        let _ = writeln!(
            b,
            "{} cpu {}/{}m mem {}/{} MiB",
            self.name(),
            self.cpu_used,
            self.cpu_milli(),
            self.mem_used,
            self.memory_mib()
        );
        for g in &self.gpus {
            let _ = write!(b, "  gpu{} {}", g.index, g.model.name);
            if g.cordoned {
                b.push_str(" cordoned");
            }
            if g.mig {
                b.push_str(" mig");
                for s in &g.slices {
                    let _ = write!(b, " [{} {}]", s.placement, s.task().unwrap_or("-"));
                }
            } else {
                let _ = write!(b, " {}/1000", g.used);
                for h in &g.holders {
                    let _ = write!(b, " [{} {}]", h.task, h.milli);
                }
            }
            b.push('\n');
        }
        b
    }
}
