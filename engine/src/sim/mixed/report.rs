//! The report of a run of several schedulers (Go's `report.go`):
//! report.md, utilization.svg and teams-<scheduler>.svg, as text, byte for
//! byte the Go build's. Writing them to files is the caller's.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::AddAssign;

use super::metrics::{RunResult, Sample};
use crate::numfmt::format_fixed;
use crate::scenario::duration::hours;
use crate::svgchart::{Chart, PALETTE, Point, Series};

/// report.md: the results table, where the GPU-hours went, the owed-late
/// jobs when there are any, and the charts' links. `command` is the
/// command line echoed for regenerating it. Empty for no results.
pub fn report_md(command: &str, results: &[RunResult]) -> String {
    let mut w = String::new();
    let Some(first) = results.first() else {
        return w;
    };
    // Writing to a String cannot fail.
    let _ = write_markdown(&mut w, command, first, results);
    w
}

fn write_markdown(
    w: &mut String,
    command: &str,
    first: &RunResult,
    results: &[RunResult],
) -> std::fmt::Result {
    writeln!(w, "# Mixed workload: {}\n", first.scenario)?;
    writeln!(
        w,
        "Regenerate with `{command}`. docs/metrics.md defines every column.\n"
    )?;
    writeln!(
        w,
        "Offered load: {} of the cluster's GPU-time (`offered_load`: what the job stream asks for, the same under every scheduler).\n",
        format_fixed(first.offered_load, 3)
    )?;
    writeln!(
        w,
        "| scheduler | useful util. | allocated util. | OOM | wait p95 production | production within guarantee | wait p95 batch | wait p95 best-effort | JCT p50 | guarantee violation | violation, owed clock | Jain | preemptions | lost GPU-h | MIG changes | moves | jobs done |"
    )?;
    writeln!(
        w,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    for r in results {
        let jain = match r.jain_fairness {
            Some(j) if r.jain_samples > 0 => format_fixed(j, 3),
            _ => "n/a (never all backlogged)".to_string(),
        };
        writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} s | {} s | {} | {} | {} | {} | {} | {} / {} |",
            r.scheduler,
            format_fixed(r.useful_utilization, 3),
            format_fixed(r.allocated_utilization, 3),
            r.oom_events,
            dur(get(&r.wait_p95, "production")),
            dur(get(&r.wait_p95_within_guarantee, "production")),
            dur(get(&r.wait_p95, "batch")),
            dur(get(&r.wait_p95, "best-effort")),
            r.jct_p50.map_or_else(|| "n/a".to_string(), dur),
            format_fixed(r.guarantee_violation, 0),
            format_fixed(r.guarantee_violation_owed, 0),
            jain,
            r.preemptions,
            format_fixed(r.lost_gpu_hours, 1),
            r.mig_reconfigurations,
            r.migrations,
            r.completed,
            r.jobs
        )?;
    }
    writeln!(w)?;
    write_gpu_hours(w, results)?;
    write_owed_late(w, results)?;
    writeln!(w, "![utilization](utilization.svg)")?;
    for r in results {
        writeln!(w, "\n![teams under {0}](teams-{0}.svg)", r.scheduler)?;
    }
    Ok(())
}

/// Accounts for the cluster's GPU-hours under each scheduler: needed by
/// running work, held but not needed, and unallocated by cause
/// (`idle_gpu_hours`, the causes that cost most first).
fn write_gpu_hours(w: &mut String, results: &[RunResult]) -> std::fmt::Result {
    let causes = keys_by_total(results, |r| &r.idle_gpu_hours);
    writeln!(
        w,
        "Where the GPU-hours went: needed by running work, held but not needed, and unallocated by cause (`idle_gpu_hours`: why the GPUs no one held stood idle, as the last scheduling cycle saw it).\n"
    )?;
    table_head(w, "GPU-hours", results)?;
    let mut row = |name: &str, value: &dyn Fn(&RunResult) -> f64| -> std::fmt::Result {
        write!(w, "| {name} |")?;
        for r in results {
            write!(w, " {} |", format_fixed(value(r), 1))?;
        }
        writeln!(w)
    };
    row("needed by running work (useful)", &|r| {
        r.useful_utilization * r.gpus as f64 * hours(r.horizon)
    })?;
    row("held but not needed", &|r| {
        (r.allocated_utilization - r.useful_utilization) * r.gpus as f64 * hours(r.horizon)
    })?;
    for cause in &causes {
        row(&format!("unallocated: {cause}"), &|r| {
            r.idle_gpu_hours.get(cause).copied().unwrap_or(0.0)
        })?;
    }
    writeln!(w)
}

/// Lists, when any scheduler has some, the jobs that waited past the
/// guarantee's limit by the owed clock, by class and wait reason
/// (`owed_late_jobs`): where the owed clock's time comes from.
fn write_owed_late(w: &mut String, results: &[RunResult]) -> std::fmt::Result {
    let keys = keys_by_total(results, |r| &r.owed_late_jobs);
    if keys.is_empty() {
        return Ok(());
    }
    writeln!(
        w,
        "Jobs owed their team's guarantee that waited past 60 s plus the grace (`owed_late_jobs`: once per episode, by class and the reason they waited at that moment; `--trace` names each).\n"
    )?;
    table_head(w, "class: wait reason", results)?;
    for key in &keys {
        write!(w, "| {key} |")?;
        for r in results {
            write!(w, " {} |", r.owed_late_jobs.get(key).copied().unwrap_or(0))?;
        }
        writeln!(w)?;
    }
    write!(
        w,
        "| of them, behind their team's own claims (`owed_late_behind_own_team`) |"
    )?;
    for r in results {
        write!(w, " {} |", r.owed_late_behind_team)?;
    }
    writeln!(w)?;
    writeln!(w)
}

/// The keys of every result's map, largest sum over the results first,
/// ties by name.
fn keys_by_total<V>(
    results: &[RunResult],
    of: impl Fn(&RunResult) -> &BTreeMap<String, V>,
) -> Vec<String>
where
    V: Copy + Default + PartialOrd + AddAssign,
{
    let mut total: BTreeMap<&str, V> = BTreeMap::new();
    for r in results {
        for (key, &v) in of(r) {
            *total.entry(key).or_default() += v;
        }
    }
    let mut keys: Vec<(&str, V)> = total.into_iter().collect();
    // Stable, on keys already in name order: ties keep it.
    keys.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
    keys.into_iter().map(|(k, _)| k.to_string()).collect()
}

/// A Markdown table's header: `first`, then one column per scheduler.
fn table_head(w: &mut String, first: &str, results: &[RunResult]) -> std::fmt::Result {
    write!(w, "| {first} |")?;
    for r in results {
        write!(w, " {} |", r.scheduler)?;
    }
    write!(w, "\n|---|")?;
    for _ in results {
        write!(w, "---|")?;
    }
    writeln!(w)
}

/// Seconds, readably.
fn dur(s: f64) -> String {
    if s >= 3600.0 {
        format!("{} h", format_fixed(s / 3600.0, 1))
    } else if s >= 60.0 {
        format!("{} min", format_fixed(s / 60.0, 1))
    } else {
        format!("{} s", format_fixed(s, 0))
    }
}

/// utilization.svg: useful (solid) and allocated (dashed) utilization over
/// time for each scheduler, in one-hour means.
pub fn utilization_svg(results: &[RunResult]) -> String {
    let mut c = Chart {
        title: "GPU utilization over time".to_string(),
        x_label: "simulated time (h)".to_string(),
        y_label: "share of all GPUs".to_string(),
        y_min: 0.0,
        y_max: 1.0,
        ..Chart::default()
    };
    for (i, r) in results.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()].to_string();
        let mut useful = Series {
            name: format!("{} useful", r.scheduler),
            color: color.clone(),
            ..Series::default()
        };
        let mut alloc = Series {
            name: format!("{} allocated", r.scheduler),
            dashed: true,
            color,
            ..Series::default()
        };
        for s in smooth(&r.timeline, 12) {
            let x = hours(s.t);
            useful.points.push(Point {
                x,
                y: s.useful / r.gpus as f64,
            });
            alloc.points.push(Point {
                x,
                y: s.alloc / r.gpus as f64,
            });
            c.x_max = go_max(c.x_max, x);
        }
        c.series.push(useful);
        c.series.push(alloc);
    }
    c.render()
}

/// teams-<scheduler>.svg: the GPUs each team holds over time against its
/// entitlement (dashed).
pub fn teams_svg(r: &RunResult) -> String {
    let mut c = Chart {
        title: format!("GPUs held per team — {} (dashed: entitlement)", r.scheduler),
        x_label: "simulated time (h)".to_string(),
        y_label: "GPUs".to_string(),
        y_min: 0.0,
        y_max: r.gpus as f64,
        ..Chart::default()
    };
    // In name order (the entitlement's keys), each with its place in the
    // samples.
    let teams: Vec<(&String, Option<usize>)> = r
        .entitlement
        .keys()
        .map(|t| (t, r.teams.iter().position(|x| x == t)))
        .collect();
    let end = r.timeline.last().map_or(0.0, |s| hours(s.t));
    c.x_max = end;
    let smoothed = smooth(&r.timeline, 12);
    for (i, (t, k)) in teams.iter().enumerate() {
        let mut s = Series {
            name: t.to_string(),
            color: PALETTE[i % PALETTE.len()].to_string(),
            ..Series::default()
        };
        for p in &smoothed {
            let y = k.and_then(|k| p.teams.get(k)).copied().unwrap_or(0.0);
            s.points.push(Point { x: hours(p.t), y });
        }
        c.series.push(s);
    }
    for (i, (t, _)) in teams.iter().enumerate() {
        let e = r.entitlement[*t];
        c.series.push(Series {
            name: format!("{t} entitled")
                .trim_matches(is_go_space)
                .to_string(),
            dashed: true,
            color: PALETTE[i % PALETTE.len()].to_string(),
            points: vec![Point { x: 0.0, y: e }, Point { x: end, y: e }],
        });
    }
    c.render()
}

/// Go's `unicode.IsSpace`, for `strings.TrimSpace`.
fn is_go_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{85}' | '\u{A0}'
    ) || (c as u32 > 0xff && c.is_whitespace())
}

/// Averages samples in windows of `k`, so a week fits a chart.
fn smooth(ss: &[Sample], k: usize) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ss.len() {
        let end = (i + k).min(ss.len());
        let n = (end - i) as f64;
        let teams = ss[i..end].iter().map(|x| x.teams.len()).max().unwrap_or(0);
        let mut s = Sample {
            t: ss[i].t,
            teams: vec![0.0; teams],
            ..Sample::default()
        };
        for x in &ss[i..end] {
            s.useful += x.useful / n;
            s.alloc += x.alloc / n;
            for (t, v) in x.teams.iter().enumerate() {
                s.teams[t] += v / n;
            }
        }
        out.push(s);
        i += k;
    }
    out
}

/// Go's built-in `max` of two floats: NaN if either is.
fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}
