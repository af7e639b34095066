//! `partita bench fill`: the FGD fill protocol on the Alibaba trace (Go:
//! `go/cmd/partita/bench.go`, `runBenchFill`).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{anyhow, bail};
use clap::builder::NonEmptyStringValueParser;
use partita_engine::sim::fill;
use partita_engine::trace;
use serde::Serialize;

use super::{Seeds, parse_seeds, split_list, usage_error};
use crate::output::{JsonMap, write_json};

/// The flags of `partita bench fill`, as the Go build names them, with its
/// defaults and help texts.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchFillArgs {
    /// node list CSV (openb_node_list_gpu_node.csv)
    #[arg(long, required = true, value_parser = NonEmptyStringValueParser::new())]
    pub nodes: String,

    // Split a list with `cli::split_list`; a directory is listed by the run
    // (Go's `podLists`).
    /// pod list CSV (openb_pod_list_*.csv); several separated by commas, or a directory for all openb_pod_list_*.csv in it
    #[arg(long, required = true, value_parser = NonEmptyStringValueParser::new())]
    pub pods: String,

    // Split it with `cli::split_list`.
    /// comma-separated policies
    #[arg(
        long,
        default_value = "random,dot-product,gpu-clustering,gpu-packing,best-fit,fgd,partita"
    )]
    pub policies: String,

    /// seeds: a range 42-51 or a list 42,43
    #[arg(long, default_value = "42-51", value_parser = parse_seeds)]
    pub seeds: Seeds,

    /// inflate (or trim) the pod list to this multiple of the cluster's GPUs
    #[arg(long, default_value_t = 1.3)]
    pub tune: f64,

    /// write curves CSV, a Markdown table and an SVG chart to this directory (one subdirectory per pod list when there are several)
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// print one JSON object (an array of them for several pod lists) instead of a table
    #[arg(long)]
    pub json: bool,

    /// beyond the protocol: let the policy move placed shares to make room for a pod that fits nowhere
    #[arg(long)]
    pub defrag: bool,

    /// parallel runs (0 = one per CPU)
    #[arg(long, default_value_t = 0)]
    pub workers: usize,

    /// no progress on stderr
    #[arg(long)]
    pub quiet: bool,

    /// published curves (analysis_allo_discrete.csv); default: ../fgd-expected beside the pod lists, when present
    #[arg(long)]
    pub expected: Option<PathBuf>,
}

/// Runs the fill experiment: a table (or JSON with `--json`) on `stdout`,
/// progress on `stderr` unless `--quiet`, the report files under `--out`.
/// A [`super::UsageError`] for bad flag values (exit 2), any other error
/// for a failed run (exit 1).
pub fn run(
    args: &BenchFillArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> anyhow::Result<()> {
    if args.defrag {
        return Err(usage_error(
            "--defrag is not in the Rust build: it gained little and was not deterministic (docs/fill.md, \"Beyond the protocol\")",
        ));
    }
    let pod_paths = pod_lists(&args.pods).map_err(|e| usage_error(format!("--pods: {e}")))?;
    let nodes = read_trace(&args.nodes, trace::read_nodes)?;
    let published = read_published(args.expected.as_deref(), &pod_paths[0])?;
    let policies = split_list(&args.policies);
    let workers = if args.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        args.workers
    };
    let mut all = Vec::new();
    for pods_path in &pod_paths {
        let pods = read_trace(pods_path, trace::read_pods)?;
        let input = fill::Input::new(nodes.clone(), pods);
        let start = Instant::now();
        let name = file_name(pods_path);
        let progress = |done: usize, total: usize, err: &mut dyn Write| {
            if !args.quiet {
                let _ = write!(
                    err,
                    "\rbench fill {name}: {done}/{total} runs, {:.1}s",
                    start.elapsed().as_secs_f64()
                );
                if done == total {
                    let _ = writeln!(err);
                }
            }
        };
        let results = run_grid(
            &input,
            &policies,
            &args.seeds.0,
            args.tune,
            workers,
            stderr,
            &progress,
        )?;
        let lr = fill::ListResult {
            pods: pods_path.clone(),
            policies: policies.clone(),
            seeds: args.seeds.0.clone(),
            tune: args.tune,
            results,
            wall_seconds: start.elapsed().as_secs_f64(),
        };
        if let Some(out) = &args.out {
            let dir = if pod_paths.len() > 1 {
                out.join(fill::workload_name(pods_path))
            } else {
                out.clone()
            };
            write_report(&dir, &lr, published.as_ref())?;
        }
        if !args.json {
            print_table(stdout, &lr)?;
        }
        all.push(lr);
    }
    if let Some(out) = &args.out
        && all.len() > 1
    {
        let command: Vec<String> = std::env::args().skip(3).collect();
        write_file(
            &out.join("README.md"),
            &fill::readme(&all, published.as_ref(), &command.join(" ")),
        )?;
    }
    if args.json {
        print_json(stdout, &all)?;
    }
    Ok(())
}

/// Runs every (policy, seed) of one pod list on `workers` threads and
/// returns the results by policy, each in seed order. Each run is
/// independent and deterministic, so the threads never change a result.
fn run_grid(
    input: &fill::Input,
    policies: &[String],
    seeds: &[i64],
    tune: f64,
    workers: usize,
    stderr: &mut dyn Write,
    progress: &(dyn Fn(usize, usize, &mut dyn Write) + Sync),
) -> anyhow::Result<BTreeMap<String, Vec<fill::RunResult>>> {
    let jobs: Vec<fill::Options> = policies
        .iter()
        .flat_map(|p| {
            seeds.iter().map(|&seed| fill::Options {
                policy: p.clone(),
                seed,
                tune,
            })
        })
        .collect();
    let total = jobs.len();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel();
    let mut out: BTreeMap<String, Vec<fill::RunResult>> = BTreeMap::new();
    let mut first_err = None;
    std::thread::scope(|scope| {
        for _ in 0..workers.min(total).max(1) {
            let tx = tx.clone();
            let (jobs, next) = (&jobs, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let res = fill::run(input, job)
                        .map_err(|e| anyhow!("policy {} seed {}: {e}", job.policy, job.seed));
                    if tx.send(res).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (done, res) in rx.iter().enumerate() {
            match res {
                Ok(r) => out.entry(r.policy.clone()).or_default().push(r),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
            progress(done + 1, total, stderr);
        }
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    for rs in out.values_mut() {
        rs.sort_by_key(|r| r.seed);
    }
    Ok(out)
}

/// Expands `--pods`: a directory (every openb_pod_list_*.csv in it, in
/// name order) or a comma-separated list.
fn pod_lists(arg: &str) -> anyhow::Result<Vec<String>> {
    let path = Path::new(arg);
    if path.is_dir() {
        let mut paths: Vec<String> = fs::read_dir(path)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("openb_pod_list_") && n.ends_with(".csv"))
            .map(|n| path.join(n).to_string_lossy().into_owned())
            .collect();
        if paths.is_empty() {
            bail!("no openb_pod_list_*.csv in {arg}");
        }
        paths.sort();
        return Ok(paths);
    }
    let paths = split_list(arg);
    if paths.is_empty() {
        bail!("no pod list in {arg:?}");
    }
    Ok(paths)
}

fn read_trace<T, E: std::fmt::Display>(
    path: &str,
    read: impl Fn(fs::File, &str) -> Result<T, E>,
) -> anyhow::Result<T> {
    let f = fs::File::open(path).map_err(|e| anyhow!("open {path}: {}", io_reason(&e)))?;
    read(f, path).map_err(|e| anyhow!("{e}"))
}

/// The reason of an I/O error as Go's os package words it ("no such file
/// or directory"), without Rust's " (os error 2)".
fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_lowercase(),
        None => s,
    }
}

/// The published curves named by `--expected`, or found beside the pod
/// lists (shared/data/fgd-expected); none when there are none.
fn read_published(flag: Option<&Path>, pods_path: &str) -> anyhow::Result<Option<fill::Published>> {
    let path = match flag {
        Some(p) => p.to_path_buf(),
        None => {
            let dir = Path::new(pods_path)
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new(""));
            let p = dir.join("fgd-expected").join("analysis_allo_discrete.csv");
            if !p.exists() {
                return Ok(None);
            }
            p
        }
    };
    let name = path.to_string_lossy().into_owned();
    let text = fs::read_to_string(&path).map_err(|e| anyhow!("open {name}: {}", io_reason(&e)))?;
    Ok(Some(fill::parse_published(&text, &name)?))
}

fn write_report(
    dir: &Path,
    lr: &fill::ListResult,
    published: Option<&fill::Published>,
) -> anyhow::Result<()> {
    fs::create_dir_all(dir)?;
    write_file(
        &dir.join("curves_alloc.csv"),
        &fill::curves_csv(lr, |r| &r.alloc),
    )?;
    write_file(
        &dir.join("curves_frag.csv"),
        &fill::curves_csv(lr, |r| &r.frag),
    )?;
    write_file(&dir.join("summary.md"), &fill::summary_md(lr, published))?;
    write_file(&dir.join("alloc.svg"), &fill::alloc_svg(lr))?;
    Ok(())
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    fs::write(path, text).map_err(|e| anyhow!("{}: {}", path.display(), io_reason(&e)))
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// One policy of a list in the JSON output, in the Go build's shape.
#[derive(Serialize)]
struct PolicyJson {
    median_unallocated_at_100: f64,
    seeds: JsonMap<f64>,
    #[serde(skip_serializing_if = "JsonMap::is_empty")]
    failed_pods: JsonMap<usize>,
}

#[derive(Serialize)]
struct ListJson {
    pods: String,
    policies: JsonMap<PolicyJson>,
}

fn print_json(stdout: &mut dyn Write, all: &[fill::ListResult]) -> anyhow::Result<()> {
    let lists: Vec<ListJson> = all
        .iter()
        .map(|lr| {
            let mut policies = JsonMap::new();
            for p in &lr.policies {
                let runs = lr.results.get(p).map_or(&[][..], Vec::as_slice);
                let vals: Vec<f64> = runs.iter().map(fill::RunResult::unallocated).collect();
                policies.insert(
                    p.clone(),
                    PolicyJson {
                        median_unallocated_at_100: fill::median(&vals),
                        seeds: runs
                            .iter()
                            .map(|r| (r.seed.to_string(), r.unallocated()))
                            .collect(),
                        failed_pods: runs
                            .iter()
                            .map(|r| (r.seed.to_string(), r.failed))
                            .collect(),
                    },
                );
            }
            ListJson {
                pods: file_name(&lr.pods),
                policies,
            }
        })
        .collect();
    if let [one] = lists.as_slice() {
        write_json(stdout, one)
    } else {
        write_json(stdout, &lists)
    }
}

fn print_table(out: &mut dyn Write, lr: &fill::ListResult) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: unallocated GPU % at arrived workload = 100% (median over seeds)",
        file_name(&lr.pods)
    )?;
    for p in &lr.policies {
        let runs = lr.results.get(p).map_or(&[][..], Vec::as_slice);
        let vals: Vec<f64> = runs.iter().map(fill::RunResult::unallocated).collect();
        let seeds: Vec<String> = vals.iter().map(|v| format!("{v:.2}")).collect();
        writeln!(
            out,
            "  {p:<15} {:6.2}   [{}]",
            fill::median(&vals),
            seeds.join(" ")
        )?;
    }
    Ok(())
}
