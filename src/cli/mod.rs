//! The command line: what `partita` accepts, parsed by clap, and which
//! function runs each subcommand.
//!
//! The flags, their defaults and help texts are the Go build's
//! (`go/cmd/partita`), spelled `--flag value` or `--flag=value`. Exit
//! codes are Go's too: 0 on success and after `--help`, 2 for a usage
//! error (clap's own, or a [`UsageError`] from a run function), 1 for any
//! other error.

pub mod bench_api;
pub mod bench_fill;
pub mod bench_mixed;
pub mod client;
pub mod client_admin;
pub mod client_jobs;
pub mod kube;
pub mod mig;
pub mod serve;
pub mod sim;
pub mod worker;

use std::fmt;
use std::io::Write;

use clap::{Parser, Subcommand};

/// Partita: workload-aware GPU orchestration for mixed inference and
/// training.
#[derive(Debug, Parser)]
#[command(
    name = "partita",
    about = "Partita: workload-aware GPU orchestration for mixed inference and training.",
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The top-level subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// client: teams, projects, users, tokens and the audit log (partita admin teams|projects|users|tokens|audit …)
    Admin(client_admin::AdminCommand),
    /// benchmarks: fill (FGD protocol on the Alibaba trace), mixed (inference + training), api (server load)
    Bench(BenchCommand),
    /// client: cancel jobs (partita cancel ID...)
    Cancel(client_jobs::IdsArgs),
    /// Kubernetes: write the CRDs of Partita's custom resources, generated from their Rust types
    Crdgen(CrdgenArgs),
    /// client: the cluster's nodes, GPUs, MIG slices and utilization
    Cluster(client_jobs::ClusterArgs),
    /// client: list jobs, or show one with its events (partita jobs ID)
    Jobs(client_jobs::JobsArgs),
    /// MIG geometry: list layouts, check where a profile fits
    Mig(mig::MigCommand),
    /// client: move a queued job up or down in its team's queue, within its class (partita move ID up|down)
    Move(client_jobs::MoveArgs),
    /// run as a Kubernetes scheduler for pods with schedulerName partita (in-cluster or --kubeconfig)
    Kube(Box<kube::KubeArgs>),
    /// client: queued jobs with positions and estimated starts
    Queue(client_jobs::QueueArgs),
    /// client: usage or chargeback report (partita report usage|chargeback)
    Report(client_admin::ReportCommand),
    /// client: put jobs that hold resources back in their team's queue (partita requeue ID...)
    Requeue(client_jobs::IdsArgs),
    /// the server on PostgreSQL: the JSON API, the background worker and the virtual cluster
    Serve(serve::ServeArgs),
    /// a small demo: place a mixed inference and training workload with several policies
    Sim(sim::SimArgs),
    /// client: submit a job to a running server
    // Boxed: its many flags would make every command as large.
    Submit(Box<client_jobs::SubmitArgs>),
    /// the background worker alone: queued jobs to placements on the virtual cluster (one active at a time)
    Worker(worker::WorkerArgs),
}

/// `partita bench <subcommand>`.
#[derive(Debug, clap::Args)]
#[command(subcommand_required = true, arg_required_else_help = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub command: BenchSubcommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchSubcommand {
    /// the FGD fill protocol on the Alibaba trace: unallocated GPUs as the arrived workload grows
    Fill(bench_fill::BenchFillArgs),
    /// inference and training over a simulated week under each scheduler: utilization, waits, guarantees, fairness
    Mixed(bench_mixed::BenchMixedArgs),
    /// load on a running server: concurrent job submissions over keep-alive connections; submissions/s and latency percentiles
    Api(bench_api::BenchApiArgs),
}

impl Command {
    /// What the Go build writes before an error message of this command
    /// (`bench fill: ...`, `partita mig fit: ...`).
    pub fn error_prefix(&self) -> &'static str {
        match self {
            Command::Admin(a) => a.command.error_prefix(),
            Command::Cancel(_) => "cancel",
            Command::Crdgen(_) => "crdgen",
            Command::Cluster(_) => "cluster",
            Command::Jobs(_) => "jobs",
            Command::Kube(_) => "kube",
            Command::Move(_) => "move",
            Command::Queue(_) => "queue",
            Command::Report(r) => r.command.error_prefix(),
            Command::Requeue(_) => "requeue",
            Command::Submit(_) => "submit",
            Command::Bench(b) => match b.command {
                BenchSubcommand::Fill(_) => "bench fill",
                BenchSubcommand::Mixed(_) => "bench mixed",
                BenchSubcommand::Api(_) => "bench api",
            },
            Command::Mig(m) => m.command.error_prefix(),
            Command::Serve(_) => "serve",
            Command::Sim(_) => "sim",
            Command::Worker(_) => "worker",
        }
    }
}

/// Runs the parsed command. Results go to `stdout`; progress and other
/// diagnostics to `stderr`; errors are returned for `main` to print.
pub fn run(cli: &Cli, stdout: &mut dyn Write, stderr: &mut dyn Write) -> anyhow::Result<()> {
    match &cli.command {
        Command::Admin(a) => client_admin::admin(a, stdout, stderr),
        Command::Cancel(args) => {
            client_jobs::change_jobs(args, client_jobs::JobAction::Cancel, stdout)
        }
        Command::Cluster(args) => client_jobs::cluster(args, stdout),
        Command::Crdgen(args) => crdgen(args, stdout),
        Command::Jobs(args) => client_jobs::jobs(args, stdout),
        Command::Kube(args) => kube::run(args),
        Command::Move(args) => client_jobs::move_job(args, stdout),
        Command::Queue(args) => client_jobs::queue(args, stdout),
        Command::Report(r) => client_admin::report(r, stdout),
        Command::Requeue(args) => {
            client_jobs::change_jobs(args, client_jobs::JobAction::Requeue, stdout)
        }
        Command::Submit(args) => client_jobs::submit(args, stdout),
        Command::Bench(b) => match &b.command {
            BenchSubcommand::Fill(args) => bench_fill::run(args, stdout, stderr),
            BenchSubcommand::Mixed(args) => bench_mixed::run(args, stdout, stderr),
            BenchSubcommand::Api(args) => bench_api::run(args, stdout, stderr),
        },
        Command::Mig(m) => mig::run(m, stdout),
        Command::Serve(args) => serve::run(args, stdout),
        Command::Sim(args) => sim::run(args, stdout),
        Command::Worker(args) => worker::run(args),
    }
}

/// An error in how the command was called, found after parsing (a
/// required flag left empty, a bad `--seeds`): `main` exits 2 for it, as
/// the Go build does for its flag errors. Return one with
/// [`usage_error`].
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A [`UsageError`] as an `anyhow::Error`, so that `main` exits 2.
pub fn usage_error(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// Whether `err` is a usage error (exit 2) rather than a failure (exit 1).
pub fn is_usage_error(err: &anyhow::Error) -> bool {
    err.is::<UsageError>()
}

/// Splits a comma-separated flag value, trimming spaces and dropping empty
/// items, as Go's `splitList`: `"a, b,,c"` gives `["a", "b", "c"]`.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

/// At most this many seeds in a `--seeds` list: each seed is a whole run.
pub const MAX_SEEDS: i64 = 10_000;

/// A `--seeds` value: the seeds in increasing order (a seed listed twice
/// runs twice, as in Go).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeds(pub Vec<i64>);

/// Reads `--seeds`: a range `42-51`, a list `42,43,47`, or both
/// (`1-3,7`). Go's `parseSeeds`, with its messages.
pub fn parse_seeds(s: &str) -> Result<Seeds, String> {
    let mut seeds: Vec<i64> = Vec::new();
    for part in split_list(s) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo, Some(hi)),
            None => (part.as_str(), None),
        };
        let a: i64 = lo.parse().map_err(|_| format!("{part:?} is not a seed"))?;
        let mut b = a;
        if let Some(hi) = hi {
            b = match hi.parse::<i64>() {
                Ok(b) if b >= a => b,
                _ => return Err(format!("{part:?} is not a seed range")),
            };
            // i128: b - a overflows i64 for a range from a negative seed.
            if i128::from(b) - i128::from(a) >= i128::from(MAX_SEEDS) {
                return Err(format!("{part:?}: more than {MAX_SEEDS} seeds"));
            }
        }
        seeds.extend(a..=b);
        if seeds.len() as i64 > MAX_SEEDS {
            return Err(format!("{s:?}: more than {MAX_SEEDS} seeds in all"));
        }
    }
    if seeds.is_empty() {
        return Err(format!("no seeds in {s:?}"));
    }
    seeds.sort_unstable();
    Ok(Seeds(seeds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("partita").chain(args.iter().copied()))
    }

    fn usage_exit(args: &[&str]) -> (i32, String) {
        let err = parse(args).expect_err("a usage error");
        (err.exit_code(), err.to_string())
    }

    fn seeds_error(s: &str) -> String {
        match parse_seeds(s) {
            Ok(seeds) => panic!("{s:?} read as {} seeds", seeds.0.len()),
            Err(e) => e,
        }
    }

    #[test]
    fn seeds_read_as_go_reads_them() {
        assert_eq!(
            parse_seeds("42-51").unwrap().0,
            (42..=51).collect::<Vec<_>>()
        );
        assert_eq!(parse_seeds("47, 42,43").unwrap().0, [42, 43, 47]);
        assert_eq!(parse_seeds("1-3,2").unwrap().0, [1, 2, 2, 3]);
        assert_eq!(
            parse_seeds("9223372036854775807-9223372036854775807")
                .unwrap()
                .0,
            [i64::MAX]
        );
        // The messages are Go's, quoting as Go's %q does for plain text.
        assert_eq!(seeds_error("x"), r#""x" is not a seed"#);
        assert_eq!(seeds_error("51-42"), r#""51-42" is not a seed range"#);
        assert_eq!(seeds_error("1-x"), r#""1-x" is not a seed range"#);
        assert_eq!(
            seeds_error("1-10001"),
            r#""1-10001": more than 10000 seeds"#
        );
        assert_eq!(
            seeds_error("1-6000,1-6000"),
            r#""1-6000,1-6000": more than 10000 seeds in all"#
        );
        assert_eq!(seeds_error(" , "), r#"no seeds in " , ""#);
        // Go reads -5 as a range from an empty start.
        assert_eq!(seeds_error("-5"), r#""-5" is not a seed"#);
        assert_eq!(parse_seeds("1-10000").map(|s| s.0.len()), Ok(10_000));
    }

    #[test]
    fn lists_drop_spaces_and_empty_items() {
        assert_eq!(split_list(" a, b,,c ,"), ["a", "b", "c"]);
        assert!(split_list("").is_empty());
    }

    #[test]
    fn bench_fill_flags_and_defaults_are_gos() {
        let cli = parse(&["bench", "fill", "--nodes", "n.csv", "--pods=p.csv"]).unwrap();
        let Command::Bench(BenchCommand {
            command: BenchSubcommand::Fill(a),
        }) = cli.command
        else {
            panic!("not bench fill");
        };
        assert_eq!(a.nodes, "n.csv");
        assert_eq!(a.pods, "p.csv");
        assert_eq!(
            a.policies,
            "random,dot-product,gpu-clustering,gpu-packing,best-fit,fgd,partita"
        );
        assert_eq!(a.seeds, Seeds((42..=51).collect()));
        assert_eq!(a.tune, 1.3);
        assert_eq!(a.out, None);
        assert!(!a.json && !a.defrag && !a.quiet);
        assert_eq!(a.workers, 0);
        assert_eq!(a.expected, None);

        let cli = parse(&[
            "bench",
            "fill",
            "--nodes",
            "n",
            "--pods",
            "p",
            "--policies",
            "fgd",
            "--seeds",
            "1,2",
            "--tune=0.9",
            "--out",
            "dir",
            "--json",
            "--defrag",
            "--workers",
            "3",
            "--quiet",
            "--expected",
            "e.csv",
        ])
        .unwrap();
        let Command::Bench(BenchCommand {
            command: BenchSubcommand::Fill(a),
        }) = cli.command
        else {
            panic!("not bench fill");
        };
        assert_eq!(a.policies, "fgd");
        assert_eq!(a.seeds.0, [1, 2]);
        assert_eq!(a.tune, 0.9);
        assert_eq!(a.out.as_deref(), Some(std::path::Path::new("dir")));
        assert!(a.json && a.defrag && a.quiet);
        assert_eq!(a.workers, 3);
        assert_eq!(a.expected.as_deref(), Some(std::path::Path::new("e.csv")));
    }

    #[test]
    fn mig_flags_parse() {
        let cli = parse(&[
            "mig",
            "fit",
            "--gpu",
            "H100-80GB",
            "--used=3g.40gb@0",
            "--want",
            "2g.20gb",
            "--json",
        ])
        .unwrap();
        let Command::Mig(mig::MigCommand {
            command: mig::MigSubcommand::Fit(a),
        }) = &cli.command
        else {
            panic!("not mig fit");
        };
        assert_eq!(
            (a.gpu.as_str(), a.used.as_str(), a.want.as_str(), a.json),
            ("H100-80GB", "3g.40gb@0", "2g.20gb", true)
        );
        assert_eq!(cli.command.error_prefix(), "partita mig fit");

        let cli = parse(&["mig", "layouts", "--gpu", "a100"]).unwrap();
        assert_eq!(cli.command.error_prefix(), "partita mig layouts");
        let cli = parse(&["mig", "models"]).unwrap();
        assert_eq!(cli.command.error_prefix(), "partita mig models");
        let cli = parse(&["mig", "fit", "--gpu", "a100", "--want", "1g.5gb"]).unwrap();
        let Command::Mig(mig::MigCommand {
            command: mig::MigSubcommand::Fit(a),
        }) = &cli.command
        else {
            panic!("not mig fit");
        };
        assert_eq!(a.used, "", "--used defaults to an empty GPU");
    }

    #[test]
    fn usage_errors_exit_2_and_name_the_flag() {
        // Each command line split at spaces, and what its message names.
        let cases = [
            ("bench fill --nodes n --pods p --nope", "--nope"),
            ("bench fill --pods p", "--nodes"),
            ("bench fill --nodes n", "--pods"),
            ("bench fill --nodes= --pods p", "--nodes"),
            ("bench fill --nodes n --pods p --seeds 51-42", "\"51-42\""),
            ("bench fill --nodes n --pods p --seeds x", "--seeds"),
            ("bench fill --nodes n --pods p --tune much", "--tune"),
            ("bench fill --nodes n --pods p --workers -1", "-1"),
            ("bench fill --nodes n --pods p stray", "stray"),
            ("mig layouts --nope", "--nope"),
            ("mig layouts --gpu H100-80GB extra", "extra"),
            ("mig bogus", "bogus"),
            ("bogus", "bogus"),
        ];
        for (line, names) in cases {
            let args: Vec<&str> = line.split(' ').collect();
            let (code, message) = usage_exit(&args);
            assert_eq!(code, 2, "{line}: {message}");
            assert!(
                message.contains(names),
                "{line}: {message:?} does not name {names}"
            );
        }
    }

    #[test]
    fn a_missing_subcommand_shows_the_usage_and_exits_2() {
        for args in [&[][..], &["mig"], &["bench"]] {
            let (code, message) = usage_exit(args);
            assert_eq!(code, 2, "{args:?}");
            assert!(message.contains("Usage"), "{args:?}: {message}");
        }
    }

    #[test]
    fn help_exits_0_and_lists_the_flags() {
        for (args, shows) in [
            (&["--help"][..], "mig"),
            (&["mig", "--help"], "layouts"),
            (&["mig", "help"], "fit"),
            (&["mig", "fit", "-h"], "--want"),
            (&["bench", "fill", "--help"], "--expected"),
        ] {
            let err = parse(args).expect_err("help is an early exit");
            assert_eq!(err.exit_code(), 0, "{args:?}");
            assert!(err.to_string().contains(shows), "{args:?}: {err}");
        }
    }

    #[test]
    fn usage_errors_are_told_apart() {
        assert!(is_usage_error(&usage_error(
            "--nodes and --pods are required"
        )));
        assert!(!is_usage_error(&anyhow::anyhow!("no such file")));
        assert!(is_usage_error(
            &usage_error("--seeds: bad").context("while reading flags")
        ));
    }
}

/// `partita crdgen`.
#[derive(Debug, Clone, clap::Args)]
pub struct CrdgenArgs {
    /// where to write them ("-": standard output)
    #[arg(long, default_value = "deploy/kubernetes/crds.yaml")]
    pub out: std::path::PathBuf,
    /// write nothing; fail when the file differs from what the types give
    #[arg(long)]
    pub check: bool,
}

/// Writes (or checks) the CRDs generated from `crate::k8s::resources`.
fn crdgen(args: &CrdgenArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let yaml = crate::k8s::resources::crds_yaml().map_err(|e| anyhow::anyhow!(e))?;
    if args.out.as_os_str() == "-" {
        stdout.write_all(yaml.as_bytes())?;
        return Ok(());
    }
    if args.check {
        let committed = std::fs::read_to_string(&args.out)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", args.out.display()))?;
        if committed != yaml {
            anyhow::bail!(
                "{} differs from the types in src/k8s/resources.rs: run `partita crdgen`",
                args.out.display()
            );
        }
        return Ok(());
    }
    std::fs::write(&args.out, &yaml)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", args.out.display()))?;
    writeln!(stdout, "wrote {}", args.out.display())?;
    Ok(())
}
