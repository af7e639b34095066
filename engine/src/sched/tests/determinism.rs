//! Property tests over many small random worlds (Go's
//! `determinism_test.go`): a scheduler is a pure function of its inputs
//! and its seed, it never changes what it is given, and every decision
//! applies cleanly to the world it was made for; and, as proptest
//! properties over larger worlds, the invariants every decision keeps (no
//! GPU over-allocated, quotas held, a gang all or nothing).

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::helpers::{Decided, World, describe};
use super::random_world::{RandomScenario, pending_ids};
use crate::cluster::Assignment;
use crate::random::Rand;
use crate::sched::{Input, Job, Phase};

/// What the world's jobs are, deeply, to see whether a cycle changed them
/// (the scheduler's mark aside: it is the scheduler's, not the world's).
fn snapshot_jobs(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .map(|j| {
            format!(
                "{:?} {:?} {:?} {} {} {} {}",
                j.spec, j.phase, j.placed, j.started, j.checkpoint, j.estimate, j.submitted
            )
        })
        .collect()
}

fn generations(w: &World) -> Vec<u64> {
    (0..w.st.len()).map(|i| w.st.generation(i)).collect()
}

#[test]
fn same_inputs_and_seed_give_the_same_decisions() {
    for seed in 1..=150i64 {
        let mut rng = Rand::new(seed);
        let mut sc = RandomScenario::new(&mut rng);
        let preset = ["naive", "gang-drf", "partita"][(seed % 3) as usize];
        let (mut a, mut b) = (sc.world(preset, seed), sc.world(preset, seed));
        for cycle in 0..12 {
            let (da, db) = (a.cycle(), b.cycle());
            assert_eq!(
                da, db,
                "seed {seed} ({preset}), cycle {cycle}: two schedulers with the same seed decided differently"
            );
            sc.step(&mut rng, &mut [&mut a, &mut b]);
        }
    }
}

#[test]
fn cycle_changes_neither_the_cluster_nor_the_jobs() {
    for seed in 1..=150i64 {
        let mut rng = Rand::new(seed);
        let mut sc = RandomScenario::new(&mut rng);
        let preset = ["naive", "gang-drf", "partita"][(seed % 3) as usize];
        let mut w = sc.world(preset, seed);
        for cycle in 0..12 {
            let (before, gens_before, jobs_before) =
                (describe(&w.st), generations(&w), snapshot_jobs(&w.jobs));
            let only: Option<Vec<String>> = if cycle % 3 == 2 && !w.jobs.is_empty() {
                Some(vec![w.jobs[rng.below(w.jobs.len())].id().to_string()])
            } else {
                None
            };
            let pending = pending_ids(&w);
            let d = w.decide_only(only.as_deref());
            let at = format!("seed {seed} ({preset}), cycle {cycle}");
            assert_eq!(
                describe(&w.st),
                before,
                "{at}: the cycle changed the cluster it was given"
            );
            assert_eq!(
                generations(&w),
                gens_before,
                "{at}: the cycle touched nodes of the cluster it was given"
            );
            assert_eq!(
                snapshot_jobs(&w.jobs),
                jobs_before,
                "{at}: the cycle changed the jobs it was given"
            );
            w.apply(&d); // fails the test if the decision does not apply cleanly
            check_decision(&w, &d, &pending, only.is_none(), &at);
            sc.step(&mut rng, &mut [&mut w]);
        }
    }
}

/// What every decision must satisfy once applied. `pending` lists the
/// jobs pending before the cycle, `full` whether it was a full cycle.
fn check_decision(w: &World, d: &Decided, pending: &[String], full: bool, at: &str) {
    let cfg = w.sch.config();
    let started: BTreeSet<&str> = d.starts.iter().map(|s| s.job.as_str()).collect();
    for id in pending {
        let wt = d.waiting.get(id.as_str());
        if full && !started.contains(id.as_str()) {
            assert!(
                wt.is_some_and(|w| w.position >= 1),
                "{at}: pending {id} neither started nor waiting with a position ({wt:?})"
            );
        }
        if wt.is_some() && started.contains(id.as_str()) && cfg.gangs {
            assert!(
                !w.job(id).spec.is_gang(),
                "{at}: gang {id} both started and waits"
            );
        }
        if !full && let Some(wt) = wt {
            assert_eq!(wt.position, 0, "{at}: a light cycle gave {id} a position");
        }
    }
    for j in &w.jobs {
        let placed = j.placed.iter().flatten().count();
        if cfg.gangs && j.spec.is_gang() {
            assert!(
                placed == 0 || placed == j.placed.len(),
                "{at}: gang {} partly placed ({placed} of {})",
                j.id(),
                j.placed.len()
            );
        }
    }
    let mut seen = BTreeSet::new();
    for p in &d.preemptions {
        assert!(
            seen.insert(p.job.as_str()),
            "{at}: {} preempted twice in one decision",
            p.job
        );
        assert!(
            !started.contains(p.job.as_str()),
            "{at}: {} both started and preempted",
            p.job
        );
    }
}

/// What each team holds, in GPU milli, as the Go build's mixed world
/// checks it: a MIG slice counts its compute share (quotas count it so),
/// a share its milli.
fn held_by_team(w: &World, team: &str) -> i64 {
    w.jobs
        .iter()
        .filter(|j| j.spec.team == team)
        .map(|j| j.held(&w.st))
        .sum()
}

/// Runs a preset over a random world for some cycles and checks, after
/// every decision, the invariants of `check_decision` and: the cluster's
/// own (no GPU or MIG instance over-allocated, no CPU or memory beyond a
/// node's, every layout valid: the world's `apply` checks them), no team
/// above its limit (its burst, its guarantee without borrowing; a memory
/// profile counts its nominal share in the quota and its instance's
/// compute here: the Go build's mixed world allows that rounding), and
/// incremental inputs keeping the sums a recount makes.
fn invariants_hold(seed: i64, preset: &str, cycles: usize) {
    let mut rng = Rand::new(seed);
    let mut sc = RandomScenario::new(&mut rng);
    let mut w = sc.world(preset, seed);
    for cycle in 0..cycles {
        let pending = pending_ids(&w);
        let d = w.decide();
        w.apply(&d);
        let at = format!("seed {seed} ({preset}), cycle {cycle}");
        check_decision(&w, &d, &pending, true, &at);
        let cfg = w.sch.config().clone();
        for t in &w.teams {
            let limit = if cfg.borrow {
                t.burst.max(t.guarantee)
            } else {
                t.guarantee
            };
            let held = held_by_team(&w, &t.name);
            assert!(
                held <= limit + limit / 5 + 1000,
                "{at}: team {} holds {held} milli, above its limit {limit}",
                t.name
            );
        }
        for j in &w.jobs {
            if j.phase == Phase::Running {
                assert!(
                    j.complete() || !cfg.gangs || !j.spec.is_gang(),
                    "{at}: {} runs partly placed",
                    j.id()
                );
            }
        }
        sc.step(&mut rng, &mut [&mut w]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_decision_keeps_the_invariants(seed in 1i64..1_000_000, preset in 0usize..3) {
        invariants_hold(seed, ["naive", "gang-drf", "partita"][preset], 16);
    }

    /// An incremental input (every change listed) decides as a full one,
    /// and its sums stay those of a recount.
    #[test]
    fn incremental_inputs_decide_as_full_ones(seed in 1i64..1_000_000) {
        let mut rng = Rand::new(seed);
        let mut sc = RandomScenario::new(&mut rng);
        let preset = ["naive", "gang-drf", "partita"][(seed % 3) as usize];
        let mut full = sc.world(preset, seed);
        let mut inc = sc.world(preset, seed);
        let mut prev: Vec<(String, State)> = Vec::new();
        for cycle in 0..12 {
            let df = full.cycle();
            let di = {
                let refs: Vec<&Job> = inc.jobs.iter().collect();
                let now: Vec<(String, State)> = refs.iter().map(|j| (j.id().to_string(), State::of(j))).collect();
                let changed: Vec<&Job> = refs
                    .iter()
                    .copied()
                    .filter(|j| !prev.iter().any(|(id, s)| id == j.id() && s.same(j)))
                    .collect();
                let gone: Vec<&Job> = prev
                    .iter()
                    .filter(|(id, _)| !refs.iter().any(|j| j.id() == id))
                    .map(|(id, _)| inc.finished.iter().rev().find(|j| j.id() == id).expect("finished"))
                    .collect();
                let mut input = Input::new(inc.now, &inc.st, &inc.teams, &refs);
                input.incremental = true;
                input.changed = &changed;
                input.gone = &gone;
                let d = inc.sch.cycle(&mut input);
                inc.sch.check_kept(&input).unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: {e}"));
                prev = now;
                d
            };
            prop_assert_eq!(&df.decision, &di, "seed {} ({}), cycle {}", seed, preset, cycle);
            inc.apply(&di);
            sc.step(&mut rng, &mut [&mut full, &mut inc]);
        }
    }
}

/// A job's phase, placement (by identity: the `Arc`s are kept, so no
/// address is reused meanwhile) and times: what an incremental input must
/// list when it changes.
struct State {
    phase: Phase,
    placed: Vec<Option<Arc<Assignment>>>,
    times: (i64, i64, i64),
}

impl State {
    fn of(j: &Job) -> State {
        State {
            phase: j.phase,
            placed: j.placed.clone(),
            times: (j.started, j.estimate, j.submitted),
        }
    }

    fn same(&self, j: &Job) -> bool {
        self.phase == j.phase
            && self.times == (j.started, j.estimate, j.submitted)
            && self.placed.len() == j.placed.len()
            && self
                .placed
                .iter()
                .zip(&j.placed)
                .all(|(a, b)| match (a, b) {
                    (None, None) => true,
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    _ => false,
                })
    }
}
