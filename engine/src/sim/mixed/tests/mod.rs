//! Tests of the mixed world, ported from the Go build's
//! `internal/sim/mixed/*_test.go`: the metrics' pieces with hand-built
//! inputs, the summary and the report, and whole runs of the scenarios of
//! `go/internal/sim/mixed/testdata` and `scenarios/` under `Options::check`
//! (the invariants after every cycle).

mod incremental;
mod metrics;
mod property;
mod random;
mod report;
mod summary;

use std::path::Path;

use super::world::World;
use super::{Options, RunResult, Setup};
use crate::scenario::{self, Scenario, go_open_error};

/// The scenario at `rel`, a path from the repository's root.
pub(super) fn load(rel: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    scenario::parse(data, &path.to_string_lossy()).unwrap_or_else(|e| panic!("{e}"))
}

/// A testdata scenario of the Go build's mixed package.
pub(super) fn testdata(name: &str) -> Scenario {
    load(&format!("go/internal/sim/mixed/testdata/{name}"))
}

/// The text of a trace file a scenario names.
pub(super) fn read_file(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| go_open_error(path, &e))
}

/// A world of `sc` under `opt`, not yet run.
pub(super) fn world_of(sc: &Scenario, opt: &Options) -> World<'static> {
    let setup = Setup::of(sc, opt.seed, &mut read_file).unwrap_or_else(|e| panic!("{e}"));
    World::new(setup, &opt.with_defaults(), None).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `sc` under `opt` and returns the world too, for its jobs.
pub(super) fn run_world_with(sc: &Scenario, opt: &Options) -> (RunResult, World<'static>) {
    let mut w = world_of(sc, opt);
    if let Err(e) = w.run_loop() {
        panic!(
            "{} under {}, seed {}: {e}",
            sc.name, opt.scheduler, opt.seed
        );
    }
    (w.result(), w)
}

/// Runs `sc` with `scheduler` on the scenario's seed, checking the
/// invariants after every cycle.
pub(super) fn run_world(sc: &Scenario, scheduler: &str) -> (RunResult, World<'static>) {
    run_world_with(sc, &checked(scheduler, sc.seed))
}

/// The options of a checked run.
pub(super) fn checked(scheduler: &str, seed: i64) -> Options {
    Options {
        scheduler: scheduler.to_string(),
        seed,
        check: true,
        ..Options::default()
    }
}

/// The job `id` of `w`.
pub(super) fn job<'w>(w: &'w World<'_>, id: &str) -> &'w super::world::WJob {
    let j = *w.by_id.get(id).unwrap_or_else(|| panic!("no job {id}"));
    &w.jobs[j]
}
