//! The experiment's reports: the curves in the published CSV shape, a
//! Markdown table of medians beside the published ones, an SVG chart, and
//! the tables across pod lists. Each is returned as text; writing files is
//! the caller's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::numfmt::{format_float, format_g, round2};
use crate::svgchart::{Chart, Point, Series};

use super::{COLUMNS, RunResult, median};

/// Our baseline names and the labels of the published results
/// (hkust-adsl/kubernetes-scheduler-simulator expected_results).
pub const PUBLISHED_NAMES: [(&str, &str); 6] = [
    ("random", "01-Random"),
    ("dot-product", "02-DotProd"),
    ("gpu-clustering", "03-GpuClustering"),
    ("gpu-packing", "04-GpuPacking"),
    ("best-fit", "05-BestFit"),
    ("fgd", "06-FGD"),
];

/// The label of a policy in the published results, if it has one.
fn published_label(policy: &str) -> Option<&'static str> {
    PUBLISHED_NAMES
        .iter()
        .find(|(p, _)| *p == policy)
        .map(|(_, l)| *l)
}

/// Published curves: workload -> label -> seed -> columns 0..130.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Published(pub BTreeMap<String, BTreeMap<String, BTreeMap<i64, Vec<f64>>>>);

/// A published curves file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    #[error("{path}: not a published curves file")]
    NotCurves { path: String },
    #[error("{path}:{line}: {fields} fields, header has {header}")]
    Fields {
        path: String,
        line: usize,
        fields: usize,
        header: usize,
    },
    #[error("{path}:{line}: column {column}: {value:?}: {why}")]
    Cell {
        path: String,
        line: usize,
        column: String,
        value: String,
        why: String,
    },
}

/// Reads analysis_allo_discrete.csv (or the frag one): a header, then
/// workload,sc_policy,tune,seed,... with columns 0..130 last. The file
/// has no quoted fields; `path` names it in errors.
pub fn parse_published(text: &str, path: &str) -> Result<Published, PublishedError> {
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l).split(',').collect())
        .collect();
    let Some(header) = rows.first().filter(|h| h.len() >= 4 + COLUMNS) else {
        return Err(PublishedError::NotCurves {
            path: path.to_string(),
        });
    };
    let first = header.len() - COLUMNS;
    let mut out = Published::default();
    for (i, r) in rows.iter().enumerate().skip(1) {
        let line = i + 1;
        if r.len() != header.len() {
            return Err(PublishedError::Fields {
                path: path.to_string(),
                line,
                fields: r.len(),
                header: header.len(),
            });
        }
        let cell = |column: String, value: &str, why: String| PublishedError::Cell {
            path: path.to_string(),
            line,
            column,
            value: value.to_string(),
            why,
        };
        let seed: i64 = r[3]
            .parse()
            .map_err(|e: std::num::ParseIntError| cell("seed".into(), r[3], e.to_string()))?;
        let mut cols = Vec::with_capacity(COLUMNS);
        for c in 0..COLUMNS {
            let v = r[first + c];
            cols.push(
                v.parse::<f64>()
                    .map_err(|e| cell(c.to_string(), v, e.to_string()))?,
            );
        }
        out.0
            .entry(r[0].to_string())
            .or_default()
            .entry(r[1].to_string())
            .or_default()
            .insert(seed, cols);
    }
    Ok(out)
}

impl Published {
    /// The published median of 100 − column 100 over seeds, if the curve
    /// exists.
    pub fn median_unallocated(&self, workload: &str, policy: &str) -> Option<f64> {
        let seeds = self.0.get(workload)?.get(published_label(policy)?)?;
        if seeds.is_empty() {
            return None;
        }
        let vals: Vec<f64> = seeds
            .values()
            .map(|cols| round2(100.0 - cols[100]))
            .collect();
        Some(median(&vals))
    }
}

/// The published name of a pod list: its file name without extension.
pub fn workload_name(pods_path: &str) -> String {
    let p = Path::new(pods_path);
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One pod list's experiment: its results by policy (each in seed order)
/// and how long it took.
#[derive(Clone, Debug)]
pub struct ListResult {
    /// The pod list's path as given.
    pub pods: String,
    pub policies: Vec<String>,
    pub seeds: Vec<i64>,
    pub tune: f64,
    pub results: BTreeMap<String, Vec<RunResult>>,
    pub wall_seconds: f64,
}

impl ListResult {
    fn runs(&self, policy: &str) -> &[RunResult] {
        self.results.get(policy).map_or(&[], Vec::as_slice)
    }

    /// The median of a policy's unallocated share over its seeds.
    pub fn median(&self, policy: &str) -> Option<f64> {
        let rs = self.runs(policy);
        if rs.is_empty() {
            return None;
        }
        let vals: Vec<f64> = rs.iter().map(RunResult::unallocated).collect();
        Some(median(&vals))
    }
}

/// The curves in the published CSV shape:
/// workload,sc_policy,tune,seed,total_gpus,0..130, values to two places.
pub fn curves_csv(lr: &ListResult, pick: fn(&RunResult) -> &[f64; COLUMNS]) -> String {
    let workload = workload_name(&lr.pods);
    let mut out = String::new();
    let mut header: Vec<String> = ["workload", "sc_policy", "tune", "seed", "total_gpus"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend((0..COLUMNS).map(|c| c.to_string()));
    csv_row(&mut out, &header);
    for p in &lr.policies {
        for r in lr.runs(p) {
            let mut row = vec![
                workload.clone(),
                published_label(p).unwrap_or(p).to_string(),
                format_float(lr.tune),
                r.seed.to_string(),
                r.total_gpus.to_string(),
            ];
            row.extend(pick(r).iter().map(|v| format!("{v:.2}")));
            csv_row(&mut out, &row);
        }
    }
    out
}

/// One CSV record as Go's encoding/csv writes it (LF line ends; a field is
/// quoted when it holds a comma, a quote, CR or LF, starts with a space,
/// or is `\.`).
fn csv_row(out: &mut String, fields: &[String]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let quote = !f.is_empty()
            && (f == "\\."
                || f.contains([',', '"', '\r', '\n'])
                || f.starts_with(char::is_whitespace));
        if quote {
            out.push('"');
            out.push_str(&f.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(f);
        }
    }
    out.push('\n');
}

/// The Markdown table of one pod list: each policy's median beside the
/// published one, and its seeds.
pub fn summary_md(lr: &ListResult, published: Option<&Published>) -> String {
    let workload = workload_name(&lr.pods);
    let total = lr
        .results
        .values()
        .find_map(|rs| rs.first())
        .map_or(0, |r| r.total_gpus);
    let mut out = String::new();
    let _ = writeln!(out, "# Fill experiment: {workload}\n");
    let _ = writeln!(
        out,
        "Unallocated GPUs (% of {total}) when the arrived workload reaches 100% of capacity; median over seeds {}; tune {}.\n",
        seed_range(&lr.seeds),
        format_g(lr.tune, Some(2))
    );
    out.push_str("| policy | ours (median) | published (median) | difference | seeds (ours) |\n");
    out.push_str("|---|---|---|---|---|\n");
    for p in &lr.policies {
        let vals: Vec<f64> = lr.runs(p).iter().map(RunResult::unallocated).collect();
        let seeds: Vec<String> = vals.iter().map(|v| format!("{v:.2}")).collect();
        let ours = median(&vals);
        let (publ, diff) = match published.and_then(|pb| pb.median_unallocated(&workload, p)) {
            Some(v) => (format!("{v:.2}"), format!("{:+.2}", ours - v)),
            None => ("—".to_string(), "—".to_string()),
        };
        let _ = writeln!(
            out,
            "| {p} | {ours:.2} | {publ} | {diff} | {} |",
            seeds.join(" ")
        );
    }
    out
}

/// "42–51 (10 seeds)".
fn seed_range(seeds: &[i64]) -> String {
    let (Some(lo), Some(hi)) = (seeds.iter().min(), seeds.iter().max()) else {
        return String::new();
    };
    format!("{lo}–{hi} ({} seeds)", seeds.len())
}

/// The mean allocation curve of each policy over its seeds, from 50 %
/// arrived workload, where policies start to differ.
pub fn alloc_svg(lr: &ListResult) -> String {
    let workload = workload_name(&lr.pods);
    let mut c = Chart {
        title: format!("GPU allocation rate vs arrived workload — {workload}"),
        x_label: "arrived workload (% of cluster GPUs)".to_string(),
        y_label: "GPU allocation rate (%)".to_string(),
        x_min: 50.0,
        x_max: 130.0,
        y_min: 50.0,
        y_max: 100.0,
        ..Chart::default()
    };
    for p in &lr.policies {
        let rs = lr.runs(p);
        if rs.is_empty() {
            continue;
        }
        let points = (50..COLUMNS)
            .map(|col| {
                let sum: f64 = rs.iter().fold(0.0, |s, r| s + r.alloc[col]);
                Point {
                    x: col as f64,
                    y: sum / rs.len() as f64,
                }
            })
            .collect();
        c.series.push(Series {
            name: p.clone(),
            points,
            ..Series::default()
        });
    }
    c.render()
}

/// How far a baseline's median may sit from the published one: 1.0 point
/// for random (its per-seed spread is larger, and its draws depended on
/// goroutine order in the original), 0.5 for the rest.
fn fidelity_tolerance(policy: &str) -> f64 {
    if policy == "random" { 1.0 } else { 0.5 }
}

/// The tables across pod lists (the README of `--out` with several
/// lists): our baselines beside the published medians, partita beside
/// FGD's published median, and each list's wall time. `command` is the
/// flags as given, echoed in the regeneration line.
pub fn readme(all: &[ListResult], published: Option<&Published>, command: &str) -> String {
    let mut out = String::new();
    out.push_str("# Fill experiment on the Alibaba GPU 2023 trace\n\n");
    let _ = write!(
        out,
        "Regenerate with:\n\n    partita bench fill {command}\n\n"
    );
    out.push_str("Values: unallocated GPUs (% of 6,212) when the arrived workload reaches 100 % of capacity, median over seeds.\n\n");
    write_fidelity(&mut out, all, published);
    write_versus_fgd(&mut out, all, published);
    out.push_str("## Wall time per pod list (all policies and seeds)\n\n");
    for lr in all {
        let _ = writeln!(
            out,
            "- {}: {:.1} s",
            workload_name(&lr.pods),
            lr.wall_seconds
        );
    }
    out
}

fn write_fidelity(out: &mut String, all: &[ListResult], published: Option<&Published>) {
    let baselines = [
        "random",
        "dot-product",
        "gpu-clustering",
        "gpu-packing",
        "best-fit",
        "fgd",
    ];
    out.push_str("## Fidelity: our baselines (published)\n\n");
    out.push_str("Within tolerance (random ±1.0, others ±0.5) unless marked ✗.\n\n");
    let _ = writeln!(out, "| pod list | {} |", baselines.join(" | "));
    let _ = writeln!(out, "|---{}|", "|---".repeat(baselines.len()));
    for lr in all {
        let w = workload_name(&lr.pods);
        let mut row = vec![w.clone()];
        for p in baselines {
            let Some(ours) = lr.median(p) else {
                row.push("—".to_string());
                continue;
            };
            let cell = match published.and_then(|pb| pb.median_unallocated(&w, p)) {
                Some(publ) => {
                    let mark = if (ours - publ).abs() > fidelity_tolerance(p) + 1e-9 {
                        " ✗"
                    } else {
                        ""
                    };
                    format!("{ours:.2} ({publ:.2}){mark}")
                }
                None => format!("{ours:.2}"),
            };
            row.push(cell);
        }
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

fn write_versus_fgd(out: &mut String, all: &[ListResult], published: Option<&Published>) {
    out.push_str("## Partita against FGD\n\n");
    out.push_str("Target: at most 0.8 × FGD's published median on every pod list.\n\n");
    out.push_str("| pod list | partita | FGD (ours) | FGD (published) | partita / published FGD | target met |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for lr in all {
        let w = workload_name(&lr.pods);
        let Some(p) = lr.median("partita") else {
            continue;
        };
        let f = lr.median("fgd").unwrap_or(0.0);
        let publ = published.and_then(|pb| pb.median_unallocated(&w, "fgd"));
        let (pub_cell, ratio, met) = match publ {
            Some(v) if v > 0.0 => (
                format!("{v:.2}"),
                format!("{:.2}", p / v),
                if p <= 0.8 * v { "yes" } else { "no" },
            ),
            Some(v) => (format!("{v:.2}"), "—".to_string(), "—"),
            None => ("—".to_string(), "—".to_string(), "—"),
        };
        let _ = writeln!(
            out,
            "| {w} | {p:.2} | {f:.2} | {pub_cell} | {ratio} | {met} |"
        );
    }
    out.push('\n');
}
