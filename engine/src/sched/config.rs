//! The scheduler's settings and the three presets the mixed benchmark
//! compares (Go's `config.go`). The placement policy is not part of
//! `Config` here: a `Policy` is a set of boxed stages, moved into the
//! scheduler's placer, while the settings stay readable and copyable.

use thiserror::Error;

use super::types::{MINUTE, Nanos, SECOND};
use crate::policies::PolicyError;

/// How pending jobs are ordered within a priority class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// By submission time, ignoring teams and classes (stock Kubernetes).
    #[default]
    Fifo,
    /// Teams below their guarantee first, then by GPU held over weight,
    /// then by submission time. GPU share rather than dominant resource
    /// because the GPU is what is scarce and what teams are promised; CPU
    /// and memory follow it.
    FairShare,
    /// Dominant-resource fairness over GPU, CPU and memory, weighted
    /// (Volcano's drf plugin).
    Drf,
}

/// What the scheduler does; `preset` builds the three compared in the
/// mixed benchmark. Each field's comment says why it exists; the numbers
/// quoted are the Go build's measurements (docs/mixed.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    /// A job's tasks start together or not at all. Without it tasks are
    /// placed one by one and hold what they got while the rest wait.
    pub gangs: bool,
    /// Higher priority classes are considered first.
    pub class_order: bool,
    pub order: Order,
    /// A team may hold more than its guarantee, up to its burst, when
    /// others leave capacity idle. Without it the guarantee is a fixed
    /// quota.
    pub borrow: bool,
    /// Higher classes and teams reclaiming their guarantee evict victims.
    pub preempt: bool,
    /// Best-effort work reclaiming its team's guarantee does not evict
    /// another team's production on MIG instances (on whole GPUs it may).
    /// Without it, research's experiments and search's services evicted
    /// each other hundreds of times a week.
    pub protect_production: bool,
    /// When not 0, how long that protection holds against a best-effort
    /// claim: once the claim has been within its team's guarantee this
    /// long, it may evict another team's borrowed production on MIG
    /// instances too. 15 s, the search backoff of a claim whose first
    /// search found nothing: its second may evict, and the claim still
    /// starts within the guarantee's 60 s + grace.
    pub protect_production_for: Nanos,
    /// Production replicas on MIG instances may be moved to another node
    /// (make before break) to give a whole-GPU claim a node. Only a world
    /// that carries `Decision::migrations` out may set it.
    pub migrate: bool,
    /// With `migrate`, replicas are moved (and victims evicted) to free a
    /// node also for work beyond its team's guarantee when every one of
    /// its tasks needs a whole node: MIG work spreads over the nodes until
    /// none is whole.
    pub move_for_whole_nodes: bool,
    /// Pending claims within their team's guarantee are considered before
    /// all other pending work, whatever its class.
    pub guarantee_first: bool,
    /// The grace period a preempted job gets to checkpoint and exit.
    pub grace: Nanos,
    /// Re-partition free regions of MIG-capable GPUs as demand shifts, and
    /// place memory profiles on MIG slices rather than shares.
    pub mig: bool,
    /// The least time between two changes of one GPU, so that a shifting
    /// mix does not make it thrash.
    pub reconfig_cooldown: Nanos,
    /// When not 0, replaces `reconfig_cooldown` for production within its
    /// team's guarantee re-partitioning a GPU for its instance: a service
    /// owed its slice waited up to 10 minutes for the one GPU with room to
    /// come out of its cooldown.
    pub claim_cooldown: Nanos,
    /// When not 0: a claim within its team's guarantee for this long whose
    /// move plan fails on a replica that finds no room evicts that
    /// replica's service instead, when it may evict it anyway. Moving is
    /// tried first since it loses nothing.
    pub evict_stuck_after: Nanos,
    /// When not 0: a claim that is not production, owed its team's
    /// guarantee for this long, may evict another team's production on
    /// whole GPUs that straddles that team's guarantee.
    pub reclaim_straddling_after: Nanos,
    /// When not 0: with `relocate`, a gang that a claim owed for this long
    /// relocates, and that finds no room elsewhere, is given room by
    /// evicting on other nodes work the claim may evict anyway.
    pub gang_room_after: Nanos,
    /// A gang that has waited `reserve_after` holds the nodes it will use;
    /// others may run there only if declared to end before it starts.
    pub reserve: bool,
    pub reserve_after: Nanos,
    /// With `migrate`, a claim's moves may also evict checkpointed one-task
    /// work of a lower class that it could not evict otherwise, when that
    /// work finds room elsewhere at once.
    pub relocate: bool,
    /// With `migrate`, a MIG task that cannot be moved (all but production
    /// replicas) is placed on a node that holds such tasks already, where
    /// one fits, so that claims for whole nodes find nodes to free.
    pub group_pinned: bool,
    /// GPU milli kept free of borrowed lower-class work and borrowed
    /// production on whole GPUs, so production starts without evicting
    /// anyone (0: none). It trades utilization for production latency.
    pub production_reserve: i64,
    /// The GPU memory a memory profile keeps above its peak.
    pub headroom: f64,
}

/// Why a scheduler cannot be built.
#[derive(Debug, Error)]
pub enum SchedError {
    #[error("unknown scheduler {} (known: naive, gang-drf, partita)", crate::quote::quote(.0))]
    UnknownScheduler(String),
    #[error("scheduler {name}: {source}")]
    Policy {
        name: String,
        #[source]
        source: PolicyError,
    },
}

impl Config {
    /// The settings every preset starts from: nothing on, a 30 s grace,
    /// 10 % memory headroom.
    fn base(name: &str) -> Config {
        Config {
            name: name.to_string(),
            gangs: false,
            class_order: false,
            order: Order::Fifo,
            borrow: false,
            preempt: false,
            protect_production: false,
            protect_production_for: 0,
            migrate: false,
            move_for_whole_nodes: false,
            guarantee_first: false,
            grace: 30 * SECOND,
            mig: false,
            reconfig_cooldown: 0,
            claim_cooldown: 0,
            evict_stuck_after: 0,
            reclaim_straddling_after: 0,
            gang_room_after: 0,
            reserve: false,
            reserve_after: 0,
            relocate: false,
            group_pinned: false,
            production_reserve: 0,
            headroom: 0.10,
        }
    }
}

/// The named configuration:
///   - `naive`: stock Kubernetes: whole GPUs as integers, MIG off, no
///     gangs, FIFO, fixed per-team quotas, no preemption;
///   - `gang-drf`: a batch scheduler in the style of Volcano: gangs, DRF,
///     borrowing with reclaim, priority preemption, whole GPUs, no MIG;
///   - `partita`: everything: right-sized MIG slices, dynamic MIG, gangs
///     with reservation, fair share with guarantees and burst, preemption,
///     moves.
///
/// The placement policy goes to `Scheduler::new` beside it: k8s-default
/// for naive and gang-drf, partita for partita (`build`).
pub fn preset(name: &str) -> Result<Config, SchedError> {
    let mut c = Config::base(name);
    match name {
        "naive" => c.order = Order::Fifo,
        "gang-drf" => {
            c.gangs = true;
            c.class_order = true;
            c.order = Order::Drf;
            c.borrow = true;
            c.preempt = true;
        }
        "partita" => {
            c.gangs = true;
            c.class_order = true;
            c.order = Order::FairShare;
            c.borrow = true;
            c.preempt = true;
            c.mig = true;
            c.reconfig_cooldown = 10 * MINUTE;
            c.claim_cooldown = MINUTE;
            c.protect_production = true;
            c.protect_production_for = 15 * SECOND;
            c.migrate = true;
            c.move_for_whole_nodes = true;
            c.relocate = true;
            c.evict_stuck_after = MINUTE;
            c.reclaim_straddling_after = 2 * MINUTE;
            c.gang_room_after = 2 * MINUTE;
            c.group_pinned = true;
            c.guarantee_first = true;
            c.reserve = true;
            c.reserve_after = 10 * MINUTE;
        }
        _ => return Err(SchedError::UnknownScheduler(name.to_string())),
    }
    Ok(c)
}
