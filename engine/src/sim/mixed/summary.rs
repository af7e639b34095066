//! One scheduler's results over several seeds, counted against the
//! benchmark's targets (Go's `summary.go`; docs/metrics.md, "Over several
//! seeds").

use std::collections::BTreeMap;

use serde::Serialize;

use super::metrics::{RunResult, go_max};

/// `useful_utilization`, at least.
pub const TARGET_USEFUL: f64 = 0.85;
/// `wait_p95_s` of production, at most (s).
pub const TARGET_PRODUCTION_P95: f64 = 30.0;
/// `jain_fairness`, at least.
pub const TARGET_JAIN: f64 = 0.9;

/// One scheduler's results over several job streams (seeds) of a
/// scenario: one seed can meet a target by luck, so robustness is judged
/// by how many seeds do. The JSON names and order are the Go build's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub seeds: usize,
    #[serde(rename = "useful_utilization_mean")]
    pub useful_mean: f64,
    #[serde(rename = "useful_utilization_min")]
    pub useful_min: f64,
    #[serde(rename = "seeds_useful_met")]
    pub useful_met: usize,
    #[serde(rename = "production_wait_p95_s_max")]
    pub production_p95_max: f64,
    #[serde(rename = "seeds_production_p95_met")]
    pub production_p95_met: usize,
    #[serde(rename = "seeds_useful_and_production_p95_met")]
    pub both_met: usize,
    #[serde(rename = "guarantee_violation_s_total")]
    pub violation_total: f64,
    #[serde(rename = "guarantee_violation_owed_s_total")]
    pub violation_owed_total: f64,
    #[serde(rename = "seeds_without_violation")]
    pub no_violation: usize,
    #[serde(rename = "seeds_without_owed_violation")]
    pub no_violation_owed: usize,
    /// The least index over the seeds with Jain samples; none without any.
    #[serde(rename = "jain_fairness_min")]
    pub jain_min: Option<f64>,
    #[serde(rename = "seeds_jain_met")]
    pub jain_met: usize,
    #[serde(rename = "seeds_with_jain_samples")]
    pub jain_seeds: usize,
    #[serde(rename = "oom_events_total")]
    pub oom_events: usize,
    #[serde(rename = "preemptions_total")]
    pub preemptions: usize,
    #[serde(rename = "lost_gpu_hours_total")]
    pub lost_gpu_hours: f64,
    #[serde(rename = "seeds_all_targets_met")]
    pub all_targets_met: usize,
    #[serde(rename = "seeds_all_targets_met_owed_clock")]
    pub all_targets_met_owed: usize,
    /// The mean over the seeds with a completed job; none without any.
    #[serde(rename = "jct_p50_s_mean")]
    pub jct_p50_mean: Option<f64>,
    #[serde(rename = "mig_reconfigurations_total")]
    pub mig_reconfigurations: usize,
    #[serde(rename = "migrations_total")]
    pub migrations: usize,
    #[serde(rename = "offered_load_mean")]
    pub offered_load_mean: f64,
    #[serde(rename = "offered_load_min")]
    pub offered_load_min: f64,
    /// The seeds whose stream offers less than the cluster
    /// (`offered_load` < 1).
    #[serde(rename = "seeds_offered_below_capacity")]
    pub below_capacity: usize,
    /// `idle_gpu_hours` averaged over the seeds (a seed without a cause
    /// counts 0 for it); none over no seeds.
    #[serde(rename = "idle_gpu_hours_mean")]
    pub idle_gpu_hours_mean: Option<BTreeMap<String, f64>>,
    /// `owed_late_jobs` summed over the seeds; none over no seeds.
    #[serde(rename = "owed_late_jobs_total")]
    pub owed_late_jobs: Option<BTreeMap<String, usize>>,
    #[serde(rename = "owed_late_behind_own_team_total")]
    pub owed_late_behind_team: usize,
    #[serde(rename = "owed_waits_total")]
    pub owed_waits: usize,
    #[serde(rename = "owed_waits_late_total")]
    pub owed_waits_late: usize,
    /// The longest owed wait of any seed; none without any.
    #[serde(rename = "owed_wait_max_s_max")]
    pub owed_wait_max: Option<f64>,
}

/// Sums `results`, one per seed, of one scheduler. A seed whose Jain's
/// index has no samples (never every team backlogged) counts neither for
/// nor against the Jain target and not in `jain_min`. A seed meets all
/// targets when it meets the three above, has no OOM event and no
/// guarantee violation; `all_targets_met_owed` counts the seeds that do
/// with the violation by the owed clock.
pub fn summarize(results: &[RunResult]) -> Summary {
    let mut s = Summary {
        seeds: results.len(),
        ..Summary::default()
    };
    if results.is_empty() {
        return s;
    }
    let n = results.len() as f64;
    let mut idle: BTreeMap<String, f64> = BTreeMap::new();
    let mut late: BTreeMap<String, usize> = BTreeMap::new();
    let (mut useful_min, mut jain_min, mut offered_min) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let (mut jct_sum, mut jct_seeds) = (0.0, 0usize);
    for r in results {
        s.offered_load_mean += r.offered_load;
        offered_min = go_min(offered_min, r.offered_load);
        if r.offered_load < 1.0 {
            s.below_capacity += 1;
        }
        s.useful_mean += r.useful_utilization;
        useful_min = go_min(useful_min, r.useful_utilization);
        let useful = r.useful_utilization >= TARGET_USEFUL;
        let p95 = r.wait_p95.get("production").copied().unwrap_or(0.0);
        s.production_p95_max = go_max(s.production_p95_max, p95);
        let prod = p95 <= TARGET_PRODUCTION_P95;
        let mut jain = true;
        if r.jain_samples > 0 {
            let index = r.jain_fairness.unwrap_or(0.0);
            s.jain_seeds += 1;
            jain_min = go_min(jain_min, index);
            jain = index >= TARGET_JAIN;
            if jain {
                s.jain_met += 1;
            }
        }
        if useful {
            s.useful_met += 1;
        }
        if prod {
            s.production_p95_met += 1;
        }
        if useful && prod {
            s.both_met += 1;
        }
        s.violation_total += r.guarantee_violation;
        s.violation_owed_total += r.guarantee_violation_owed;
        if r.guarantee_violation == 0.0 {
            s.no_violation += 1;
        }
        if r.guarantee_violation_owed == 0.0 {
            s.no_violation_owed += 1;
        }
        if useful && prod && jain && r.oom_events == 0 {
            if r.guarantee_violation == 0.0 {
                s.all_targets_met += 1;
            }
            if r.guarantee_violation_owed == 0.0 {
                s.all_targets_met_owed += 1;
            }
        }
        s.oom_events += r.oom_events;
        s.preemptions += r.preemptions;
        s.lost_gpu_hours += r.lost_gpu_hours;
        if let Some(jct) = r.jct_p50 {
            jct_sum += jct;
            jct_seeds += 1;
        }
        s.mig_reconfigurations += r.mig_reconfigurations;
        s.migrations += r.migrations;
        for (cause, h) in &r.idle_gpu_hours {
            *idle.entry(cause.clone()).or_insert(0.0) += h / n;
        }
        for (reason, k) in &r.owed_late_jobs {
            *late.entry(reason.clone()).or_insert(0) += k;
        }
        s.owed_late_behind_team += r.owed_late_behind_team;
        s.owed_waits += r.owed_waits;
        s.owed_waits_late += r.owed_waits_late;
        if let Some(w) = r.owed_wait_max {
            s.owed_wait_max = Some(go_max(s.owed_wait_max.unwrap_or(0.0), w));
        }
    }
    s.useful_mean /= n;
    s.useful_min = useful_min;
    s.offered_load_mean /= n;
    s.offered_load_min = offered_min;
    if s.jain_seeds > 0 {
        s.jain_min = Some(jain_min);
    }
    if jct_seeds > 0 {
        s.jct_p50_mean = Some(jct_sum / jct_seeds as f64);
    }
    s.idle_gpu_hours_mean = Some(idle);
    s.owed_late_jobs = Some(late);
    s
}

/// Go's built-in `min` of two floats: NaN if either is.
fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}
