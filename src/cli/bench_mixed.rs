//! `partita bench mixed`: a scenario's simulated week under each scheduler
//! (Go: `go/cmd/partita/benchmixed.go`). One seed gives each scheduler's
//! result (a table, or JSON with `--json`) and, with `--out`, the report
//! and its charts; `--seeds` runs every scheduler on every seed on worker
//! threads and summarizes each scheduler over them.
//!
//! Not ported: the Go build's `--cpuprofile` and `--memprofile` (Go's
//! pprof); the flags are refused with that reason. Profile the Rust build
//! with a sampling profiler (`perf record`).

use std::fmt;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::anyhow;
use partita_engine::scenario::duration::{SECOND, format_duration, parse_duration};
use partita_engine::scenario::{self, Scenario, go_open_error};
use partita_engine::sim::mixed::{self, RunResult, Summary};
use serde::Serialize;

use super::{parse_seeds, split_list, usage_error};
use crate::output::{JsonMap, write_json};

/// The flags of `partita bench mixed`, as the Go build names them, with
/// its defaults and help texts.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchMixedArgs {
    /// scenario file
    #[arg(long, default_value = "scenarios/default.yaml")]
    pub scenario: PathBuf,

    /// schedulers to compare: naive, gang-drf, partita
    #[arg(long, default_value = "naive,gang-drf,partita")]
    pub policies: String,

    /// job-stream seed (0: the scenario's)
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub seed: i64,

    /// write report.md and SVG charts to this directory
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// print one JSON object
    #[arg(long)]
    pub json: bool,

    /// simulate this long instead of the scenario's duration
    #[arg(long, default_value = "0s", value_parser = duration_flag, allow_negative_numbers = true)]
    pub horizon: i64,

    /// write every decision carried out to this file (one run only)
    #[arg(long)]
    pub trace: Option<PathBuf>,

    /// not in the Rust build (Go's pprof); use a sampling profiler
    #[arg(long, hide = true)]
    pub cpuprofile: Option<String>,

    /// not in the Rust build (Go's pprof); use a sampling profiler
    #[arg(long, hide = true)]
    pub memprofile: Option<String>,

    /// run every seed of a range (1-144) or list (1,5,9) and summarize each scheduler over them (not with --seed, --out or --trace)
    #[arg(long, default_value = "")]
    pub seeds: String,

    /// parallel runs with --seeds (0: one per CPU)
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub workers: i64,

    /// the longest the scheduler waits between cycles while work waits (0: 60 s, the standalone server's 1 s tick at 60x)
    #[arg(long = "cycle-every", default_value = "0s", value_parser = duration_flag, allow_negative_numbers = true)]
    pub cycle_every: i64,

    /// the least time between two full cycles, so that events close together share one (0: 5 s, about the standalone server's 100 ms at 60x)
    #[arg(long, default_value = "0s", value_parser = duration_flag, allow_negative_numbers = true)]
    pub coalesce: i64,

    /// GPUs partita keeps free of borrowed batch and best-effort work and borrowed production on whole GPUs, for production (-1: the scenario's production_reserve_gpus)
    #[arg(long = "production-reserve", default_value_t = -1.0, allow_negative_numbers = true)]
    pub production_reserve: f64,
}

/// A duration flag, read as Go's `time.ParseDuration` reads it.
fn duration_flag(s: &str) -> Result<i64, String> {
    parse_duration(s).ok_or_else(|| "parse error".to_string())
}

/// Runs `bench mixed`. A [`super::UsageError`] for bad flag values (exit
/// 2), any other error for a failed run (exit 1).
pub fn run(
    args: &BenchMixedArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> anyhow::Result<()> {
    for (name, set) in [
        ("--cpuprofile", &args.cpuprofile),
        ("--memprofile", &args.memprofile),
    ] {
        if set.is_some() {
            return Err(usage_error(format!(
                "{name} is Go's pprof and not in the Rust build: profile it with a sampling profiler (perf record)"
            )));
        }
    }
    let mut seeds = None;
    if !args.seeds.is_empty() {
        for (name, set) in [
            ("--seed", args.seed != 0),
            ("--out", args.out.is_some()),
            ("--trace", args.trace.is_some()),
        ] {
            if set {
                return Err(usage_error(format!(
                    "--seeds runs many job streams; {name} is for one"
                )));
            }
        }
        let mut list = parse_seeds(&args.seeds)
            .map_err(|e| usage_error(format!("--seeds: {e}")))?
            .0;
        list.dedup(); // parse_seeds sorts
        seeds = Some(list);
    }
    if args.workers < 0 {
        return Err(usage_error(format!(
            "--workers {}: want 0 (one per CPU) or more",
            args.workers
        )));
    }
    for (name, d) in [
        ("cycle-every", args.cycle_every),
        ("coalesce", args.coalesce),
    ] {
        if d != 0 && d < SECOND {
            return Err(usage_error(format!(
                "--{name} {}: want 1s or more (0: the default)",
                format_duration(d)
            )));
        }
    }
    let mut reserve = None; // the scenario's
    let r = args.production_reserve;
    if r != -1.0 {
        // Also refuses NaN, which no comparison accepts.
        if r.is_nan() || r < 0.0 || r.is_infinite() {
            return Err(usage_error(format!(
                "--production-reserve {}: want a number of GPUs, 0 or more (-1: the scenario's)",
                partita_engine::numfmt::format_g(r, None)
            )));
        }
        reserve = Some(r);
    }
    let mut sc = load(&args.scenario)?;
    if args.horizon > 0 {
        sc.duration = args.horizon;
    }
    // What every run shares; each sets its scheduler and seed.
    let world = mixed::Options {
        production_reserve_gpus: reserve,
        cycle_every: args.cycle_every,
        coalesce: args.coalesce,
        ..mixed::Options::default()
    };
    let policies = split_list(&args.policies);
    if let Some(seeds) = seeds {
        let workers = match args.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n as usize,
        };
        return run_seeds(
            &sc, &policies, &seeds, workers, &world, args.json, stdout, stderr,
        );
    }
    let seed = if args.seed == 0 { sc.seed } else { args.seed };
    let mut trace = match &args.trace {
        Some(path) => Some(TraceFile::create(path)?),
        None => None,
    };
    let mut results = Vec::new();
    for name in &policies {
        let start = Instant::now();
        let opt = mixed::Options {
            scheduler: name.clone(),
            seed,
            ..world.clone()
        };
        let r = mixed::run(
            &sc,
            &opt,
            &mut read_trace_file,
            trace.as_mut().map(|t| t as &mut dyn fmt::Write),
        )
        .map_err(|e| anyhow!("{name}: {e}"))?;
        writeln!(
            stderr,
            "bench mixed {name}: {} simulated in {:.1}s",
            format_duration(sc.duration),
            start.elapsed().as_secs_f64()
        )?;
        results.push(r);
    }
    if let Some(t) = trace {
        t.finish()?;
    }
    if let Some(out) = &args.out {
        let command: Vec<String> = std::env::args().skip(3).collect();
        write_report(
            out,
            &format!("partita bench mixed {}", command.join(" ")),
            &results,
        )?;
    }
    if args.json {
        #[derive(Serialize)]
        struct Out<'a> {
            scenario: &'a str,
            policies: JsonMap<&'a RunResult>,
        }
        let out = Out {
            scenario: &sc.name,
            policies: results.iter().map(|r| (r.scheduler.clone(), r)).collect(),
        };
        return write_json(stdout, &out);
    }
    writeln!(
        stdout,
        "{:<9} {:>8} {:>8} {:>4} {:>10} {:>10} {:>8} {:>6} {:>7}",
        "scheduler", "useful", "alloc", "OOM", "prod p95", "batch p95", "viol.", "Jain", "preempt"
    )?;
    for r in &results {
        let p95 = |class: &str| r.wait_p95.get(class).copied().unwrap_or(0.0);
        let jain = r
            .jain_fairness
            .map_or_else(|| "n/a".to_string(), |j| format!("{j:.3}"));
        writeln!(
            stdout,
            "{:<9} {:8.3} {:8.3} {:4} {:9.0}s {:9.0}s {:7.0}s {:>6} {:7}",
            r.scheduler,
            r.useful_utilization,
            r.allocated_utilization,
            r.oom_events,
            p95("production"),
            p95("batch"),
            r.guarantee_violation,
            jain,
            r.preemptions
        )?;
    }
    Ok(())
}

/// Reads and checks the scenario file, with the Go build's errors.
fn load(path: &Path) -> anyhow::Result<Scenario> {
    let name = path.to_string_lossy();
    let data = fs::read(path).map_err(|e| anyhow!("{name}: {}", go_open_error(&name, &e)))?;
    Ok(scenario::parse(data, &name)?)
}

/// The text of the trace files a scenario's workloads name.
fn read_trace_file(path: &str) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| go_open_error(path, &e))
}

/// `--trace`: the world writes text; the file is written through a
/// buffer, and its first error is kept for the end.
struct TraceFile {
    out: BufWriter<fs::File>,
    err: Option<io::Error>,
}

impl TraceFile {
    fn create(path: &Path) -> anyhow::Result<TraceFile> {
        let f = fs::File::create(path)
            .map_err(|e| anyhow!("open {}: {}", path.display(), io_reason(&e)))?;
        Ok(TraceFile {
            out: BufWriter::new(f),
            err: None,
        })
    }

    fn finish(mut self) -> anyhow::Result<()> {
        if let Some(e) = self.err.take() {
            return Err(e.into());
        }
        self.out.flush()?;
        Ok(())
    }
}

impl fmt::Write for TraceFile {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.err.is_none()
            && let Err(e) = self.out.write_all(s.as_bytes())
        {
            self.err = Some(e);
        }
        Ok(())
    }
}

/// The reason of an I/O error as Go's os package words it.
fn io_reason(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_lowercase(),
        None => s,
    }
}

/// Writes report.md, utilization.svg and teams-<scheduler>.svg into `dir`.
fn write_report(dir: &Path, command: &str, results: &[RunResult]) -> anyhow::Result<()> {
    fs::create_dir_all(dir)?;
    write_file(&dir.join("report.md"), &mixed::report_md(command, results))?;
    write_file(
        &dir.join("utilization.svg"),
        &mixed::utilization_svg(results),
    )?;
    for r in results {
        write_file(
            &dir.join(format!("teams-{}.svg", r.scheduler)),
            &mixed::teams_svg(r),
        )?;
    }
    Ok(())
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    fs::write(path, text).map_err(|e| anyhow!("open {}: {}", path.display(), io_reason(&e)))
}

/// `--seeds`: every scheduler on every seed, on `workers` threads, then a
/// summary per scheduler. Each run is independent and deterministic, so
/// the threads never change a result.
#[allow(clippy::too_many_arguments)]
fn run_seeds(
    sc: &Scenario,
    policies: &[String],
    seeds: &[i64],
    workers: usize,
    world: &mixed::Options,
    json: bool,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> anyhow::Result<()> {
    let runs: Vec<(usize, usize)> = (0..policies.len())
        .flat_map(|p| (0..seeds.len()).map(move |k| (p, k)))
        .collect();
    let total = runs.len();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel();
    let mut results: Vec<Vec<Option<Result<RunResult, String>>>> =
        vec![(0..seeds.len()).map(|_| None).collect(); policies.len()];
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers.min(total).max(1) {
            let tx = tx.clone();
            let (runs, next) = (&runs, &next);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(p, k)) = runs.get(i) else { break };
                    let opt = mixed::Options {
                        scheduler: policies[p].clone(),
                        seed: seeds[k],
                        ..world.clone()
                    };
                    let res =
                        mixed::run(sc, &opt, &mut read_trace_file, None).map_err(|e| e.to_string());
                    if tx.send((p, k, res)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (done, (p, k, res)) in rx.iter().enumerate() {
            results[p][k] = Some(res);
            let _ = write!(
                stderr,
                "\rbench mixed: {}/{total} runs, {:.1}s",
                done + 1,
                start.elapsed().as_secs_f64()
            );
        }
    });
    writeln!(stderr)?;
    let mut by_policy: Vec<Vec<RunResult>> = Vec::with_capacity(policies.len());
    for (p, runs) in results.into_iter().enumerate() {
        let mut ok = Vec::with_capacity(runs.len());
        for (k, res) in runs.into_iter().enumerate() {
            // The first error in order, whichever failed first.
            match res {
                Some(Ok(r)) => ok.push(r),
                Some(Err(e)) => return Err(anyhow!("{}, seed {}: {e}", policies[p], seeds[k])),
                None => return Err(anyhow!("{}, seed {}: not run", policies[p], seeds[k])),
            }
        }
        by_policy.push(ok);
    }
    if json {
        #[derive(Serialize)]
        struct PerPolicy<'a> {
            summary: Summary,
            seeds: JsonMap<&'a RunResult>,
        }
        #[derive(Serialize)]
        struct Out<'a> {
            scenario: &'a str,
            seeds: &'a [i64],
            policies: JsonMap<PerPolicy<'a>>,
        }
        let mut out = Out {
            scenario: &sc.name,
            seeds,
            policies: JsonMap::new(),
        };
        for (p, name) in policies.iter().enumerate() {
            let pp = PerPolicy {
                summary: mixed::summarize(&by_policy[p]),
                seeds: by_policy[p]
                    .iter()
                    .zip(seeds)
                    .map(|(r, s)| (s.to_string(), r))
                    .collect(),
            };
            out.policies.insert(name.clone(), pp);
        }
        return write_json(stdout, &out);
    }
    writeln!(
        stdout,
        "{} seeds, {} to {}, of {}; targets: useful >= {:.2}, production p95 <= {:.0} s, Jain >= {:.1}, no OOM, no guarantee violation",
        seeds.len(),
        seeds[0],
        seeds[seeds.len() - 1],
        sc.name,
        mixed::TARGET_USEFUL,
        mixed::TARGET_PRODUCTION_P95,
        mixed::TARGET_JAIN
    )?;
    let row = |out: &mut dyn Write, c: [&str; 14]| {
        writeln!(
            out,
            "{:<9} {:>7} {:>7} {:>7} {:>7} {:>5} {:>10} {:>10} {:>7} {:>9} {:>4} {:>8} {:>5} {:>7}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13]
        )
    };
    row(
        stdout,
        [
            "scheduler",
            "useful",
            "min",
            "useful",
            "p95",
            "both",
            "violation",
            "owed",
            "no",
            "Jain",
            "OOM",
            "preempt",
            "all",
            "all met",
        ],
    )?;
    row(
        stdout,
        [
            "", "mean", "", "met", "met", "met", "s", "clock s", "violat.", "met", "", "", "met",
            "(owed)",
        ],
    )?;
    let mut last = Summary::default();
    for (p, name) in policies.iter().enumerate() {
        let m = mixed::summarize(&by_policy[p]);
        writeln!(
            stdout,
            "{:<9} {:7.3} {:7.3} {:7} {:7} {:5} {:10.0} {:10.0} {:7} {:>9} {:4} {:8} {:5} {:7}",
            name,
            m.useful_mean,
            m.useful_min,
            m.useful_met,
            m.production_p95_met,
            m.both_met,
            m.violation_total,
            m.violation_owed_total,
            m.no_violation,
            format!("{}/{}", m.jain_met, m.jain_seeds),
            m.oom_events,
            m.preemptions,
            m.all_targets_met,
            m.all_targets_met_owed
        )?;
        last = m;
    }
    if !policies.is_empty() {
        // The same for every scheduler (it depends on the seeds only): the
        // last summary's.
        writeln!(
            stdout,
            "offered load (the streams' GPU-time over the cluster's): mean {:.3}, least {:.3}, under 1 on {} of {} seeds",
            last.offered_load_mean, last.offered_load_min, last.below_capacity, last.seeds
        )?;
    }
    Ok(())
}
