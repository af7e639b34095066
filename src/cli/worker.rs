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
    /// a scenario file (docs/scenario.md) whose nodes are the virtual cluster and whose teams seed a new database; default the built-in demo cluster; `kubernetes`: run the jobs as pods on a Kubernetes cluster (--kubeconfig) that `partita kube` schedules
    #[arg(long, value_name = "FILE|kubernetes")]
    pub cluster: Option<PathBuf>,
    /// with --cluster kubernetes: the kubeconfig file; default in-cluster, else $KUBECONFIG or ~/.kube/config
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// with --cluster kubernetes: the container image of every task of a job
    #[arg(
        long,
        value_name = "IMAGE",
        default_value = "registry.k8s.io/pause:3.10"
    )]
    pub job_image: String,
    /// with --cluster kubernetes: the command of every task, repeated for each word (default: the image's)
    #[arg(long = "job-command", value_name = "WORD")]
    pub job_command: Vec<String>,
    /// with --cluster kubernetes: the spec.schedulerName of the jobs' pods
    #[arg(long, default_value = crate::k8s::names::DEFAULT_SCHEDULER_NAME)]
    pub scheduler_name: String,
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
    pub async fn options(&self) -> anyhow::Result<worker::Options> {
        let on_kubernetes = self.kubernetes();
        let scenario = worker::load_scenario(self.cluster.as_deref().filter(|_| !on_kubernetes))?;
        let mut opt = worker::Options::new(scenario, self.speed);
        opt.seed = self.seed;
        if on_kubernetes {
            opt.kube = Some(worker::kube_loop::KubeOptions {
                config: kube_config(self.kubeconfig.as_deref()).await?,
                template: worker::kube::PodTemplate {
                    scheduler_name: self.scheduler_name.clone(),
                    image: self.job_image.clone(),
                    command: self.job_command.clone(),
                },
                tick: std::time::Duration::from_secs(1),
            });
        }
        Ok(opt)
    }

    /// `--cluster kubernetes` (a scenario file of that name is
    /// `./kubernetes`).
    pub fn kubernetes(&self) -> bool {
        self.cluster.as_deref() == Some(std::path::Path::new("kubernetes"))
    }
}

/// The in-cluster configuration, else the kubeconfig named, else
/// $KUBECONFIG or ~/.kube/config (as `partita kube`).
pub async fn kube_config(path: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    Ok(crate::k8s::client::config(path).await?)
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
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let opt = args.cluster.options().await?;
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
