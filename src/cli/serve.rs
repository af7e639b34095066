//! `partita serve`: the server on PostgreSQL. It opens the database (the
//! embedded PostgreSQL in `DATA_DIR/postgres`, or the one `--database-url`
//! names), migrates it, creates the admin account on the first start,
//! starts the background worker (unless `--no-worker`) and serves the API
//! until SIGTERM or Ctrl-C, then stops the worker and the embedded
//! PostgreSQL.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::db::bootstrap::{self, Bootstrap};
use crate::db::{Database, Settings};
use crate::metrics::Metrics;
use crate::server::cluster::ClusterShape;
use crate::server::{self, AppState};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// where the embedded PostgreSQL (DATA_DIR/postgres) and admin.token live
    #[arg(long, value_name = "DIR", default_value = "./partita-data")]
    pub data_dir: PathBuf,
    /// an external PostgreSQL (postgres://...); without it, Partita runs its own in DATA_DIR/postgres
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// address to listen on (port 0: any free port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// run the web server only, without the background worker (run `partita worker` beside it)
    #[arg(long)]
    pub no_worker: bool,
    #[command(flatten)]
    pub cluster: super::worker::ClusterArgs,
}

/// Runs the server until SIGTERM or Ctrl-C. The first line on stdout says
/// where it listens.
pub fn run(args: &ServeArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    init_logging();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(serve(args, stdout))
}

async fn serve(args: &ServeArgs, stdout: &mut dyn Write) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating the data dir {}", args.data_dir.display()))?;
    let database = match &args.database_url {
        Some(url) => Database::open_external(url).await?,
        None => Database::open_embedded(&args.data_dir, Settings::default()).await?,
    };
    tracing::info!(
        database = database.description(),
        "database ready (migrated)"
    );
    // From here, an error still stops the embedded PostgreSQL (on drop).
    match bootstrap::ensure_admin(&database.pool, &args.data_dir).await? {
        Bootstrap::Created(path) => {
            tracing::info!(path = %path.display(), "first start: created the admin user; its token is in this file (mode 0600)")
        }
        Bootstrap::Existing => {}
    }
    // What an earlier run (stopped, or killed mid-stream) left: every
    // acknowledged job was committed before its answer, so it is here; the
    // worker then takes up the unfinished ones (its own log lines).
    let found = crate::store::found(&database.pool)
        .await
        .context("reading what the database holds")?;
    tracing::info!(
        jobs = found.jobs(),
        ledger_rows = found.ledger_rows,
        "recovered from the database: {found}"
    );
    // The worker's counters are exposed only where the worker runs
    // (crate::metrics).
    let metrics = Arc::new(Metrics::new(!args.no_worker));
    let worker = match args.no_worker {
        true => None,
        false => {
            let mut opt = args.cluster.options()?;
            opt.metrics = metrics.worker();
            Some(crate::worker::spawn(database.pool.clone(), opt))
        }
    };
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    writeln!(
        stdout,
        "Partita listening on http://{addr} (the API at /api/v1; {}; {}; data in {})",
        if args.no_worker {
            "no worker: run `partita worker` beside it"
        } else {
            "the worker runs the virtual cluster"
        },
        database.description(),
        args.data_dir.display()
    )?;
    stdout.flush()?;
    let mut state = AppState::new(database.pool.clone());
    state.metrics = metrics;
    // Submissions are checked against the cluster the worker runs (with
    // `--no-worker`, the one named here: give the web server and the
    // worker the same file).
    if let Some(path) = &args.cluster.cluster {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the cluster {}", path.display()))?;
        let shape = ClusterShape::from_scenario(&text, &path.display().to_string())
            .map_err(|e| anyhow::anyhow!(e))?;
        state.cluster = Arc::new(shape);
    }
    let app = server::app(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving")?;
    tracing::info!("stopping");
    if let Some(worker) = worker {
        worker.stop().await;
    }
    database.close().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        () = ctrl_c => tracing::info!("interrupted (Ctrl-C)"),
        () = term => tracing::info!("terminated (SIGTERM)"),
    }
}

/// Logs to stderr (colour on a terminal), at `RUST_LOG`'s levels or by
/// default info, sqlx's warnings only. Once per process; a second call
/// (the tests run many servers in one) keeps the first.
pub(crate) fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
