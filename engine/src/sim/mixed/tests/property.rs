//! Whole runs (Go's property_test.go): the invariants after every cycle on
//! the shipped scenarios, and the testdata scenarios that each pin one
//! behaviour of the world or one metric.

use std::collections::BTreeMap;

use super::super::world::{REF_TICK, World};
use super::super::{IDLE_NO_WORK, IDLE_TOO_BIG, Options, RunResult, SCHEDULERS, summarize};
use super::{checked, job, load, run_world, run_world_with, testdata, world_of};
use crate::scenario::duration::{HOUR, MINUTE, SECOND, hours, seconds};
use crate::sched::{Migration, Phase, WaitReason};
use crate::sim::events::{Event, Kind};

/// The invariants hold after every cycle (`Options::check`) for every
/// scheduler on the shipped scenarios, over hours and two seeds: no gang
/// partly running under a gang scheduler, no team above its limit, the
/// cluster's own invariants, the world's lists, the scheduler's kept sums.
/// (The Go build runs a day; six hours keep a debug build's test quick.)
#[test]
fn invariants_hold_on_shipped_scenarios() {
    for file in ["default.yaml", "tight-guarantees.yaml", "demo.yaml"] {
        let mut sc = load(&format!("scenarios/{file}"));
        sc.duration = 6 * HOUR;
        for name in SCHEDULERS {
            for seed in [1, 2] {
                let (r, _) = run_world_with(&sc, &checked(name, seed));
                assert!(
                    r.completed > 0,
                    "{file}, {name}, seed {seed}: no job completed"
                );
            }
        }
    }
}

/// No OOM by construction for the schedulers that right-size or give whole
/// GPUs: every task gets at least its peak memory.
#[test]
fn no_scheduler_places_a_task_where_it_runs_out_of_memory() {
    let mut sc = load("scenarios/default.yaml");
    sc.duration = 12 * HOUR;
    for name in SCHEDULERS {
        let (r, _) = run_world_with(&sc, &checked(name, 1));
        assert_eq!(r.oom_events, 0, "{name}");
    }
}

/// A gang that needs the whole cluster starts although one-GPU jobs of
/// its own class keep arriving: after `reserve_after` it holds the nodes,
/// which drain as the running jobs end (30 min each).
#[test]
fn a_gang_is_not_starved_by_a_stream_of_small_jobs() {
    let sc = testdata("starve.yaml");
    let (r, w) = run_world(&sc, "partita");
    let big = job(&w, "big-000000");
    assert!(
        big.started,
        "the gang never started (waits: {:?})",
        r.wait_p95
    );
    // Bound: reserve_after (10 min) + the longest run on the reserved
    // nodes (30 min) + cycles and slack.
    assert!(
        big.first_run - big.job.submitted <= 50 * MINUTE,
        "the gang waited {} s",
        seconds(big.first_run - big.job.submitted)
    );
    assert!(
        r.completed >= 100,
        "only {} jobs completed; the small jobs were starved",
        r.completed
    );
}

/// Checks that every job of `team` started, each within `limit` of its
/// submission.
fn served_within(w: &World<'_>, team: &str, limit: i64) {
    for j in w.jobs.iter().filter(|j| j.job.spec.team == team) {
        assert!(j.started, "{} never started", j.id());
        let wait = j.first_run - j.job.submitted;
        assert!(
            wait <= limit,
            "{} waited {} s, more than {} s",
            j.id(),
            seconds(wait),
            seconds(limit)
        );
    }
}

/// Team a borrows the whole cluster; team b asks for its guarantee and
/// gets it within 60 s plus the victims' grace period.
#[test]
fn a_guarantee_is_reclaimed_within_the_window() {
    let sc = testdata("reclaim.yaml");
    let (r, w) = run_world(&sc, "partita");
    assert_eq!(r.guarantee_violation, 0.0, "guarantee violated");
    served_within(&w, "b", MINUTE + w.sch.config().grace);
    assert!(
        r.preemptions > 0,
        "nothing was preempted: the scenario does not test reclaim"
    );
    // The naive scheduler has fixed quotas: a never borrows.
    let (rn, _) = run_world(&sc, "naive");
    assert_eq!(rn.preemptions, 0, "naive preempted");
}

/// Same seed, same result; the simulator is deterministic.
#[test]
fn runs_are_deterministic() {
    let mut sc = load("scenarios/demo.yaml");
    sc.duration = 12 * HOUR;
    let opt = Options {
        scheduler: "partita".to_string(),
        seed: 7,
        ..Options::default()
    };
    let (a, _) = run_world_with(&sc, &opt);
    let (b, _) = run_world_with(&sc, &opt);
    assert_eq!(a, b);
}

/// A job that evicted victims starts as soon as the last of them is gone,
/// not at the next full cycle: full cycles are coalesced (here to one per
/// 10 min, with one just before the claims).
#[test]
fn a_job_starts_when_its_victims_are_gone() {
    let sc = testdata("roomready.yaml");
    let opt = Options {
        coalesce: 10 * MINUTE,
        ..checked("partita", sc.seed)
    };
    let (r, w) = run_world_with(&sc, &opt);
    assert_eq!(r.preemptions, 1, "the scenario does not test eviction");
    served_within(&w, "b", w.sch.config().grace); // the victims' grace, nothing more
}

/// A best-effort claim whose first search finds only borrowed production,
/// protected for its first `protect_production_for`, searches again when
/// the protection lapses (the scheduler's retries), not at the periodic
/// cycle a minute later.
#[test]
fn a_best_effort_claim_searches_again_when_the_protection_lapses() {
    let sc = testdata("retry.yaml");
    let (r, w) = run_world(&sc, "partita");
    assert_eq!(
        r.preemptions, 1,
        "the scenario does not test the protection"
    );
    let cfg = w.sch.config();
    served_within(&w, "a", cfg.protect_production_for + cfg.grace);
}

/// The offered load is the stream's nominal GPU-time within the horizon
/// over the cluster's, whatever the scheduler. owedfall.yaml, 4 GPUs for
/// 3 h: 710 of 720 GPU-minutes.
#[test]
fn the_offered_load_is_the_streams_gpu_time_over_the_clusters() {
    let sc = testdata("owedfall.yaml");
    for scheduler in ["naive", "partita"] {
        let (r, _) = run_world(&sc, scheduler);
        assert!(
            (r.offered_load - 710.0 / 720.0).abs() < 1e-9,
            "{scheduler}: {}",
            r.offered_load
        );
    }
}

/// A wait counts in wait_p95_within_guarantee_s only when it began with
/// the team owed the job's demand.
#[test]
fn only_waits_begun_within_the_guarantee_count_as_within() {
    let sc = testdata("within.yaml");
    let (r, w) = run_world(&sc, "partita");
    let mut within = Vec::new();
    for j in &w.jobs {
        if j.id() == "late-000000" {
            assert!(
                !j.waits.is_empty() && j.waits_within.is_empty(),
                "late: {} waits, {} within",
                j.waits.len(),
                j.waits_within.len()
            );
        } else if j.job.spec.team == "b" {
            assert!(
                !j.waits.is_empty() && j.waits_within.len() == j.waits.len(),
                "{}: every wait within",
                j.id()
            );
        }
        within.extend(j.waits_within.iter().map(|&d| seconds(d)));
    }
    assert_eq!(
        r.wait_p95_within_guarantee.get("batch").copied(),
        super::super::percentile(&within, 95.0)
    );
}

/// A move holds both places until the new one is ready; a job that stops
/// in between releases both, and the move's completion then finds nothing
/// to release. The GPU held returns to zero.
#[test]
fn a_job_stopped_during_a_move_releases_both_places() {
    let sc = testdata("move.yaml");
    let (_, mut w) = run_world(&sc, "partita");
    let j = w.by_id["serve-000000"];
    assert_eq!(
        w.jobs[j].phase(),
        Phase::Running,
        "serve is not running at the end of the hour"
    );
    let old = w.jobs[j].job.placed[0].as_deref().unwrap().clone();
    let other =
        w.st.nodes()
            .map(|n| n.name().to_string())
            .filter(|n| *n != old.node)
            .last()
            .unwrap();
    let mut to = old.clone();
    to.node = other;
    w.migrate(Migration {
        job: "serve-000000".to_string(),
        task: 0,
        to,
        creates: true,
        for_job: "test".to_string(),
    })
    .unwrap();
    let allocations = |w: &World<'_>| w.st.nodes().map(|n| n.tasks().len()).sum::<usize>();
    assert_eq!(
        allocations(&w),
        2,
        "during the move: the old and the new place"
    );
    w.check_invariants().unwrap();
    w.metrics_progress(j);
    w.release_all(j).unwrap();
    assert_eq!(
        (allocations(&w), w.jobs[j].moved.len()),
        (0, 0),
        "after the stop"
    );
    w.release_old(j, &old.node, &old.task).unwrap();
    assert!(
        w.metrics.alloc_now.abs() < 1e-9,
        "GPU held after the stop: {}",
        w.metrics.alloc_now
    );
}

/// The scenario's production_reserve_gpus holds partita's borrowed work
/// back; the option replaces it; naive and gang-drf have no such setting.
#[test]
fn the_scenario_production_reserve_holds_back_partitas_borrowers() {
    let sc = testdata("reserve.yaml");
    for (name, scheduler, reserve, want) in [
        ("partita with the scenario's 3 GPUs", "partita", None, 5),
        ("partita with the reserve set to 0", "partita", Some(0.0), 8),
        ("gang-drf borrows all", "gang-drf", None, 8),
        ("naive holds the guarantee", "naive", None, 2),
    ] {
        let opt = Options {
            production_reserve_gpus: reserve,
            ..checked(scheduler, 1)
        };
        let (_, w) = run_world_with(&sc, &opt);
        let running = w
            .jobs
            .iter()
            .filter(|j| j.phase() == Phase::Running)
            .count();
        assert_eq!(running, want, "{name}");
    }
}

/// The scheduler ranks victims by the work they would lose, so the world
/// must show it each running job's last checkpoint, not its start.
#[test]
fn the_scheduler_sees_the_last_checkpoint() {
    let sc = testdata("reserve.yaml");
    let (_, w) = run_world_with(&sc, &checked("partita", 1));
    let mut running = 0;
    for j in w.jobs.iter().filter(|j| j.phase() == Phase::Running) {
        running += 1;
        // An hour in, jobs that started at once checkpointed at 25 and 50
        // minutes; the last cycles come every minute while others wait.
        assert_eq!(j.job.checkpoint - j.run_since, 50 * MINUTE, "{}", j.id());
    }
    assert!(running > 0, "nothing running");
}

/// And Jain's count is the number of samples with every team waiting.
#[test]
fn jain_counts_the_samples_with_every_team_waiting() {
    let sc = testdata("reserve.yaml");
    let (r, _) = run_world_with(&sc, &checked("partita", 1));
    assert!(
        r.jain_samples > 0 && r.jain_fairness == Some(1.0),
        "one team, backlogged all hour: {} samples, Jain {:?}",
        r.jain_samples,
        r.jain_fairness
    );
    // A run whose teams are never all backlogged has no sample: null.
    let (r, _) = run_world(&testdata("owed.yaml"), "gang-drf");
    assert_eq!((r.jain_samples, r.jain_fairness), (0, None));
    assert!(r.jct_p50.is_some());
}

/// A run whose events pile up at one instant (a scheduler that never
/// settles did) fails with that instant instead of hanging.
#[test]
fn a_stuck_run_fails_instead_of_hanging() {
    let mut sc = load("scenarios/demo.yaml");
    sc.duration = HOUR;
    // The world with 100 extra events at 30 min under a bound.
    let burst = |bound: usize| {
        let opt = Options {
            scheduler: "partita".to_string(),
            seed: 1,
            ..Options::default()
        };
        let mut w = world_of(&sc, &opt);
        w.stuck_after = bound;
        for _ in 0..100 {
            w.q.push(Event {
                at: 30 * MINUTE,
                kind: Kind::Timer,
                reference: REF_TICK,
            })
            .unwrap();
        }
        w.run_loop()
    };
    let err = burst(50).expect_err("a stuck run went on").to_string();
    assert!(err.contains("stuck") && err.contains("30m0s"), "{err}");
    burst(200).expect("100 events at one instant under a limit of 200");
}

/// A job that waited beyond its team's guarantee and is served within 60 s
/// plus the grace of becoming owed violates by the queueing clock but not
/// by the owed clock.
#[test]
fn the_owed_clock_starts_when_the_job_becomes_owed() {
    let sc = testdata("owed.yaml");
    let (r, w) = run_world(&sc, "partita");
    let second = job(&w, "second-000000");
    assert!(second.started, "a's gang never started");
    let limit = MINUTE + w.sch.config().grace;
    let wait = second.first_run - HOUR;
    assert!(
        wait > 0 && wait <= limit,
        "a's gang started {} s after it became owed",
        seconds(wait)
    );
    assert!(
        r.preemptions > 0,
        "b's borrowed job was not evicted: the scenario does not test the clock"
    );
    assert!(
        r.guarantee_violation > 0.0,
        "queueing clock: {}",
        r.guarantee_violation
    );
    assert_eq!(r.guarantee_violation_owed, 0.0, "owed clock");
}

/// The owed clock starts when the team's holdings fell, not at the check
/// before: with the periodic cycles 10 minutes apart, a's gang becomes
/// owed at 55m, minutes after the last check, and is served 30 s later.
#[test]
fn the_owed_clock_starts_when_the_teams_holdings_fell() {
    let sc = testdata("owedfall.yaml");
    let opt = Options {
        cycle_every: 10 * MINUTE,
        ..checked("partita", sc.seed)
    };
    let (r, w) = run_world_with(&sc, &opt);
    let second = job(&w, "second-000000");
    assert!(second.started, "a's gang never started");
    let limit = MINUTE + w.sch.config().grace;
    let wait = second.first_run - 55 * MINUTE;
    assert!(
        wait > 0 && wait <= limit,
        "a's gang started {} s after it became owed",
        seconds(wait)
    );
    assert_eq!(r.guarantee_violation_owed, 0.0, "owed clock");
    // Queued at 10m, it had waited past the line long before it fitted:
    // the queueing clock counts from the fall that made it fit.
    let want = seconds(second.job.started - 55 * MINUTE);
    assert!(
        (r.guarantee_violation - want).abs() < 1e-6,
        "queueing clock {} s, want {want} s",
        r.guarantee_violation
    );
    assert!(
        r.owed_waits >= 1 && r.owed_waits_late == 0,
        "owed waits {}, {} late",
        r.owed_waits,
        r.owed_waits_late
    );
    assert!(
        (r.owed_wait_max.unwrap() - want).abs() < 1e-6,
        "longest owed wait {:?}, want {want}",
        r.owed_wait_max
    );
}

/// The violation clocks count a wait from the moment it passes 60 s plus
/// the grace to the job's start, whatever the cadence of the checks.
#[test]
fn the_violation_clocks_do_not_depend_on_the_cadence() {
    let sc = testdata("owedlate.yaml");
    for every in [MINUTE, 7 * MINUTE] {
        let opt = Options {
            reconfig_delay: 10 * MINUTE,
            cycle_every: every,
            ..checked("partita", sc.seed)
        };
        let (r, w) = run_world_with(&sc, &opt);
        let job = job(&w, "train-000000");
        assert!(job.started, "cycles every {every}: a's job never started");
        let limit = MINUTE + w.sch.config().grace;
        let want = seconds(job.job.started - MINUTE - limit);
        assert!(
            want > 0.0,
            "cycles every {every}: the scenario does not test the clocks"
        );
        assert!(
            (r.guarantee_violation_owed - want).abs() < 1e-6
                && (r.guarantee_violation - want).abs() < 1e-6,
            "cycles every {every}: clocks {} (owed) and {} (queueing), want {want}",
            r.guarantee_violation_owed,
            r.guarantee_violation
        );
        let wait = seconds(job.job.started - MINUTE);
        assert!(
            r.owed_waits == 1
                && r.owed_waits_late == 1
                && (r.owed_wait_max.unwrap() - wait).abs() < 1e-6,
            "cycles every {every}: owed waits {}, {} late, longest {:?}; want one of {wait}, late",
            r.owed_waits,
            r.owed_waits_late,
            r.owed_wait_max
        );
    }
}

/// A job owed past 60 s plus the grace is named once in the trace, with
/// its wait reason, when it crosses the line; the owed clock counts it.
#[test]
fn an_owed_violation_is_traced_once() {
    let sc = testdata("owedlate.yaml");
    let opt = Options {
        reconfig_delay: 10 * MINUTE,
        ..checked("partita", sc.seed)
    };
    let mut trace = String::new();
    let (r, class, wait, limit) = {
        let setup = super::super::Setup::of(&sc, opt.seed, &mut super::read_file).unwrap();
        let mut w = World::new(setup, &opt.with_defaults(), Some(&mut trace)).unwrap();
        w.run_loop().unwrap();
        let j = job(&w, "train-000000");
        assert!(j.started, "a's job never started");
        (
            w.result(),
            j.job.spec.class,
            j.first_run - MINUTE,
            MINUTE + w.sch.config().grace,
        )
    };
    assert!(
        wait > limit,
        "a's job started {} s after it arrived: the scenario does not test the trace",
        seconds(wait)
    );
    assert!(r.guarantee_violation_owed > 0.0);
    let reconfig = WaitReason::Reconfig.as_str();
    let lines: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("owed violation"))
        .collect();
    assert!(
        lines.len() == 1
            && lines[0].contains("owed violation a: train-000000")
            && lines[0].contains(reconfig),
        "owed violation lines {lines:?}"
    );
    // The result counts the same episode without a trace.
    let key = format!("{class}: {reconfig}");
    assert_eq!(r.owed_late_jobs, BTreeMap::from([(key.clone(), 1)]));
    let s = summarize(&[r.clone(), r.clone()]);
    assert_eq!(s.owed_late_jobs, Some(BTreeMap::from([(key, 2)])));
    // Its team has no other claim ahead of it.
    assert_eq!(r.owed_late_behind_team, 0);
    assert!(!lines[0].contains("behind its team"), "{}", lines[0]);
}

/// The unallocated GPU-hours go to why they stood idle: nothing waiting, a
/// team at its limit, a gang that needs more than stands free
/// (testdata/idle.yaml works out each hour), and they add up with the
/// allocated ones to the cluster's GPU-hours.
#[test]
fn idle_gpu_hours_go_to_their_cause() {
    let sc = testdata("idle.yaml");
    for name in ["gang-drf", "partita"] {
        let (r, _) = run_world(&sc, name);
        let want: BTreeMap<&str, f64> = BTreeMap::from([
            (IDLE_NO_WORK, 8.0),
            (WaitReason::Quota.as_str(), 6.0),
            (IDLE_TOO_BIG, 5.0),
        ]);
        for (cause, h) in &r.idle_gpu_hours {
            let w = want.get(cause.as_str()).copied().unwrap_or(0.0);
            assert!(
                (h - w).abs() <= 0.05,
                "{name}: {cause:?}: {h} GPU-hours idle, want {w}"
            );
        }
        for cause in want.keys() {
            assert!(
                r.idle_gpu_hours.contains_key(*cause),
                "{name}: no idle GPU-hours for {cause:?}"
            );
        }
        let idle: f64 = r.idle_gpu_hours.values().sum();
        let all = r.gpus as f64 * hours(sc.duration);
        assert!(
            (idle + r.allocated_utilization * all - all).abs() < 1e-6,
            "{name}: {idle} idle, {} allocated, of {all}",
            r.allocated_utilization * all
        );
    }
}

/// An owed episode ends when the team's other work takes the room, not at
/// the next look: the fine-tune, owed from 1m and past the line at 1m +
/// 60 s + grace, stops fitting when a's service starts at 4m.
#[test]
fn an_owed_episode_ends_when_the_teams_other_work_takes_the_room() {
    let sc = testdata("owedoutgrown.yaml");
    for every in [MINUTE, 10 * MINUTE] {
        let opt = Options {
            reconfig_delay: 10 * MINUTE,
            cycle_every: every,
            ..checked("partita", sc.seed)
        };
        let (r, w) = run_world_with(&sc, &opt);
        let (train, serve) = (job(&w, "train-000000"), job(&w, "serve-000000"));
        assert!(
            serve.started && serve.job.started == 4 * MINUTE,
            "cycles every {every}: a's service was not placed on arrival"
        );
        assert!(
            train.started && train.first_run > 4 * MINUTE,
            "cycles every {every}: the fine-tune started at {}",
            train.first_run
        );
        let limit = MINUTE + w.sch.config().grace;
        let want = seconds(3 * MINUTE - limit);
        assert!(
            (r.guarantee_violation_owed - want).abs() < 1e-6
                && (r.guarantee_violation - want).abs() < 1e-6,
            "cycles every {every}: clocks {} (owed) and {} (queueing), want {want}",
            r.guarantee_violation_owed,
            r.guarantee_violation
        );
        assert!(
            r.owed_waits_late == 1 && (r.owed_wait_max.unwrap() - 180.0).abs() < 1e-6,
            "cycles every {every}: {} late owed waits, longest {:?}",
            r.owed_waits_late,
            r.owed_wait_max
        );
        assert_eq!(
            r.owed_late_jobs.values().sum::<usize>(),
            1,
            "cycles every {every}: {:?}",
            r.owed_late_jobs
        );
    }
}

/// A job evicted while its team borrowed, and back in the queue within its
/// team's guarantee when its grace ends, is owed from that moment: it gets
/// a full cycle then, not the next coalesced one.
#[test]
fn an_owed_job_back_from_its_grace_starts_at_once() {
    let sc = testdata("owedback.yaml");
    let opt = Options {
        coalesce: 10 * MINUTE,
        ..checked("partita", sc.seed)
    };
    let (r, w) = run_world_with(&sc, &opt);
    assert_eq!(r.preemptions, 1, "the scenario does not test eviction");
    let back: Vec<usize> = (0..w.jobs.len())
        .filter(|&j| w.jobs[j].waits.len() >= 2)
        .collect();
    assert_eq!(back.len(), 1, "jobs back in the queue");
    assert!(
        w.owe[back[0]].within,
        "{} was beyond a's guarantee back in the queue",
        w.jobs[back[0]].id()
    );
    assert_eq!(
        *w.jobs[back[0]].waits.last().unwrap(),
        0,
        "{} waited back in the queue",
        w.jobs[back[0]].id()
    );
}

/// The world's seconds are Go's: whole seconds and the fraction apart.
#[test]
fn results_carry_the_horizon_and_the_teams() {
    let sc = testdata("owed.yaml");
    let (r, _): (RunResult, _) = run_world(&sc, "naive");
    assert_eq!(r.horizon, sc.duration);
    assert_eq!(r.teams, ["a", "b"]);
    assert_eq!(r.entitlement.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(r.timeline.len() as i64, sc.duration / (5 * MINUTE) + 1);
    assert_eq!(r.timeline[1].t, 5 * MINUTE);
    let _ = SECOND;
}
