//! `partita bench fill`: the FGD fill protocol on the Alibaba trace (Go:
//! `go/cmd/partita/bench.go`, `runBenchFill`).

use std::io::Write;
use std::path::PathBuf;

use clap::builder::NonEmptyStringValueParser;

use super::{Seeds, parse_seeds};

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
    let _ = (args, stdout, stderr);
    anyhow::bail!("not ported yet")
}
