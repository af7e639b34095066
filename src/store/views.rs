//! Reading what the worker published (`worker_views`,
//! `migrations/0008_views.sql`, written by `worker::views`), and the
//! rows the queue and a job's place are shown from.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgPool;

use crate::api;
use crate::metrics::Gauges;
use crate::worker::views::{ClusterView, TeamQueueView};

fn bad_view(what: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Protocol(format!("the published {what} view: {e}"))
}

/// The published cluster, if a worker published one.
pub async fn cluster(pool: &PgPool) -> sqlx::Result<Option<ClusterView>> {
    let body = sqlx::query_scalar!("SELECT body FROM worker_views WHERE kind = 'cluster'")
        .fetch_optional(pool)
        .await?;
    body.map(|b| serde_json::from_value(b).map_err(|e| bad_view("cluster", e)))
        .transpose()
}

/// The gauges of the published cluster (its body's `gauges` alone).
pub async fn gauges(pool: &PgPool) -> sqlx::Result<Option<Gauges>> {
    let body = sqlx::query_scalar!(
        r#"SELECT body -> 'gauges' AS "gauges!" FROM worker_views WHERE kind = 'cluster'"#
    )
    .fetch_optional(pool)
    .await?;
    body.map(|b| serde_json::from_value(b).map_err(|e| bad_view("cluster", e)))
        .transpose()
}

/// The published queues of every team (`team` None) or of one, and the
/// clock of the publication (None before any).
pub async fn queues(
    pool: &PgPool,
    team: Option<&str>,
) -> sqlx::Result<(Option<api::Clock>, BTreeMap<String, TeamQueueView>)> {
    // The cluster row gives the clock even when no team has a queue; its
    // body (the large one) is not read.
    let rows = sqlx::query!(
        r#"SELECT kind, team, cluster_time, speed,
                  CASE WHEN kind = 'queue' THEN body END AS body
           FROM worker_views
           WHERE kind = 'cluster' OR ($1::text IS NULL OR team = $1)"#,
        team
    )
    .fetch_all(pool)
    .await?;
    let mut clock = None;
    let mut out = BTreeMap::new();
    for r in rows {
        if r.kind == "cluster" {
            clock = Some(api::Clock {
                now: r.cluster_time,
                speed: r.speed,
            });
            continue;
        }
        let q: TeamQueueView = serde_json::from_value(r.body.unwrap_or(Value::Null))
            .map_err(|e| bad_view("queue", e))?;
        out.insert(r.team, q);
    }
    Ok((clock, out))
}

/// A queued job as the queue lists it.
#[derive(Debug, Clone)]
pub struct QueuedRow {
    pub id: String,
    pub name: String,
    pub team: String,
    pub project: String,
    pub class: String,
    pub spec: Value,
    pub submitted_at: DateTime<Utc>,
}

/// The queued jobs of every team or of one, in submission order.
pub async fn queued_jobs(pool: &PgPool, team: Option<&str>) -> sqlx::Result<Vec<QueuedRow>> {
    sqlx::query_as!(
        QueuedRow,
        "SELECT j.id, j.name, t.name AS team, p.name AS project, j.class, j.spec, j.submitted_at
         FROM jobs j
         JOIN teams t ON t.id = j.team_id
         JOIN projects p ON p.id = j.project_id
         WHERE j.state = 'queued' AND ($1::text IS NULL OR t.name = $1)
         ORDER BY j.seq",
        team
    )
    .fetch_all(pool)
    .await
}

/// A job's runtime as the worker stored it (where its tasks are).
pub async fn runtime(pool: &PgPool, seq: i64) -> sqlx::Result<Option<Value>> {
    sqlx::query_scalar!("SELECT runtime FROM jobs WHERE seq = $1", seq)
        .fetch_optional(pool)
        .await
}
