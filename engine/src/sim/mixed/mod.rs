//! The mixed-workload world: a scenario's inference services and training
//! gangs arrive over a simulated week and the engine's scheduling cycle
//! (`crate::sched`) decides, as it would in the standalone server or on
//! Kubernetes. The world carries decisions out with the delays a real
//! cluster has: a MIG change takes `reconfig_delay`, a preempted job keeps
//! its resources for its grace period, a new MIG instance must be created
//! before its task starts. docs/metrics.md defines what it measures.
//!
//! Ported from the Go build's `internal/sim/mixed`, number for number: the
//! floats are summed in Go's order, percentiles are nearest-rank, time is
//! `i64` nanoseconds. Where Go iterates a map into an output (the `--trace`
//! "wait" lines) this world sorts; compare traces sorted.
//!
//! The engine runs one scheduler on one seed ([`run`]); running many seeds
//! on threads and writing the report files is the caller's (`partita bench
//! mixed`). What differs from the Go build on purpose: a metric with no
//! sample (`jain_fairness` without a sample, `jct_p50_s` without a
//! completed job, the owed-wait statistics without an owed wait) is
//! `None`, `null` in JSON, where the Go build printed 0 until 2026-12-05
//! (both builds now print `null`).

mod apply;
mod lists;
mod metrics;
mod report;
mod summary;
mod world;

#[cfg(test)]
mod tests;

use std::fmt;

use thiserror::Error;

use crate::cluster::{ClusterError, Node};
use crate::sched::{self, Nanos, SchedError, Team};

pub use crate::scenario::Arrival;
use crate::scenario::{self, Scenario, TraceFiles};

pub use metrics::{IDLE_NO_CYCLE, IDLE_NO_WORK, IDLE_TOO_BIG, RunResult, Sample, percentile};
pub use report::{report_md, teams_svg, utilization_svg};
pub use summary::{Summary, TARGET_JAIN, TARGET_PRODUCTION_P95, TARGET_USEFUL, summarize};

use crate::scenario::duration::{MINUTE, SECOND, format_duration};

/// The schedulers the benchmark compares (`sched::preset`).
pub const SCHEDULERS: [&str; 3] = ["naive", "gang-drf", "partita"];

/// Options of a run. `Options::default()` is the Go build's defaults; a
/// zero duration also means its default, as in Go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    /// naive, gang-drf or partita.
    pub scheduler: String,
    /// The job stream's seed; the scheduler's placement policy draws from
    /// a generator of the same seed.
    pub seed: i64,
    /// How long a MIG change takes (0: 30 s).
    pub reconfig_delay: Nanos,
    /// The longest the scheduler waits between cycles while jobs wait and
    /// nothing happens (time-based rules: reservations, cooldowns; 0: 60 s).
    pub cycle_every: Nanos,
    /// The utilization sampling period (0: 5 min).
    pub sample_every: Nanos,
    /// The least time between two full cycles: departures close together
    /// are handled by one (0: 5 s). Arrivals get a light cycle at once.
    pub coalesce: Nanos,
    /// When set, replaces the scenario's production reserve (GPUs partita
    /// keeps free of borrowed batch and best-effort work and borrowed
    /// production on whole GPUs; `sched::Config::production_reserve`).
    /// naive and gang-drf model systems without such a setting and ignore
    /// it.
    pub production_reserve_gpus: Option<f64>,
    /// Verify the invariants after every cycle (tests set it): the
    /// cluster's own, the world's lists, the scheduler's kept sums, no
    /// gang partly running under a gang scheduler, no team above its
    /// limit.
    pub check: bool,
    /// Give the scheduler every job each cycle instead of the list of
    /// changes (tests: the decisions must not differ).
    pub full_inputs: bool,
}

impl Options {
    /// The options with every zero duration replaced by its default.
    fn with_defaults(&self) -> Options {
        let mut o = self.clone();
        let default = |d: &mut Nanos, v: Nanos| {
            if *d == 0 {
                *d = v;
            }
        };
        default(&mut o.reconfig_delay, 30 * SECOND);
        default(&mut o.cycle_every, MINUTE);
        default(&mut o.sample_every, 5 * MINUTE);
        default(&mut o.coalesce, 5 * SECOND);
        o
    }
}

/// What a run is made of, as a scenario gives it: the cluster, the teams,
/// the horizon and the job stream of one seed.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The scenario's name, which the results carry.
    pub name: String,
    /// The simulated horizon.
    pub duration: Nanos,
    /// The scenario's production reserve in GPUs (partita only; the
    /// option replaces it).
    pub production_reserve_gpus: f64,
    /// The teams, their quantities in GPU milli.
    pub teams: Vec<Team>,
    pub nodes: Vec<Node>,
    /// In order of arrival.
    pub arrivals: Vec<Arrival>,
}

/// Why a run failed. The messages are the Go build's.
#[derive(Debug, Error)]
pub enum MixedError {
    #[error("{0}")]
    Scenario(#[from] scenario::Error),
    #[error("{0}")]
    Cluster(#[from] ClusterError),
    #[error("{0}")]
    Sched(#[from] SchedError),
    /// The scheduler's kept sums differ from a recount (`Options::check`).
    #[error("the scheduler's sums kept from the changes listed: {0}")]
    Kept(#[from] sched::KeptError),
    /// An invariant broken, or a decision the world cannot carry out.
    #[error("{0}")]
    World(String),
    /// An error while handling the event at `at`.
    #[error("at {}: {source}", format_duration(*.at))]
    At {
        at: Nanos,
        #[source]
        source: Box<MixedError>,
    },
}

impl MixedError {
    fn world(message: impl fmt::Display) -> MixedError {
        MixedError::World(message.to_string())
    }
}

impl Setup {
    /// The run of `sc` on `seed`'s job stream (`files` gives the text of
    /// the trace files its workloads name): its nodes, its teams with
    /// their quantities in GPU milli, its horizon.
    pub fn of(sc: &Scenario, seed: i64, files: &mut dyn TraceFiles) -> Result<Setup, MixedError> {
        let nodes = sc.nodes()?;
        let arrivals = sc.jobs(seed, files)?;
        let teams = sc
            .teams
            .iter()
            .map(|t| Team {
                name: t.name.clone(),
                guarantee: t.guaranteed_gpus * 1000,
                burst: t.burst_gpus * 1000,
                weight: t.weight,
            })
            .collect();
        Ok(Setup {
            name: sc.name.clone(),
            duration: sc.duration,
            production_reserve_gpus: sc.production_reserve_gpus as f64,
            teams,
            nodes,
            arrivals,
        })
    }
}

/// Simulates `sc` with one scheduler on the job stream of `opt.seed`
/// (`files` gives the text of the trace files its workloads name). With
/// `trace`, one line per decision carried out is written to it.
pub fn run(
    sc: &Scenario,
    opt: &Options,
    files: &mut dyn TraceFiles,
    trace: Option<&mut dyn fmt::Write>,
) -> Result<RunResult, MixedError> {
    run_setup(Setup::of(sc, opt.seed, files)?, opt, trace)
}

/// Simulates `setup` with one scheduler. With `trace`, one line per
/// decision carried out is written to it.
pub fn run_setup(
    setup: Setup,
    opt: &Options,
    trace: Option<&mut dyn fmt::Write>,
) -> Result<RunResult, MixedError> {
    let mut w = world::World::new(setup, &opt.with_defaults(), trace)?;
    w.run_loop()?;
    Ok(w.result())
}
