//! `partita worker`: the background worker alone (`src/worker/`), for a
//! deployment whose web servers run `partita serve --no-worker`. Exactly
//! one worker is active at a time (a PostgreSQL advisory lock); others
//! wait and take over when it dies.

use std::path::PathBuf;

use anyhow::Context;

use crate::db::{Database, Settings};
use crate::worker;

/// The virtual cluster's flags, shared by `serve` and `worker` (the Go
/// build's `serve --cluster --speed --seed`).
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// a scenario file (docs/scenario.md) whose nodes are the virtual cluster and whose teams seed a new database; default the built-in demo cluster
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// cluster seconds per wall second: a 2 h job takes 2 minutes at 60
    #[arg(long, default_value_t = 60.0, value_parser = positive_speed)]
    pub speed: f64,
    /// the scheduler's random seed
    #[arg(long, default_value_t = 1)]
    pub seed: i64,
}

fn positive_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

impl ClusterArgs {
    /// The worker's options for these flags.
    pub fn options(&self) -> anyhow::Result<worker::Options> {
        let scenario = worker::load_scenario(self.cluster.as_deref())?;
        let mut opt = worker::Options::new(scenario, self.speed);
        opt.seed = self.seed;
        Ok(opt)
    }
}

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// where the embedded PostgreSQL (DATA_DIR/postgres) lives, when no --database-url is given
    #[arg(long, value_name = "DIR", default_value = "./partita-data")]
    pub data_dir: PathBuf,
    /// the PostgreSQL the web servers use (postgres://...); without it, Partita runs its own in DATA_DIR/postgres
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Runs the worker until SIGTERM or Ctrl-C.
pub fn run(args: &WorkerArgs) -> anyhow::Result<()> {
    super::serve::init_logging();
    let opt = args.cluster.options()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let database = match &args.database_url {
            Some(url) => Database::open_external(url).await?,
            None => {
                std::fs::create_dir_all(&args.data_dir).with_context(|| {
                    format!("creating the data dir {}", args.data_dir.display())
                })?;
                Database::open_embedded(&args.data_dir, Settings::default()).await?
            }
        };
        tracing::info!(database = database.description(), worker = %opt.id, "worker starting");
        let handle = worker::spawn(database.pool.clone(), opt);
        super::serve::shutdown_signal().await;
        handle.stop().await;
        database.close().await?;
        Ok(())
    })
}
