//! `partita mig`: MIG geometry, listing layouts and checking where a
//! profile fits (Go: `go/cmd/partita/mig.go`).

use std::io::Write;

use clap::Subcommand;
use clap::builder::NonEmptyStringValueParser;

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
    #[arg(long, value_name = "model", required = true, value_parser = NonEmptyStringValueParser::new())]
    pub gpu: String,

    /// print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

/// The flags of `partita mig fit`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigFitArgs {
    /// GPU model or alias, e.g. H100-80GB (partita mig models lists them)
    #[arg(long, value_name = "model", required = true, value_parser = NonEmptyStringValueParser::new())]
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
    #[arg(long, value_name = "profile", required = true, value_parser = NonEmptyStringValueParser::new())]
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
    let _ = (args, out);
    anyhow::bail!("not ported yet")
}

/// `partita mig profiles`: a model's MIG profiles, as a table or JSON.
pub fn run_profiles(args: &MigGpuArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = (args, out);
    anyhow::bail!("not ported yet")
}

/// `partita mig layouts`: every maximal layout of a model, drawn or JSON.
pub fn run_layouts(args: &MigGpuArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = (args, out);
    anyhow::bail!("not ported yet")
}

/// `partita mig fit`: where `--want` fits beside `--used`, as text or JSON
/// (`{gpu,used,want,fits,placements,reasons?}`).
pub fn run_fit(args: &MigFitArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let _ = (args, out);
    anyhow::bail!("not ported yet")
}
