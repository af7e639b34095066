//! The metrics' pieces with hand-built inputs (Go's metrics_test.go).

use std::collections::BTreeMap;

use super::super::metrics::{
    Drop, Metrics, ReasonCount, Span, behind_own_team, count_reason, covered, percentile,
};
use super::super::world::{Owe, WJob};
use crate::scenario::duration::{HOUR, MINUTE, SECOND};
use crate::sched::Phase;
use crate::workload::{self, Class};

fn job(team: usize, milli: i64, queued_at: i64, within: bool) -> Owe {
    Owe {
        team: Some(team),
        milli,
        queued_at,
        within,
        ..Owe::default()
    }
}

/// A waiting job becomes owed at the first fall of its team's holdings
/// after which it fits in what the team is owed, not at the first fall
/// since the last look.
#[test]
fn a_job_becomes_owed_at_the_fall_that_makes_it_fit() {
    const GUARANTEE: f64 = 4000.0;
    let s = SECOND;
    let m = Metrics {
        drops: vec![vec![
            Drop {
                at: 100 * s,
                held: 3000.0,
            },
            Drop {
                at: 130 * s,
                held: 2000.0,
            },
            Drop {
                at: 150 * s,
                held: 0.0,
            },
        ]],
        ..Metrics::default()
    };
    for (name, j, want) in [
        (
            "waiting at the last look",
            job(0, 2000, 10 * s, false),
            130 * s,
        ),
        (
            "fits after the first fall",
            job(0, 1000, 10 * s, false),
            100 * s,
        ),
        (
            "queued since, fitting then",
            job(0, 2000, 120 * s, true),
            120 * s,
        ),
        (
            "queued since, fitting after a later fall",
            job(0, 2000, 110 * s, false),
            130 * s,
        ),
        (
            "queued after the fall that makes it fit",
            job(0, 4000, 140 * s, false),
            150 * s,
        ),
    ] {
        assert_eq!(m.owed_from(&j, 90 * s, GUARANTEE), want, "{name}");
    }
    // Nothing that makes it fit: no episode begins.
    assert_eq!(
        m.owed_after(&job(0, 4500, 10 * s, false), 90 * s, GUARANTEE),
        None
    );
    // Not even a fall since: the earliest it may have been.
    assert_eq!(
        m.owed_from(&job(0, 4500, 160 * s, false), 90 * s, GUARANTEE),
        160 * s
    );
}

/// A waiting job and what the metrics read of it.
type Claim = (WJob, Owe);

/// A late owed job is behind its team's own claims when the guarantee,
/// served to the team's claims in the scheduler's order (a higher class,
/// then the older), is taken by those ahead of it: each claim ahead that
/// fits in what is left takes its part, one that does not fit takes
/// nothing.
#[test]
fn a_late_job_is_behind_its_teams_own_claims() {
    const HELD: f64 = 7000.0;
    const GUARANTEE: f64 = 16000.0; // 9000 left
    let waiting = |team: usize, class: Class, submitted: i64, milli: i64| {
        let mut j = WJob::new(workload::Job::default(), 0, 0, 0);
        j.job.phase = Phase::Pending;
        j.job.submitted = submitted;
        j.job.spec.class = class;
        (j, job(team, milli, 0, false))
    };
    let me = || waiting(0, Class::Batch, HOUR, 1000);
    use Class::{Batch, BestEffort, Production};
    let cases: Vec<(&str, Vec<Claim>, bool)> = vec![
        (
            "a younger claim of a higher class takes the room",
            vec![waiting(0, Production, 2 * HOUR, 8500)],
            true,
        ),
        (
            "an older claim of its class takes it",
            vec![waiting(0, Batch, MINUTE, 8500)],
            true,
        ),
        (
            "a younger claim of its class does not count",
            vec![waiting(0, Batch, 2 * HOUR, 8500)],
            false,
        ),
        (
            "a lower class does not count",
            vec![waiting(0, BestEffort, MINUTE, 8500)],
            false,
        ),
        (
            "another team's claim does not count",
            vec![waiting(1, Batch, MINUTE, 8500)],
            false,
        ),
        (
            "an older claim that leaves room",
            vec![waiting(0, Batch, MINUTE, 8000)],
            false,
        ),
        (
            "an older claim too big for the room takes nothing",
            vec![waiting(0, Batch, MINUTE, 9500)],
            false,
        ),
        (
            "two claims ahead take it together",
            vec![
                waiting(0, Batch, MINUTE, 4500),
                waiting(0, Production, 2 * HOUR, 4000),
            ],
            true,
        ),
        (
            "one too big, then one that takes it",
            vec![
                waiting(0, Batch, MINUTE, 9500),
                waiting(0, Batch, 2 * MINUTE, 8500),
            ],
            true,
        ),
    ];
    for (name, mut jobs, want) in cases {
        jobs.push(me());
        let (jobs, owe): (Vec<WJob>, Vec<Owe>) = jobs.into_iter().unzip();
        let pending: Vec<usize> = (0..jobs.len()).collect();
        let j = jobs.len() - 1;
        assert_eq!(
            behind_own_team(&jobs, &owe, &pending, j, HELD, GUARANTEE),
            want,
            "{name}"
        );
    }
    // Only the pending list counts: a running job of the team is not on
    // it (what it holds is in held).
    let (jobs, owe): (Vec<WJob>, Vec<Owe>) = vec![waiting(0, Batch, MINUTE, 8500), me()]
        .into_iter()
        .unzip();
    assert!(behind_own_team(&jobs, &owe, &[0, 1], 1, HELD, GUARANTEE));
    assert!(
        !behind_own_team(&jobs, &owe, &[1], 1, HELD, GUARANTEE),
        "a job off the pending list counted as a claim ahead"
    );
}

/// count_reason counts as a map would, with few reasons and with many.
#[test]
fn count_reason_counts_each_reason() {
    for distinct in [1usize, 5, 63, 64, 65, 300] {
        let texts: Vec<String> = (0..5 * distinct)
            .map(|i| format!("reason {}", (i * 7919) % distinct))
            .collect();
        let mut counts: Vec<ReasonCount<'_>> = Vec::new();
        let mut want: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &texts {
            count_reason(&mut counts, r);
            *want.entry(r).or_insert(0) += 1;
        }
        let mut got: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &counts {
            assert!(
                got.insert(c.reason, c.n).is_none(),
                "{distinct} reasons: {:?} counted in two places",
                c.reason
            );
        }
        assert_eq!(got, want, "{distinct} reasons");
    }
}

/// The violation spans count overlaps once, whatever their order.
#[test]
fn covered_counts_overlaps_once() {
    let span = |from, to| Span { from, to };
    let mut spans = vec![
        span(50, 70),
        span(0, 10),
        span(5, 20),
        span(30, 40),
        span(30, 35),
        span(60, 65),
    ];
    assert_eq!(covered(&mut spans), 20 + 10 + 20);
    assert_eq!(covered(&mut []), 0);
}

/// Nearest rank: the smallest value with at least p % of the values at or
/// below it; none of no values.
#[test]
fn percentiles_are_nearest_rank() {
    let xs = [5.0, 1.0, 4.0, 2.0, 3.0];
    assert_eq!(percentile(&xs, 50.0), Some(3.0));
    assert_eq!(percentile(&xs, 95.0), Some(5.0));
    assert_eq!(percentile(&xs, 20.0), Some(1.0));
    assert_eq!(percentile(&xs, 21.0), Some(2.0));
    assert_eq!(percentile(&xs, 0.0), Some(1.0));
    assert_eq!(percentile(&[], 50.0), None);
}
