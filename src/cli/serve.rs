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
    #[command(flatten)]
    pub portal: PortalArgs,
}

/// The portal's settings: where users reach it, and single sign-on with
/// OpenID Connect (on when `--oidc-issuer` is given).
#[derive(Debug, clap::Args)]
pub struct PortalArgs {
    /// where users reach the portal, e.g. https://partita.example.com (https:// makes cookies Secure); default http://LISTEN
    #[arg(long, value_name = "URL", env = "PARTITA_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// single sign-on: the OpenID provider's issuer URL (as its discovery document says it)
    #[arg(long, value_name = "URL", env = "PARTITA_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// single sign-on: this server's client id at the provider
    #[arg(
        long,
        value_name = "ID",
        env = "PARTITA_OIDC_CLIENT_ID",
        default_value = "partita"
    )]
    pub oidc_client_id: String,
    /// single sign-on: the client secret (better in the environment than on the command line)
    #[arg(
        long,
        value_name = "SECRET",
        env = "PARTITA_OIDC_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub oidc_client_secret: Option<crate::portal::sso::Secret>,
    /// single sign-on: where the provider sends users back (default PUBLIC_URL/auth/callback)
    #[arg(long, value_name = "URL", env = "PARTITA_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
    /// single sign-on: the claim whose values map to team and role (rules at /admin/sso)
    #[arg(
        long,
        value_name = "NAME",
        env = "PARTITA_OIDC_CLAIM",
        default_value = "groups"
    )]
    pub oidc_claim: String,
    /// single sign-on: the scopes asked for, space-separated
    #[arg(
        long,
        value_name = "SCOPES",
        env = "PARTITA_OIDC_SCOPES",
        default_value = "openid email profile groups"
    )]
    pub oidc_scopes: String,
}

impl PortalArgs {
    /// The portal's configuration for a server listening on `addr`.
    /// Single sign-on's provider is not contacted here.
    pub fn config(
        &self,
        addr: std::net::SocketAddr,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<crate::portal::Config> {
        let public_url = self
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"))
            .trim_end_matches('/')
            .to_string();
        anyhow::ensure!(
            public_url.starts_with("http://") || public_url.starts_with("https://"),
            "--public-url {public_url:?}: an http:// or https:// URL, please"
        );
        let sso = match &self.oidc_issuer {
            None => None,
            Some(issuer) => {
                let secret = self.oidc_client_secret.clone().ok_or_else(|| {
                    anyhow::anyhow!(
                        "--oidc-issuer needs --oidc-client-secret (or PARTITA_OIDC_CLIENT_SECRET)"
                    )
                })?;
                let settings = crate::portal::sso::Settings {
                    issuer: issuer.trim().to_string(),
                    client_id: self.oidc_client_id.clone(),
                    client_secret: secret,
                    redirect_url: self
                        .oidc_redirect_url
                        .clone()
                        .unwrap_or_else(|| format!("{public_url}/auth/callback")),
                    post_logout_redirect_url: format!("{public_url}/"),
                    claim: self.oidc_claim.clone(),
                    scopes: self
                        .oidc_scopes
                        .split_whitespace()
                        .map(str::to_string)
                        .collect(),
                };
                Some(Arc::new(crate::portal::sso::Sso::new(settings)?))
            }
        };
        Ok(crate::portal::Config {
            secure_cookies: public_url.starts_with("https://"),
            data_dir: data_dir.display().to_string(),
            public_url,
            sso,
            ..crate::portal::Config::default()
        })
    }
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
            let mut opt = args.cluster.options().await?;
            opt.metrics = metrics.worker();
            Some(crate::worker::spawn(database.pool.clone(), opt))
        }
    };
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    // Checked before saying where it listens: a wrong setting stops it.
    let portal = args.portal.config(addr, &args.data_dir)?;
    writeln!(
        stdout,
        "Partita listening on http://{addr} (the API at /api/v1; {}; {}; data in {})",
        if args.no_worker {
            "no worker: run `partita worker` beside it"
        } else if args.cluster.kubernetes() {
            "the worker runs jobs as pods on the Kubernetes cluster"
        } else {
            "the worker runs the virtual cluster"
        },
        database.description(),
        args.data_dir.display()
    )?;
    stdout.flush()?;
    let mut state = AppState::new(database.pool.clone());
    state.metrics = metrics;
    if let Some(sso) = &portal.sso {
        // Discovered once now; if the provider is down, the first sign-in
        // tries again.
        match sso.discover().await {
            Ok(()) => tracing::info!(
                issuer = %sso.settings.issuer,
                redirect_url = %sso.settings.redirect_url,
                claim = %sso.settings.claim,
                "single sign-on: provider discovered"
            ),
            Err(why) => tracing::warn!(
                error = %why,
                "single sign-on: the provider cannot be reached now; the first sign-in tries again"
            ),
        }
    }
    crate::portal::pages::svg::spawn_sampler(
        database.pool.clone(),
        portal.samples.clone(),
        std::time::Duration::from_secs(5),
    );
    state.portal = Arc::new(portal);
    // Submissions are checked against the cluster the worker runs (with
    // `--no-worker`, the one named here: give the web server and the
    // worker the same file).
    if args.cluster.kubernetes() {
        let config = super::worker::kube_config(args.cluster.kubeconfig.as_deref()).await?;
        state.cluster = Arc::new(kube_shape(config).await?);
    } else if let Some(path) = &args.cluster.cluster {
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

/// The shape of a Kubernetes cluster's nodes as the scheduler reads them,
/// read once at start: submissions are checked against it (a node added
/// later counts after a restart).
async fn kube_shape(config: kube::Config) -> anyhow::Result<ClusterShape> {
    use crate::k8s::node::{NodeOptions, view_node};
    let client = kube::Client::try_from(config).context("a Kubernetes client")?;
    let nodes = kube::Api::<k8s_openapi::api::core::v1::Node>::all(client)
        .list(&Default::default())
        .await
        .context("listing the cluster's nodes")?;
    let mut built = Vec::new();
    for n in &nodes.items {
        let v = view_node(n, &NodeOptions::default());
        match partita_engine::cluster::build_node(&v.spec) {
            Ok(node) => built.push(node),
            Err(e) => {
                tracing::warn!(node = %v.spec.name, error = %e, "node left out of the cluster's shape")
            }
        }
    }
    let state = partita_engine::cluster::State::new(built)?;
    Ok(ClusterShape::of_state("kubernetes", &state))
}
