//! report.md's tables (Go's report tests in property_test.go).

use std::collections::BTreeMap;

use super::super::{RunResult, report_md};

fn result(scheduler: &str) -> RunResult {
    RunResult {
        scenario: "x".to_string(),
        scheduler: scheduler.to_string(),
        ..RunResult::default()
    }
}

/// Jain's index is averaged over the samples with every team backlogged;
/// without any, the report says so instead of printing 0. A JCT without a
/// finished job is n/a too.
#[test]
fn jain_without_backlogged_samples_is_reported_as_such() {
    let mut sampled = result("sampled");
    (sampled.jain_fairness, sampled.jain_samples, sampled.jct_p50) = (Some(0.5), 3, Some(90.0));
    let out = report_md("cmd", &[result("never"), sampled]);
    let never = out.lines().find(|l| l.starts_with("| never |")).unwrap();
    assert!(never.contains("| n/a (never all backlogged) |"), "{never}");
    assert!(
        never.contains("| 0 s | n/a | 0 s |"),
        "a JCT without a finished job: {never}"
    );
    let sampled = out.lines().find(|l| l.starts_with("| sampled |")).unwrap();
    assert!(
        sampled.contains("| 0.500 |") && sampled.contains("| 1.5 min |"),
        "{sampled}"
    );
}

/// The report lists owed_late_jobs, most frequent first, one column per
/// scheduler, and leaves the table out when no scheduler has any.
#[test]
fn the_report_lists_owed_late_jobs() {
    let with = |name: &str, late: &[(&str, usize)]| RunResult {
        owed_late_jobs: late
            .iter()
            .map(|&(k, v)| (k.to_string(), v))
            .collect::<BTreeMap<_, _>>(),
        ..result(name)
    };
    let mut p = with("p", &[("batch: x", 1), ("best-effort: y", 3)]);
    p.owed_late_behind_team = 2;
    let out = report_md("cmd", &[p, with("q", &[("batch: x", 1)])]);
    let y = out.find("| best-effort: y | 3 | 0 |").expect(&out);
    let x = out.find("| batch: x | 1 | 1 |").expect(&out);
    assert!(y < x, "want the row of 3 then the row of 2:\n{out}");
    let behind = out
        .find("(`owed_late_behind_own_team`) | 2 | 0 |")
        .expect(&out);
    assert!(
        behind > x,
        "want the count behind their team's own claims after the reasons:\n{out}"
    );
    let out = report_md("cmd", &[with("p", &[])]);
    assert!(
        !out.contains("owed_late_jobs"),
        "no owed-late jobs, yet the table is there:\n{out}"
    );
}

/// No results, no report.
#[test]
fn no_results_no_report() {
    assert_eq!(report_md("cmd", &[]), "");
}
