//! The web server (axum): `/healthz`, `/readyz`, `/metrics` and the JSON
//! API under `/api/v1` (accounts, jobs, the queue and the cluster, the
//! audit log, the OpenAPI document), with every request logged and
//! counted, and the portal's pages (`crate::portal`). The worker runs
//! apart.

pub mod accounts;
pub mod accounts_cache;
pub mod auth;
pub mod cluster;
pub mod decode;
#[cfg(test)]
mod decode_fuzz;
pub mod error;
pub mod jobs;
pub mod jobspec;
pub mod openapi;
pub mod preview;
pub mod reports;
pub mod views;

use std::sync::Arc;

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use sqlx::PgPool;

use crate::api;
use crate::db;
use crate::metrics::{self, Metrics};
use crate::store::group_commit::JobWriter;
use accounts_cache::AccountsCache;
use cluster::ClusterShape;
use error::ApiError;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    pub pool: PgPool,
    /// What submissions are checked against.
    pub cluster: Arc<ClusterShape>,
    /// Where submissions are written, together (group commit).
    pub jobs: JobWriter,
    /// Tokens' owners and teams, kept while no account changes.
    pub accounts: Arc<AccountsCache>,
    /// This process's metrics (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// The portal's settings (cookies, single sign-on).
    pub portal: Arc<crate::portal::Config>,
}

impl AppState {
    /// A state on `pool` with the built-in demo cluster's shape and the
    /// web server's metrics only (no worker in this process). Starts the
    /// submissions' writer and the account notices' listener, so it needs
    /// a tokio runtime.
    pub fn new(pool: PgPool) -> AppState {
        let accounts = Arc::new(AccountsCache::default());
        accounts.spawn_listener(pool.clone());
        AppState {
            accounts,
            jobs: JobWriter::spawn(pool.clone()),
            pool,
            cluster: Arc::new(ClusterShape::demo()),
            metrics: Arc::new(Metrics::new(false)),
            portal: Arc::new(crate::portal::Config::default()),
        }
    }
}

/// The application's routes, with request logging. Tests call it with a
/// state of their own and send requests with `tower::ServiceExt::oneshot`.
pub fn app(state: AppState) -> Router {
    let (api_routes, _) = openapi::api_routes();
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(serve_metrics))
        .merge(api_routes)
        .merge(crate::portal::routes())
        .fallback(no_route)
        .layer(middleware::from_fn(refuse_nul))
        .layer(middleware::from_fn_with_state(state.clone(), log_request))
        .with_state(state)
}

/// Refuses a URL holding U+0000 (`%00` in its path or query) with a 400:
/// PostgreSQL's text cannot hold the character, so a name or a filter
/// with it would fail in the database. (A `%` in a URL always starts an
/// escape, so `%00` is the character itself.)
async fn refuse_nul(request: Request, next: Next) -> Response {
    let uri = request.uri();
    let raw = uri.path_and_query().map(|p| p.as_str()).unwrap_or("");
    if raw.as_bytes().windows(3).any(|w| w == b"%00") {
        let message =
            "the URL holds the character U+0000 (%00), which cannot be stored or looked up";
        if uri.path().starts_with("/api/") {
            return ApiError::bad_request("", message).into_response();
        }
        return crate::portal::render::PageError {
            status: StatusCode::BAD_REQUEST,
            message: "The address holds the character U+0000 (%00), which Partita cannot look up."
                .into(),
        }
        .into_response();
    }
    next.run(request).await
}

/// Why a URL with U+0000 is refused.
pub const URL_NUL: &str =
    "the URL holds the character U+0000 (%00), which cannot be stored or looked up";

/// Whether a URL's path and query hold `%00`.
pub fn url_has_nul(path_and_query: &str) -> bool {
    path_and_query.as_bytes().windows(3).any(|w| w == b"%00")
}

/// Any other path: under /api/ a JSON 404 that says where the routes are
/// listed, elsewhere the portal's page.
async fn no_route(request: Request) -> Response {
    if !request.uri().path().starts_with("/api/") {
        return crate::portal::render::PageError::not_found(format!(
            "There is no page at {}.",
            request.uri().path()
        ))
        .into_response();
    }
    ApiError::new(
        StatusCode::NOT_FOUND,
        "",
        format!(
            "no route {} {} (see {}/openapi.json)",
            request.method(),
            request.uri().path(),
            api::PREFIX
        ),
    )
    .into_response()
}

/// The process is up (it checks nothing else).
async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready to serve: the database answers and has every migration this
/// binary knows. 200 when it is, 503 when not; the JSON body says what was
/// checked.
async fn readyz(State(state): State<AppState>) -> Response {
    let started = Instant::now();
    let ping = sqlx::query_scalar!(r#"SELECT 1 AS "one!""#)
        .fetch_one(&state.pool)
        .await;
    let database = match ping {
        Err(err) => json!({"ok": false, "error": err.to_string()}),
        Ok(_) => match db::schema_versions(&state.pool).await {
            Err(err) => json!({"ok": false, "error": err.to_string()}),
            Ok((applied, known)) => json!({
                "ok": applied == known,
                "reachable": true,
                "schema_version": applied,
                "expected_schema_version": known,
                "latency_ms": started.elapsed().as_secs_f64() * 1000.0,
            }),
        },
    };
    let ok = database["ok"] == true;
    let worker = worker_check(&state.pool).await;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if ok { "ready" } else { "not ready" },
        "checks": {"database": database, "worker": worker},
    });
    (status, Json(body)).into_response()
}

/// Whether an active worker was seen in the last 10 s (its heartbeat in
/// the `workers` table, written each tick). Reported, not required: a web
/// server stays ready while the worker is away (jobs are still accepted
/// and wait in the queue), so a load balancer keeps sending it requests.
async fn worker_check(pool: &sqlx::PgPool) -> serde_json::Value {
    let seen = sqlx::query!(
        r#"SELECT id, EXTRACT(EPOCH FROM now() - heartbeat_at)::float8 AS "age_s!"
           FROM workers WHERE active ORDER BY heartbeat_at DESC LIMIT 1"#
    )
    .fetch_optional(pool)
    .await;
    match seen {
        Err(err) => json!({"ok": false, "error": err.to_string()}),
        Ok(None) => json!({"ok": false, "seen": false}),
        Ok(Some(w)) => json!({
            "ok": w.age_s < 10.0,
            "seen": true,
            "id": w.id,
            "heartbeat_age_s": w.age_s,
        }),
    }
}

/// Prometheus metrics in the text format: this process's counters and
/// histograms, and the gauges of the world the worker last published
/// (`crate::metrics` says which are where). Public, as in the Go build.
async fn serve_metrics(State(state): State<AppState>) -> Response {
    let gauges = match crate::store::views::gauges(&state.pool).await {
        Ok(g) => g,
        Err(e) => {
            // The counters are still worth serving without the gauges.
            tracing::warn!(error = %e, "metrics: reading the published gauges");
            None
        }
    };
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        state.metrics.encode(gauges.as_ref()),
    )
        .into_response()
}

/// Logs each request (method, path, status and duration) and counts it
/// by route. Cheap on purpose, as it runs on every request: no database,
/// an in-memory counter and histogram.
async fn log_request(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    // The route's pattern, not the path: the label set stays bounded. A
    // path no route matched is not counted (nor is it in the Go build).
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| format!("{method} {}", m.as_str()));
    let started = Instant::now();
    let response = next.run(request).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    if let Some(route) = route {
        state.metrics.request(&route, status, took);
    }
    tracing::info!(
        %method,
        %path,
        status,
        duration_ms = took.as_secs_f64() * 1000.0,
        "request"
    );
    response
}
