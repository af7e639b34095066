//! The audit log: who changed what, when (wall time), before and after.
//! The table is append-only (the database refuses updates); a row is
//! written in the same transaction as the change it records.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};

/// Who made a change: the user's id and name (kept as it was).
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub user_id: i64,
    pub name: &'a str,
}

/// One change, before and after (None where there was or is nothing).
#[derive(Debug)]
pub struct Change<'a> {
    pub action: &'a str,
    pub target_kind: &'a str,
    pub target: &'a str,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

pub async fn record(
    db: impl PgExecutor<'_>,
    actor: Actor<'_>,
    change: Change<'_>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO audit_log (actor_user_id, actor, action, target_kind, target, before, after)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        actor.user_id,
        actor.name,
        change.action,
        change.target_kind,
        change.target,
        change.before,
        change.after,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A row as stored.
#[derive(Debug, Clone)]
pub struct AuditRow {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub target_kind: String,
    pub target: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Newest first, only rows with `seq` below `before` when given.
pub async fn list(pool: &PgPool, before: Option<i64>, limit: i64) -> sqlx::Result<Vec<AuditRow>> {
    sqlx::query_as!(
        AuditRow,
        "SELECT seq, at, actor, action, target_kind, target, before, after
         FROM audit_log
         WHERE ($1::bigint IS NULL OR seq < $1)
         ORDER BY seq DESC
         LIMIT $2",
        before,
        limit
    )
    .fetch_all(pool)
    .await
}
