//! The summary over seeds (Go's summary_test.go).

use std::collections::BTreeMap;

use super::super::{IDLE_NO_WORK, IDLE_TOO_BIG, RunResult, Summary, summarize};

fn res(
    useful: f64,
    p95: f64,
    viol: f64,
    owed: f64,
    jain: f64,
    samples: usize,
    oom: usize,
) -> RunResult {
    RunResult {
        useful_utilization: useful,
        wait_p95: BTreeMap::from([("production".to_string(), p95)]),
        guarantee_violation: viol,
        guarantee_violation_owed: owed,
        jain_fairness: (samples > 0).then_some(jain),
        jain_samples: samples,
        oom_events: oom,
        preemptions: 10,
        lost_gpu_hours: 1.5,
        ..RunResult::default()
    }
}

#[test]
fn summarize_counts_the_seeds_that_meet_each_target() {
    let mut results = vec![
        res(0.90, 30.0, 0.0, 0.0, 0.95, 12, 0),   // meets everything
        res(0.84, 30.0, 100.0, 40.0, 0.80, 5, 0), // useful and Jain miss; violations
        res(0.86, 31.0, 0.0, 0.0, 0.0, 0, 0),     // p95 misses; no Jain samples
        res(0.88, 12.0, 0.0, 0.0, 0.91, 3, 2),    // OOM
        res(0.87, 30.0, 50.0, 0.0, 0.92, 4, 0),   // violations by the queue clock only
    ];
    for (r, load) in results.iter_mut().zip([1.25, 0.875, 1.0, 1.125, 0.75]) {
        r.offered_load = load;
    }
    let map = |kv: &[(&str, f64)]| {
        kv.iter()
            .map(|&(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>()
    };
    let late = |kv: &[(&str, usize)]| {
        kv.iter()
            .map(|&(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>()
    };
    results[0].idle_gpu_hours = map(&[(IDLE_NO_WORK, 10.0)]);
    results[1].idle_gpu_hours = map(&[(IDLE_NO_WORK, 5.0), (IDLE_TOO_BIG, 2.5)]);
    results[1].owed_late_jobs = late(&[("batch: a", 2), ("best-effort: b", 1)]);
    results[4].owed_late_jobs = late(&[("batch: a", 1)]);
    (results[0].owed_waits, results[0].owed_wait_max) = (40, Some(30.0));
    (
        results[1].owed_waits,
        results[1].owed_waits_late,
        results[1].owed_wait_max,
    ) = (20, 3, Some(150.0));
    // The mean JCT is over the seeds where a job finished.
    (results[0].jct_p50, results[2].jct_p50, results[3].jct_p50) =
        (Some(100.0), Some(200.0), Some(600.0));
    let mut got = summarize(&results);
    let want = Summary {
        seeds: 5,
        useful_mean: (0.90 + 0.84 + 0.86 + 0.88 + 0.87) / 5.0,
        useful_min: 0.84,
        useful_met: 4,
        production_p95_max: 31.0,
        production_p95_met: 4,
        both_met: 3,
        violation_total: 150.0,
        violation_owed_total: 40.0,
        no_violation: 3,
        no_violation_owed: 4,
        jain_min: Some(0.80),
        jain_met: 3,
        jain_seeds: 4,
        oom_events: 2,
        preemptions: 50,
        lost_gpu_hours: 7.5,
        all_targets_met: 1,
        all_targets_met_owed: 2,
        jct_p50_mean: Some(300.0),
        offered_load_mean: 1.0,
        offered_load_min: 0.75,
        below_capacity: 2,
        idle_gpu_hours_mean: Some(map(&[(IDLE_NO_WORK, 3.0), (IDLE_TOO_BIG, 0.5)])),
        owed_late_jobs: Some(late(&[("batch: a", 3), ("best-effort: b", 1)])),
        owed_waits: 60,
        owed_waits_late: 3,
        owed_wait_max: Some(150.0),
        ..Summary::default()
    };
    assert!(
        (got.useful_mean - want.useful_mean).abs() < 1e-12,
        "useful mean {}",
        got.useful_mean
    );
    got.useful_mean = want.useful_mean;
    assert_eq!(got, want);
}

#[test]
fn a_summary_of_no_results_is_empty() {
    assert_eq!(summarize(&[]), Summary::default());
    // Without samples anywhere, the statistics are none (null), not 0
    // and not +Inf (JSON has no infinity).
    let got = summarize(&[RunResult::default()]);
    assert_eq!(
        (
            got.jain_min,
            got.jain_seeds,
            got.jct_p50_mean,
            got.owed_wait_max
        ),
        (None, 0, None, None)
    );
}

#[test]
fn summarize_adds_the_late_jobs_behind_their_teams_own_claims() {
    let r = |n| RunResult {
        owed_late_behind_team: n,
        ..RunResult::default()
    };
    assert_eq!(summarize(&[r(2), r(0), r(3)]).owed_late_behind_team, 5);
}

/// A metric with no sample prints null, not 0, in a run's result and in a
/// summary; the JSON names and order are the Go build's.
#[test]
fn a_metric_with_no_sample_is_null() {
    let r = RunResult::default();
    let json = serde_json::to_value(&r).unwrap();
    for field in [
        "jain_fairness",
        "jct_p50_s",
        "owed_wait_p50_s",
        "owed_wait_p99_s",
        "owed_wait_max_s",
    ] {
        assert!(json[field].is_null(), "{field}: {}", json[field]);
    }
    let s = serde_json::to_value(summarize(&[r])).unwrap();
    for field in ["jain_fairness_min", "jct_p50_s_mean", "owed_wait_max_s_max"] {
        assert!(s[field].is_null(), "{field}: {}", s[field]);
    }
    let text = serde_json::to_string(&RunResult::default()).unwrap();
    let names: Vec<&str> = text
        .split(',')
        .map(|kv| kv.trim_start_matches('{').split('"').nth(1).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "scenario",
            "scheduler",
            "useful_utilization",
            "allocated_utilization",
            "oom_events",
            "wait_p95_s",
            "jct_p50_s",
            "guarantee_violation_s",
            "guarantee_violation_owed_s",
            "jain_fairness",
            "jain_samples",
            "preemptions",
            "lost_gpu_hours",
            "wait_p95_within_guarantee_s",
            "offered_load",
            "idle_gpu_hours",
            "owed_late_jobs",
            "owed_late_behind_own_team",
            "owed_waits",
            "owed_waits_late",
            "owed_wait_p50_s",
            "owed_wait_p99_s",
            "owed_wait_max_s",
            "mig_reconfigurations",
            "migrations",
            "jobs",
            "completed",
            "gpus",
        ]
    );
}
