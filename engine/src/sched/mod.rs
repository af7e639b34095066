//! The scheduling cycle: which pending jobs start, in what order, within
//! which quotas, which running jobs are preempted or moved for them, and
//! which free MIG regions are re-partitioned. Placement itself is the
//! placer's (`crate::placement`); the scheduler decides what to ask it.
//!
//! Like the rest of the engine it is pure: a `Scheduler` takes an `Input`
//! (the world's snapshot and the time) and returns a `Decision` for the
//! world to carry out. It keeps a little state between cycles (who was
//! promised the resources of preempted jobs, which gang holds a
//! reservation, when each GPU was last re-partitioned), all of it
//! deterministic.
//!
//! One cycle (`cycle.rs`) reads like the design's picture:
//!
//! ```text
//! snapshot (snapshot.rs, incremental.rs)
//!   -> order the pending jobs (order.rs)
//!   -> for each job (cycle.rs: consider):
//!        quota (quota.rs), production reserve (prod_reserve.rs)
//!        place, all of a gang at once, outside others' reservations
//!          (place.rs, reserve.rs)
//!        or else: re-partition MIG (mig.rs), evict victims (preempt.rs,
//!          victims.rs), move services (moves.rs), reserve nodes for a
//!          gang (reserve.rs)
//!   -> warm pool (warm.rs)
//!   -> the decision
//! ```
//!
//! Ported from the Go build's `internal/engine/sched`, decision for
//! decision; the Go names are kept in snake case so that a reader can map
//! one onto the other.

mod build;
mod config;
mod cycle;
mod incremental;
mod mig;
mod moves;
mod order;
mod place;
mod preempt;
mod prod_reserve;
mod quota;
mod reserve;
mod snapshot;
mod table;
mod types;
mod victims;
mod warm;

#[cfg(test)]
mod tests;

use rustc_hash::FxBuildHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use build::{build, shapes_of};
pub use config::{Config, Order, SchedError, preset};
pub use incremental::KeptError;
pub(crate) use types::READ_AHEAD;
pub use types::{
    Decision, HOUR, INVALID_SPEC, Input, Job, MINUTE, Migration, Nanos, Phase, Preemption,
    Reconfig, Retry, SECOND, Start, Team, Wait, WaitReason, Waiting,
};

use crate::cluster::NodeSet;
use crate::placement::{Placer, Policy};
use crate::random::Rand;
use crate::workload::Capacity;
use incremental::Kept;
use moves::MoveRef;
use order::OrderBuffers;
use reserve::Reservation;
use table::Table;
use warm::WarmKey;

/// Runs cycles for one configuration, keeping what it must remember from
/// one cycle to the next. Maps that are iterated are ordered (`BTreeMap`);
/// the rest are only looked up.
pub struct Scheduler {
    cfg: Config,
    placer: Placer,
    /// The jobs met, by ID (the Go build's `byID` and its maps keyed by
    /// job ID).
    table: Table,
    /// Maps a job to the victims preempted for it; while any is still
    /// terminating the job waits instead of preempting again. These three
    /// maps are asked about every pending job each cycle, so they hash;
    /// nothing that walks them depends on their order (each entry is
    /// settled on its own, sums and unions).
    promised: HashMap<String, Vec<String>, FxBuildHasher>,
    /// The nodes each promised job will use.
    promised_nodes: HashMap<String, BTreeSet<String>, FxBuildHasher>,
    /// Maps a job to the old places of the replicas moved for it.
    moving: HashMap<String, Vec<MoveRef>, FxBuildHasher>,
    /// The gang holding nodes, if any.
    reservation: Option<Reservation>,
    /// When each GPU was last re-partitioned, by node name and GPU index.
    last_change: HashMap<String, Vec<Option<Nanos>>, FxBuildHasher>,
    /// Maps a team to the gang holding its quota (`hold_quota`).
    quota_hold: BTreeMap<String, String>,
    /// When production work started on each MIG profile, for the warm
    /// pool, and when it last ran.
    recent: BTreeMap<WarmKey, Vec<Nanos>>,
    last_warm: Nanos,
    cycles: u64,
    /// The last job `shape` answered for this cycle (its address, its
    /// first task's, the cycle) and the answer.
    last_shape: (usize, Option<usize>, u64, table::Shape),
    /// The cycle of the last recount: an entry seen since is of a job of
    /// the input, unless the job was gone since. `kept` holds the sums an
    /// incremental input updates.
    live_from: u64,
    kept: Kept,
    /// No move search for borrowed work before then (one that failed holds
    /// off the next).
    borrower_moves_at: Nanos,
    /// No victim search before then for every job of a preempt key.
    no_victims_until: BTreeMap<u32, Nanos>,
    /// Numbers the memo and search keys: a map keyed by number is cheaper
    /// than one keyed by the key, which is hashed at every look-up, for
    /// each queued job, every cycle.
    key_ids: HashMap<String, u32, FxBuildHasher>,
    next_key: u32,
    /// The cluster's capacity for validating jobs, for one node set.
    capacity: Option<(Arc<NodeSet>, Capacity)>,
    /// The order's arrays, reused from cycle to cycle.
    order_buffers: OrderBuffers,
}

impl Scheduler {
    /// A scheduler with `cfg`, placing with `placement`. `rng` is its only
    /// source of randomness (the placement policy's; the scheduler itself
    /// never draws).
    pub fn new(cfg: Config, placement: Policy, rng: Rand) -> Scheduler {
        let mut placer = Placer::new(placement, rng);
        placer.set_headroom(cfg.headroom);
        placer.set_mig_only(cfg.mig);
        placer.set_brief_failures(true); // a cycle only asks whether a job fits
        Scheduler {
            cfg,
            placer,
            table: Table::new(),
            promised: HashMap::default(),
            promised_nodes: HashMap::default(),
            moving: HashMap::default(),
            reservation: None,
            last_change: HashMap::default(),
            quota_hold: BTreeMap::new(),
            recent: BTreeMap::new(),
            last_warm: 0,
            cycles: 0,
            last_shape: (0, None, 0, table::Shape::default()),
            live_from: 0,
            kept: Kept::default(),
            borrower_moves_at: 0,
            no_victims_until: BTreeMap::new(),
            key_ids: HashMap::default(),
            next_key: 0,
            capacity: None,
            order_buffers: OrderBuffers::default(),
        }
    }

    /// The scheduler's configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
}
