//! `partita kube`: the scheduler and the process around it (port of
//! go/internal/kube/run.go). The client with its rate limit, the event
//! recorder with a budget of its own, the health and metrics server, the
//! admission webhook over TLS, and the scheduler, run only while this
//! replica holds the leader Lease when `leader_elect` is set (as
//! kube-scheduler; followers keep their caches warm and serve the webhook).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::sync::watch;

use super::client;
use super::events::Events;
use super::leader::{self, LeaseConfig, Watchdog};
use super::metrics::Metrics;
use super::scheduler::{Options, Scheduler};
use super::serve::{self, CertFiles};
use super::webhook::{self, MAX_REVIEW_BYTES, WEBHOOK_PATH};

/// `Options` plus the process around the scheduler.
#[derive(Clone)]
pub struct RunOptions {
    pub scheduler: Options,
    pub kubeconfig: Option<PathBuf>,
    /// The client's limit, as client-go's QPS and Burst. Events get a
    /// bucket of the same size of their own, so that they neither wait
    /// behind binds nor hold binds up.
    pub qps: f64,
    pub burst: u32,
    pub leader_elect: bool,
    pub lease_namespace: String,
    pub lease_name: String,
    /// "" picks hostname and a random suffix.
    pub identity: String,
    /// /metrics, /healthz, /readyz; "" turns them off.
    pub metrics_addr: String,
    /// The admission webhook (TLS); "" turns it off.
    pub webhook_addr: String,
    pub tls_cert_file: PathBuf,
    pub tls_key_file: PathBuf,
}

/// How long the last events may take to leave at shutdown.
const EVENTS_DRAIN: Duration = Duration::from_secs(5);

/// Runs until `shutdown`, or until this replica loses the lease (an
/// error: the Deployment restarts it, as kube-scheduler's does).
pub async fn run(ro: RunOptions, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let config = client::config(ro.kubeconfig.as_deref()).await?;
    let client = client::build(config.clone(), ro.qps, ro.burst)?;
    let metrics = Arc::new(Metrics::new());
    let (events, events_task) = Events::start(
        client::build(config, ro.qps, ro.burst)?,
        &ro.scheduler.scheduler_name,
        ro.qps,
        ro.burst,
        metrics.clone(),
    );
    let scheduler = Arc::new(Scheduler::new(
        client.clone(),
        ro.scheduler.clone(),
        metrics.clone(),
        events.clone(),
    )?);
    // One stop signal for every part.
    let (stop_tx, stop_rx) = watch::channel(false);
    let stop = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stopped| *stopped).await;
        }
    };
    let watchdog = Watchdog::new(Duration::from_secs(20));
    let mut servers = Vec::new();
    if !ro.metrics_addr.is_empty() {
        let listener = serve::bind(&ro.metrics_addr).await?;
        tracing::info!(addr = %listener.local_addr()?, "metrics, health and readiness");
        let ready = scheduler.clone();
        let router = serve::health_router(metrics.clone(), watchdog.clone(), move || ready.ready());
        servers.push(serve::spawn_http(listener, router, stop()));
    }
    let mut work = Box::pin(async {
        scheduler
            .start()
            .await
            .context("reading the cluster (are the CRDs installed and RBAC granted?)")?;
        if !ro.webhook_addr.is_empty() {
            let listener = serve::bind(&ro.webhook_addr).await?;
            tracing::info!(addr = %listener.local_addr()?, "admission webhook");
            let certs = Arc::new(CertFiles::new(&ro.tls_cert_file, &ro.tls_key_file));
            servers.push(serve::spawn_https(
                listener,
                webhook_router(scheduler.clone()),
                certs,
                stop(),
            ));
        }
        if !ro.leader_elect {
            metrics.leader.set(1);
            scheduler.run(stop()).await;
            return Ok(());
        }
        let identity = if ro.identity.is_empty() {
            leader::default_identity()
        } else {
            ro.identity.clone()
        };
        let lease = LeaseConfig::new(&ro.lease_namespace, &ro.lease_name, &identity);
        leader::lead(client.clone(), &lease, &metrics, &watchdog, stop(), || {
            scheduler.run(stop())
        })
        .await?;
        anyhow::Ok(())
    });
    let result = tokio::select! {
        r = &mut work => r,
        () = shutdown => {
            let _ = stop_tx.send(true);
            (&mut work).await
        }
    };
    let _ = stop_tx.send(true);
    drop(work);
    for s in servers {
        let _ = s.await;
    }
    events.shutdown(EVENTS_DRAIN).await;
    let _ = events_task.await;
    result
}

/// The admission webhook: AdmissionReview in, AdmissionReview out; a body
/// that is not one gets 400 with the reason, as the Go build answers.
fn webhook_router(scheduler: Arc<Scheduler>) -> Router {
    Router::new()
        .route(WEBHOOK_PATH, post(review))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(scheduler)
}

async fn review(State(s): State<Arc<Scheduler>>, body: Bytes) -> Response {
    let name = &s.options().scheduler_name;
    match webhook::try_review(&body, name, s.headroom(), &s.nodes()) {
        Ok(answer) => ([(header::CONTENT_TYPE, "application/json")], answer).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}
