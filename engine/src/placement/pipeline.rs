//! The placement pipeline for one task, in order:
//!
//!  1. Rewrite (optional): a policy may change what is asked (stock
//!     Kubernetes turns a 0.3-GPU share into one whole GPU).
//!  2. Filter: the shared `Fit` filter, then the policy's own filters. A
//!     node that fails any filter is out, with a `Reason`.
//!  3. Score: the policy rates each feasible node (higher wins) and may say
//!     which device it rated (a `Hint`).
//!  4. Select: the best score wins; ties go to the lower node rank, then
//!     to the earlier node. A policy may replace this step (random
//!     placement).
//!  5. Pick: the policy's picker turns the winner and its hint into grants:
//!     which GPUs, which share, which MIG instance.
//!
//! Stages are trait objects held by a `Policy`. Each trait requires `Send`:
//! a simulation may run each seed on its own thread with its own policy.
//! Stages that keep state between calls (an adjuster's per-placement
//! totals, a scorer's scratch buffers) get `&mut self`; filters and
//! rewriters, which only look, get `&self`.

use std::fmt;

use crate::cluster::{Grant, Node, State};
use crate::gpu::Placement;
use crate::random::Rand;

use super::Request;

/// Why a node was filtered out. Codes are few and fixed so that the
/// reasons of a thousand nodes can be counted without formatting a
/// thousand strings; `explain` gives the numbers for one node.
///
/// The variants are declared in the order of their names, so that the
/// derived order is the order of `as_str`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// Not enough CPU left.
    Cpu,
    /// Not enough free GPUs or share.
    Gpu,
    /// No MIG profile or share of the model holds the memory profile.
    TooSmall,
    /// No GPU of an allowed model.
    Model,
    /// Not enough memory left.
    Memory,
    /// The demand needs MIG (or no MIG) and the GPUs are the other way.
    MigOff,
    /// No free or creatable MIG instance of the profile.
    Mig,
    /// The node has no GPU.
    NoGpu,
    /// A policy's own filter said no.
    Policy,
}

impl Code {
    /// The code's name, as failures print it: "cpu", "gpu-model", ...
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Cpu => "cpu",
            Code::Gpu => "gpu",
            Code::TooSmall => "gpu-memory",
            Code::Model => "gpu-model",
            Code::Memory => "memory",
            Code::MigOff => "mig-off",
            Code::Mig => "mig-slice",
            Code::NoGpu => "no-gpu",
            Code::Policy => "policy",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A filter's verdict against one node: which filter and why. It is
/// `Copy` (the filter's name is a static string) so that the placer can
/// keep one per node in its cache without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reason {
    /// The name of the filter that said no.
    pub filter: &'static str,
    pub code: Code,
}

/// The device a scorer rated, so that the picker places the task where the
/// score was earned. A scorer that rated no device returns no hint
/// (`None`) rather than an empty one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The GPU's index on the node (the first one, for several).
    pub gpu: usize,
    /// The MIG instance, when the request takes one.
    pub slice: Option<Placement>,
}

impl Hint {
    /// A hint naming GPU `gpu`.
    pub fn on_gpu(gpu: usize) -> Hint {
        Hint { gpu, slice: None }
    }

    /// A hint naming the MIG instance `slice` of GPU `gpu`.
    pub fn on_slice(gpu: usize, slice: Placement) -> Hint {
        Hint {
            gpu,
            slice: Some(slice),
        }
    }
}

/// Rules nodes out (step 2).
pub trait Filter: Send {
    /// The filter's name, as its reasons carry it.
    fn name(&self) -> &'static str;

    /// `Ok` when the node may take the request, else why not. It must
    /// depend only on the node and the request: the placer caches its
    /// verdict until the node changes.
    fn filter(&self, n: &Node, r: &Request) -> Result<(), Reason>;
}

/// Rates a node that passed every filter (step 3).
pub trait Scorer: Send {
    /// The scorer's name.
    fn name(&self) -> &'static str;

    /// The node's score (higher is better; any `i64` range, documented by
    /// each scorer) and the device it rated, if any. Unless the policy is
    /// `volatile`, it must depend only on the node and the request: the
    /// placer caches it until the node changes. `&mut self` lets a scorer
    /// keep scratch buffers instead of allocating per node.
    fn score(&mut self, n: &Node, r: &Request) -> (i64, Option<Hint>);
}

/// Chooses devices on the winning node (step 5).
pub trait Picker: Send {
    /// The grants for `r` on `n`, following `hint` where there is one, or
    /// `None` when no device can take it. A CPU-only request gets an empty
    /// list.
    fn pick(
        &mut self,
        n: &Node,
        r: &Request,
        hint: Option<&Hint>,
        rng: &mut Rand,
    ) -> Option<Vec<Grant>>;
}

/// Replaces "best score, then lowest rank" (step 4).
pub trait Selector: Send {
    /// One of `feasible`, which holds node positions in State order and is
    /// never empty.
    fn select(&mut self, st: &State, feasible: &[usize], rng: &mut Rand) -> usize;
}

/// Changes a request before placement (step 1).
pub trait Rewriter: Send {
    /// The request to place instead of `r` (or `r` itself). A different
    /// request must be built with `Request::new`, so that its cache key
    /// matches what it asks.
    fn rewrite(&self, r: Request) -> Request;
}

/// Sees the whole snapshot once per placement and shifts the cached node
/// scores by what only the whole cluster shows (how scarce empty nodes
/// are, say). It runs outside the cache, on every feasible node of every
/// placement, so it must be cheap.
pub trait Adjuster: Send {
    /// Called once per placement that ranks nodes (not when a `Selector`
    /// chooses), before any `adjust`. A cache of cluster-wide facts keyed
    /// by `State::version` or `State::generation` must also key on
    /// `State::node_set`: change numbers are per node set.
    fn prepare(&mut self, st: &State, r: &Request);

    /// The score of node `n`, at position `i` of the State, given its
    /// cached `score` and `hint`.
    fn adjust(&mut self, i: usize, n: &Node, r: &Request, score: i64, hint: Option<&Hint>) -> i64;
}

/// A placement policy: a named set of pipeline stages.
#[derive(Default)]
pub struct Policy {
    /// What reports and errors call the policy.
    pub name: String,
    /// Optional.
    pub rewriter: Option<Box<dyn Rewriter>>,
    /// Run after the shared `Fit` filter, in order.
    pub filters: Vec<Box<dyn Filter>>,
    /// None: every node scores 0.
    pub scorer: Option<Box<dyn Scorer>>,
    /// None: `DefaultPicker`.
    pub picker: Option<Box<dyn Picker>>,
    /// Optional.
    pub selector: Option<Box<dyn Selector>>,
    /// Optional.
    pub adjuster: Option<Box<dyn Adjuster>>,
    /// Set when scores depend on more than the node and the request
    /// (cluster-wide state, randomness), which turns the cache off.
    pub volatile: bool,
}

impl Policy {
    /// A policy of no stages but the shared ones: every node that fits
    /// scores 0, so the lowest rank wins, and `DefaultPicker` picks.
    pub fn new(name: impl Into<String>) -> Policy {
        Policy {
            name: name.into(),
            ..Policy::default()
        }
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let filters: Vec<&str> = self.filters.iter().map(|x| x.name()).collect();
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("rewriter", &self.rewriter.is_some())
            .field("filters", &filters)
            .field("scorer", &self.scorer.as_ref().map(|s| s.name()))
            .field("picker", &self.picker.is_some())
            .field("selector", &self.selector.is_some())
            .field("adjuster", &self.adjuster.is_some())
            .field("volatile", &self.volatile)
            .finish()
    }
}
