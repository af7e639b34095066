//! `partita mig`: MIG geometry, listing layouts and checking where a
//! profile fits (Go: `go/cmd/partita/mig.go`).

use std::io::Write;

use anyhow::{anyhow, bail};
use partita_engine::gpu::{self, Layout, Model, ModelRef, Placement};
use partita_engine::quote::quote;
use serde::Serialize;
use tabwriter::TabWriter;

use super::usage_error;
use crate::output::write_json;

use clap::Subcommand;

/// `partita mig <subcommand>`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    subcommand_required = true,
    arg_required_else_help = true,
    after_help = "Layouts are written profile@start,... e.g. 3g.40gb@0,2g.20gb@4;\n\
                  start is the first of the GPU's 8 memory slices the instance takes."
)]
pub struct MigCommand {
    #[command(subcommand)]
    pub command: MigSubcommand,
}

/// The subcommands of `partita mig`, in the order the usage lists them.
#[derive(Debug, Clone, Subcommand)]
pub enum MigSubcommand {
    /// list the GPU models Partita knows
    Models(MigModelsArgs),
    /// list the MIG profiles of a model (--gpu)
    Profiles(MigGpuArgs),
    /// list every way to fill a GPU with MIG instances (--gpu)
    Layouts(MigGpuArgs),
    /// show where a profile (--want) fits beside instances already on a GPU (--used)
    Fit(MigFitArgs),
}

impl MigSubcommand {
    /// What the Go build writes before this subcommand's error messages.
    pub fn error_prefix(&self) -> &'static str {
        match self {
            MigSubcommand::Models(_) => "partita mig models",
            MigSubcommand::Profiles(_) => "partita mig profiles",
            MigSubcommand::Layouts(_) => "partita mig layouts",
            MigSubcommand::Fit(_) => "partita mig fit",
        }
    }
}

/// The flags of `partita mig models`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigModelsArgs {
    /// print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// The flags of `partita mig profiles` and `partita mig layouts`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigGpuArgs {
    /// GPU model or alias, e.g. H100-80GB (partita mig models lists them)
    #[arg(
        long,
        value_name = "model",
        default_value = "",
        hide_default_value = true
    )]
    pub gpu: String,

    /// print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// The flags of `partita mig fit`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigFitArgs {
    /// GPU model or alias, e.g. H100-80GB (partita mig models lists them)
    #[arg(
        long,
        value_name = "model",
        default_value = "",
        hide_default_value = true
    )]
    pub gpu: String,

    /// layout of the instances already on the GPU, e.g. 3g.40gb@0,1g.10gb@4
    #[arg(
        long,
        value_name = "layout",
        default_value = "",
        hide_default_value = true
    )]
    pub used: String,

    /// the profile to place, e.g. 2g.20gb
    #[arg(
        long,
        value_name = "profile",
        default_value = "",
        hide_default_value = true
    )]
    pub want: String,

    /// print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// Runs a `partita mig` subcommand, writing its table or JSON to `out`.
/// An unknown or non-MIG `--gpu`, or a bad `--used`/`--want`, is an error
/// (exit 1, as in Go); `mig fit` succeeds when the profile does not fit.
pub fn run(command: &MigCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match &command.command {
        MigSubcommand::Models(args) => run_models(args, out),
        MigSubcommand::Profiles(args) => run_profiles(args, out),
        MigSubcommand::Layouts(args) => run_layouts(args, out),
        MigSubcommand::Fit(args) => run_fit(args, out),
    }
}

/// `partita mig models`: the catalog, as a table or JSON.
pub fn run_models(args: &MigModelsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let models = gpu::catalog();
    if args.json {
        return write_json(out, models);
    }
    let mut tw = table(out);
    writeln!(tw, "MODEL\tMIG\tMEMORY MiB\tSMs\tALIASES")?;
    for m in models {
        let mig = if m.mig {
            format!("{} profiles", m.profiles.len())
        } else {
            "no".to_string()
        };
        writeln!(
            tw,
            "{}\t{}\t{}\t{}\t{}",
            m.name,
            mig,
            or_unknown(m.memory_mib),
            or_unknown(i64::from(m.sms)),
            m.aliases.join(", ")
        )?;
    }
    tw.flush()?;
    Ok(())
}

/// `partita mig profiles`: a model's MIG profiles, as a table or JSON.
pub fn run_profiles(args: &MigGpuArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let m = mig_model(&args.gpu)?;
    if args.json {
        return write_json(out, &m.profiles);
    }
    writeln!(
        out,
        "{} MIG profiles ({} compute slices, {} memory slices):\n",
        m.name,
        gpu::COMPUTE_SLICES,
        gpu::MEMORY_SLICES
    )?;
    let mut tw = table(out);
    writeln!(
        tw,
        "PROFILE\tCOMPUTE\tMEMORY\tMiB\tSMs\tSTARTS\tMAX/GPU\tMEDIA ENGINES"
    )?;
    for p in &m.profiles {
        let starts: Vec<String> = p.starts.iter().map(i32::to_string).collect();
        let media = if p.media_ext {
            "yes (one per GPU)"
        } else {
            "no"
        };
        writeln!(
            tw,
            "{}\t{}/{}\t{}/{}\t{}\t{}\t{}\t{}\t{}",
            p.name,
            p.compute,
            gpu::COMPUTE_SLICES,
            p.memory,
            gpu::MEMORY_SLICES,
            p.memory_mib,
            p.sms,
            starts.join(","),
            p.max_per_gpu,
            media
        )?;
    }
    tw.flush()?;
    Ok(())
}

/// `partita mig layouts`: every maximal layout of a model, drawn or JSON.
pub fn run_layouts(args: &MigGpuArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let m = mig_model(&args.gpu)?;
    let layouts = m.maximal_layouts();
    if args.json {
        return write_json(out, &layouts);
    }
    writeln!(
        out,
        "{}: {} maximal MIG layouts (no +me profiles); each box is one of the {} memory slices\n",
        m.name,
        layouts.len(),
        gpu::MEMORY_SLICES
    )?;
    let width = cell_width(&m, &layouts);
    let picture_width = width * gpu::MEMORY_SLICES as usize;
    writeln!(
        out,
        "{:>4}  {:<picture_width$}  {:<7}  layout",
        "#", "memory slices 0-7", "compute"
    )?;
    for (i, l) in layouts.iter().enumerate() {
        writeln!(
            out,
            "{:>4}  {}  {:<7}  {}",
            i + 1,
            draw_layout(&m, l, width),
            compute_used(&m, l),
            l
        )?;
    }
    Ok(())
}

/// The answer of `partita mig fit`, in the Go build's JSON shape.
#[derive(Debug, Serialize)]
pub struct FitResult {
    pub gpu: String,
    pub used: Layout,
    pub want: String,
    pub fits: bool,
    pub placements: Vec<Placement>,
    /// Why each allowed start fails, when none fits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// `partita mig fit`: where `--want` fits beside `--used`, as text or JSON
/// (`{gpu,used,want,fits,placements,reasons?}`).
pub fn run_fit(args: &MigFitArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let m = mig_model(&args.gpu)?;
    if args.want.is_empty() {
        return Err(usage_error(format!(
            "--want is required, e.g. --want {}",
            m.profiles[0].name
        )));
    }
    let res = fit(&m, &args.used, &args.want)?;
    if args.json {
        return write_json(out, &res);
    }
    print_fit(out, &m, &res)?;
    Ok(())
}

/// Where `want` fits beside the layout `used_text`; errors name the flag
/// and the value.
pub fn fit(m: &Model, used_text: &str, want: &str) -> anyhow::Result<FitResult> {
    let used = Layout::parse(used_text).map_err(|e| anyhow!("--used: {e}"))?;
    m.validate(&used)
        .map_err(|e| anyhow!("--used {}: {e}", quote(used_text)))?;
    let p = m.profile(want).map_err(|e| anyhow!("--want: {e}"))?;
    let placements = m.free_placements(&used, &p.name)?;
    let mut res = FitResult {
        gpu: m.name.clone(),
        used,
        want: p.name.to_string(),
        fits: !placements.is_empty(),
        placements,
        reasons: Vec::new(),
    };
    if !res.fits {
        // Validate says why: trying each allowed start gives the first rule
        // that start breaks.
        for &start in p.starts.iter() {
            let mut trial = res.used.0.clone();
            trial.push(Placement::new(p.name.clone(), start));
            if let Err(e) = m.validate(&trial) {
                res.reasons.push(e.to_string());
            }
        }
    }
    Ok(res)
}

fn print_fit(out: &mut dyn Write, m: &Model, res: &FitResult) -> std::io::Result<()> {
    let beside = if res.used.is_empty() {
        format!("an empty {}", m.name)
    } else {
        format!("{} beside {}", m.name, res.used)
    };
    if !res.fits {
        writeln!(out, "{} does not fit on {beside}:", res.want)?;
        for r in &res.reasons {
            writeln!(out, "  {r}")?;
        }
        return Ok(());
    }
    let places = if res.placements.len() == 1 {
        "place"
    } else {
        "places"
    };
    writeln!(
        out,
        "{} fits on {beside} at {} {places}:",
        res.want,
        res.placements.len()
    )?;
    let trials: Vec<Layout> = res
        .placements
        .iter()
        .map(|pl| {
            let mut l = res.used.clone();
            l.push(pl.clone());
            l
        })
        .collect();
    let width = cell_width(m, &trials);
    for (pl, trial) in res.placements.iter().zip(&trials) {
        writeln!(
            out,
            "  {:<12} {}",
            pl.to_string(),
            draw_layout(m, trial, width)
        )?;
    }
    Ok(())
}

/// Resolves `--gpu` to a MIG-capable model; an unknown or non-MIG model is
/// an error that lists the MIG models.
fn mig_model(name: &str) -> anyhow::Result<ModelRef> {
    // Checked here, not by clap, so that the message is the Go build's.
    if name.is_empty() {
        return Err(usage_error("--gpu is required, e.g. --gpu H100-80GB"));
    }
    let m = gpu::lookup(name);
    let mig_names: Vec<&str> = gpu::catalog()
        .iter()
        .filter(|c| c.mig)
        .map(|c| c.name.as_str())
        .collect();
    if !m.known {
        bail!(
            "--gpu: unknown GPU model {} (MIG models: {})",
            quote(&m.name),
            mig_names.join(", ")
        );
    }
    if !m.mig {
        bail!(
            "--gpu: model {} does not support MIG (MIG models: {})",
            quote(&m.name),
            mig_names.join(", ")
        );
    }
    Ok(m)
}

/// A table as Go's `tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)` writes it.
fn table(out: &mut dyn Write) -> TabWriter<&mut dyn Write> {
    TabWriter::new(out).minwidth(0).padding(2)
}

fn or_unknown(n: i64) -> String {
    if n == 0 {
        "unknown".to_string()
    } else {
        n.to_string()
    }
}

/// The width of one memory slice in `draw_layout`: enough for every
/// instance's name and brackets within the slices it spans.
fn cell_width(m: &Model, layouts: &[Layout]) -> usize {
    let mut width = "[free]".len();
    for l in layouts {
        for pl in l.iter() {
            if let Ok(p) = m.profile(&pl.profile) {
                let span = p.memory as usize;
                width = width.max((pl.profile.len() + 2).div_ceil(span));
            }
        }
    }
    width
}

/// Pictures a valid layout as boxes over the memory slices:
/// "[3g.40gb          ][2g.20gb    ][1g.10gb][ free ]".
fn draw_layout(m: &Model, l: &[Placement], width: usize) -> String {
    let slices = gpu::MEMORY_SLICES as usize;
    let mut owner: Vec<Option<&Placement>> = vec![None; slices];
    for pl in l {
        if let Ok(start) = usize::try_from(pl.start)
            && start < slices
        {
            owner[start] = Some(pl);
        }
    }
    let mut b = String::new();
    let mut s = 0;
    while s < slices {
        let (span, label) = match owner[s].and_then(|pl| Some((m.profile(&pl.profile).ok()?, pl))) {
            Some((p, pl)) => (p.memory as usize, pl.profile.to_string()),
            None => (1, "free".to_string()),
        };
        let inner = span * width - 2;
        let text = if owner[s].is_none() {
            centre(&label, inner)
        } else {
            label
        };
        b.push_str(&format!("[{text:<inner$}]"));
        s += span;
    }
    b
}

fn centre(s: &str, width: usize) -> String {
    if s.len() >= width {
        return s.to_string();
    }
    format!("{}{s}", " ".repeat((width - s.len()) / 2))
}

fn compute_used(m: &Model, l: &[Placement]) -> String {
    let used: i32 = l
        .iter()
        .filter_map(|pl| m.profile(&pl.profile).ok())
        .map(|p| p.compute)
        .sum();
    format!("{used}/{}", gpu::COMPUTE_SLICES)
}
