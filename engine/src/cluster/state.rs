use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::{ClusterError, Node};
use crate::gpu::Placement;

/// One GPU's part of an assignment: a share or whole GPU (`milli`, without
/// MIG) or one MIG instance (`slice`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The GPU's index on the node. Signed, as a grant read from outside
    /// may name any number; `State::allocate` refuses one the node lacks.
    pub gpu: i32,
    /// 1..1000 on a non-MIG GPU.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub milli: i32,
    /// A MIG instance; created if it does not exist yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice: Option<Placement>,
}

fn is_zero(x: &i32) -> bool {
    *x == 0
}

impl Grant {
    /// `milli` thousandths of GPU `gpu`.
    pub fn share(gpu: i32, milli: i32) -> Grant {
        Grant {
            gpu,
            milli,
            slice: None,
        }
    }

    /// The whole of GPU `gpu`.
    pub fn whole(gpu: i32) -> Grant {
        Grant::share(gpu, 1000)
    }

    /// The MIG instance at `slice` on GPU `gpu`.
    pub fn instance(gpu: i32, slice: Placement) -> Grant {
        Grant {
            gpu,
            milli: 0,
            slice: Some(slice),
        }
    }
}

/// What one task holds on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub task: String,
    pub node: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
}

impl Assignment {
    /// The GPU the assignment holds on `n` in milli; a MIG instance counts
    /// as its compute share of the GPU (3g = 3/7, rounded down).
    pub fn gpu_milli(&self, n: &Node) -> i32 {
        let mut total = 0;
        for g in &self.grants {
            let Some(slice) = &g.slice else {
                total += g.milli;
                continue;
            };
            let gpu = usize::try_from(g.gpu).ok().and_then(|i| n.gpus.get(i));
            if let Some(p) = gpu.and_then(|d| d.model.find(&slice.profile).filter(|_| d.model.mig))
            {
                total += p.compute * 1000 / 7;
            }
        }
        total
    }
}

/// A set of nodes and their fixed properties (names, CPU, memory, GPU
/// models). The clones of a `State` share it; a `State` built by
/// `State::new` gets its own. Caches of facts that only these decide key
/// on it (compare with `Arc::ptr_eq`; holding the `Arc` keeps the identity
/// from being reused).
///
/// It also numbers the changes of its States: every change of any State of
/// the set takes the next number, so a node's `generation` and a State's
/// `version` are unique among the States of one set.
///
/// Why a counter per set and not one for the whole process, as the Go
/// build has: the engine keeps no global mutable state, so that nothing a
/// run does depends on what ran before it in the same process. Equal
/// numbers still mean equal contents among the States that share a set,
/// which are the only ones a cache can confuse once it also keys on the
/// set (the Go build's caches key on the number alone: ported, they must
/// key on both).
pub struct NodeSet {
    /// Node name -> position. Only looked up, never iterated.
    index: FxHashMap<String, usize>,
    changes: AtomicU64,
}

impl NodeSet {
    /// The next change number of the set: 1, 2, 3, ... Relaxed ordering
    /// suffices: the numbers need only be distinct and increasing.
    fn next(&self) -> u64 {
        self.changes.fetch_add(1, Ordering::Relaxed) + 1
    }
}

impl fmt::Debug for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeSet({} nodes)", self.index.len())
    }
}

/// The cluster: its nodes and what runs on them.
///
/// It changes only through `allocate`, `release` and the MIG and cordon
/// methods, which keep its invariants: no GPU or MIG instance is
/// over-allocated, CPU and memory in use never exceed a node's capacity or
/// go negative, every MIG layout is valid. On a refusal nothing changes.
///
/// `clone` is cheap, so the engine can try a plan on a copy and throw it
/// away: nodes are shared (`Arc`) between a State and its copies, and a
/// node is copied only when a State that shares it changes it. The handles
/// themselves are kept in chunks of `CHUNK`, shared the same way, so that a
/// copy of a 1,213-node cluster costs 19 reference counts rather than
/// 1,213, and a change to one node copies one chunk of handles. Each
/// handle has the node's generation beside it, so a pass that only asks
/// which nodes changed (a verdict cache) reads one array and no node.
#[derive(Debug, Clone)]
pub struct State {
    pub(super) chunks: Vec<Arc<[Slot]>>,
    len: usize,
    pub(super) set: Arc<NodeSet>,
    /// Changes on every change of the State; equal versions in States of
    /// one node set mean equal contents (a clone starts with its
    /// original's).
    pub(super) version: u64,
}

/// How many node handles share one reference count; a power of two, so
/// that finding a node's chunk is a shift.
const CHUNK: usize = 64;

/// A node and its generation (kept equal to `Node::generation`).
#[derive(Debug, Clone)]
pub(super) struct Slot {
    generation: u64,
    pub(super) node: Arc<Node>,
}

impl State {
    /// Builds a State from nodes, checking that names are unique, GPU
    /// indexes match positions and MIG layouts are valid.
    pub fn new(mut nodes: Vec<Node>) -> Result<State, ClusterError> {
        let mut index = FxHashMap::with_capacity_and_hasher(nodes.len(), Default::default());
        for (i, n) in nodes.iter_mut().enumerate() {
            if n.name().is_empty() {
                return Err(ClusterError::EmptyNodeName { index: i });
            }
            if index.contains_key(n.name()) {
                return Err(ClusterError::DuplicateNode {
                    node: n.name().to_string(),
                });
            }
            if n.cpu_milli() < 0 || n.memory_mib() < 0 {
                return Err(ClusterError::NegativeCapacity {
                    node: n.name().to_string(),
                });
            }
            let name = n.name().to_string();
            for (j, g) in n.gpus.iter_mut().enumerate() {
                if g.index != j {
                    return Err(ClusterError::GpuIndex {
                        node: name,
                        position: j,
                        index: g.index,
                    });
                }
                if g.mig && !g.model.mig {
                    return Err(ClusterError::GpuWithoutMig {
                        node: name,
                        index: j,
                        model: g.model.name.clone(),
                    });
                }
                if !g.slices.is_empty() {
                    g.model
                        .validate(&g.layout())
                        .map_err(|source| ClusterError::BadLayout {
                            node: name.clone(),
                            index: j,
                            source: Box::new(source),
                        })?;
                }
                g.recount();
            }
            index.insert(name, i);
        }
        let set = Arc::new(NodeSet {
            index,
            changes: AtomicU64::new(0),
        });
        let len = nodes.len();
        let mut slots = nodes.into_iter().map(|mut n| {
            n.generation = set.next();
            Slot {
                generation: n.generation,
                node: Arc::new(n),
            }
        });
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK));
        for _ in 0..len.div_ceil(CHUNK) {
            chunks.push(slots.by_ref().take(CHUNK).collect());
        }
        let version = set.next();
        Ok(State {
            chunks,
            len,
            set,
            version,
        })
    }

    /// A copy for use only while `self` does not change, such as a
    /// scheduling cycle's plan over its world's state. In the Go build it
    /// differs from a clone in who copies a shared node first; here the
    /// reference counts say exactly when a node is shared, so it is a
    /// clone: once the copy is dropped, `self`'s next changes copy no node.
    pub fn scratch(&self) -> State {
        self.clone()
    }

    /// Identifies the State's contents; see the field's comment.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The State's node set; see `NodeSet`.
    pub fn node_set(&self) -> &Arc<NodeSet> {
        &self.set
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the State has no node.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Node `i`.
    pub fn node(&self, i: usize) -> &Node {
        &self.slot(i).node
    }

    /// Node `i`'s generation, `node(i).generation()` read without reaching
    /// the node: for passes over every node that only ask which changed.
    pub fn generation(&self, i: usize) -> u64 {
        self.slot(i).generation
    }

    /// Calls `f(i, generation(i))` for every node in order, chunk by chunk:
    /// a pass over every node asking which changed. (A loop inside, rather
    /// than an iterator of the chunks flattened, which did not compile to
    /// one: the pass took a tenth of a placement.)
    pub fn for_each_generation(&self, mut f: impl FnMut(usize, u64)) {
        let mut i = 0;
        for chunk in &self.chunks {
            for slot in chunk.iter() {
                f(i, slot.generation);
                i += 1;
            }
        }
    }

    /// Every node, in order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.chunks.iter().flat_map(|c| c.iter().map(|s| &*s.node))
    }

    pub(super) fn slot(&self, i: usize) -> &Slot {
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    /// The position of the named node.
    pub fn lookup(&self, name: &str) -> Option<usize> {
        self.set.index.get(name).copied()
    }

    /// The named node.
    pub fn node_by_name(&self, name: &str) -> Option<&Node> {
        self.lookup(name).map(|i| self.node(i))
    }

    /// Node `i` to change, copied first (with its chunk of handles) if
    /// another State shares it; the State and the node get new numbers.
    pub(super) fn mutable(&mut self, i: usize) -> &mut Node {
        self.version = self.set.next();
        let generation = self.set.next();
        let chunk = &mut self.chunks[i / CHUNK];
        if Arc::get_mut(chunk).is_none() {
            *chunk = chunk.iter().cloned().collect();
        }
        let slots = Arc::get_mut(chunk).expect("a chunk just copied has no other owner");
        let slot = &mut slots[i % CHUNK];
        slot.generation = generation;
        let n = Arc::make_mut(&mut slot.node);
        n.generation = generation;
        n
    }

    pub(super) fn find(&self, name: &str) -> Result<usize, ClusterError> {
        self.lookup(name).ok_or_else(|| ClusterError::UnknownNode {
            node: name.to_string(),
        })
    }
}
