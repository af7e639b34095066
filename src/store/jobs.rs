//! Jobs and their events, as the API writes them: submissions (with
//! idempotency keys), class changes, cancels, and the requeue and cancel
//! requests the worker acts on. Times the API writes are wall time
//! (`migrations/0004_api_requests.sql`).

use chrono::{DateTime, SubsecRound, Utc};
use partita_engine::workload;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool, Postgres, Transaction};

/// The job as the engine takes it, stored in `jobs.spec` in the Go
/// store's shape (`go/internal/store` `Spec`): durations in nanoseconds
/// of cluster time, 0 for none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub tasks: Vec<workload::Task>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gang: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duration: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fail_after: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checkpoint_every: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A checked submission, ready to store.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub id: String,
    pub team_id: i64,
    pub project_id: i64,
    pub user_id: i64,
    pub name: String,
    pub class: String,
    pub spec: Value,
    pub request: Value,
    /// The key and the SHA-256 of the resolved request and the user.
    pub idempotency: Option<(String, Vec<u8>)>,
}

/// What a submission did.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// A new job.
    Created(String),
    /// The key was used before with the same request: that job.
    Replayed(String),
    /// The key was used before with another request: that job.
    Conflict(String),
}

/// Stores a new job, queued, with its `submitted` and `queued` events, in
/// one transaction. With an idempotency key already used by this user,
/// stores nothing and says which job has it. Two concurrent submissions
/// with one key make one job: the second insert waits for the first's
/// transaction, then finds its row.
pub async fn submit(
    pool: &PgPool,
    job: &NewJob,
    user: &str,
    team: &str,
) -> sqlx::Result<Submitted> {
    let mut tx = pool.begin().await?;
    let (key, hash) = match &job.idempotency {
        Some((k, h)) => (Some(k.as_str()), Some(h.as_slice())),
        None => (None, None),
    };
    // Submitted in cluster time: the scheduler ages a job by it, beside
    // the start and end times the worker writes. Before any worker has
    // started the clock, cluster time is wall time (the worker's first
    // start sets it so).
    let submitted_at = crate::worker::clock::cluster_now(&mut tx)
        .await?
        .unwrap_or_else(|| Utc::now().trunc_subsecs(6));
    let seq = sqlx::query_scalar!(
        "INSERT INTO jobs (id, team_id, project_id, user_id, name, class, state, reason, spec, request,
                           idempotency_key, idempotency_hash, submitted_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10, $11, $12)
         ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
         RETURNING seq",
        job.id,
        job.team_id,
        job.project_id,
        job.user_id,
        job.name,
        job.class,
        queued_reason(team),
        job.spec,
        job.request,
        key,
        hash,
        submitted_at
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(seq) = seq else {
        let prior = sqlx::query!(
            "SELECT id, idempotency_hash FROM jobs WHERE user_id = $1 AND idempotency_key = $2",
            job.user_id,
            key
        )
        .fetch_one(&mut *tx)
        .await?;
        tx.rollback().await?;
        return Ok(if prior.idempotency_hash.as_deref() == hash {
            Submitted::Replayed(prior.id)
        } else {
            Submitted::Conflict(prior.id)
        });
    };
    for (state, reason) in [
        ("submitted", format!("by {user}")),
        ("queued", queued_reason(team)),
    ] {
        sqlx::query!(
            "INSERT INTO job_events (job_seq, at, state, reason, clock) VALUES ($1, $2, $3, $4, 'cluster')",
            seq,
            submitted_at,
            state,
            reason
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Submitted::Created(job.id.clone()))
}

/// Why a new job waits: it is in its team's queue.
pub fn queued_reason(team: &str) -> String {
    format!("in team {team}'s queue")
}

/// Appends an event in wall time (the API's clock).
pub async fn add_event(
    tx: &mut Transaction<'_, Postgres>,
    job_seq: i64,
    state: &str,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO job_events (job_seq, at, state, reason, clock) VALUES ($1, now(), $2, $3, 'wall')",
        job_seq,
        state,
        reason
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A job as stored, with its team, project and user by name.
#[derive(Debug, Clone)]
pub struct JobRow {
    pub seq: i64,
    pub id: String,
    pub name: String,
    pub team: String,
    pub team_id: i64,
    pub project: String,
    pub user: String,
    pub class: String,
    pub state: String,
    pub reason: String,
    pub spec: Value,
    pub request: Value,
    pub submitted_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub attempts: i32,
    pub requeue_requested_at: Option<DateTime<Utc>>,
    pub cancel_requested_at: Option<DateTime<Utc>>,
}

/// What a listing asks for; None matches everything.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub team: Option<String>,
    pub states: Option<Vec<String>>,
    pub project: Option<String>,
    pub user: Option<String>,
    pub class: Option<String>,
    /// Only jobs with `seq` below this (the cursor).
    pub before: Option<i64>,
    pub limit: i64,
}

/// Jobs newest first (by `seq`, which only grows), filtered.
pub async fn list(pool: &PgPool, f: &JobFilter) -> sqlx::Result<Vec<JobRow>> {
    sqlx::query_as!(
        JobRow,
        "SELECT j.seq, j.id, j.name, t.name AS team, j.team_id, p.name AS project, u.name AS user,
                j.class, j.state, j.reason, j.spec, j.request, j.submitted_at, j.started_at,
                j.finished_at, j.attempts, j.requeue_requested_at, j.cancel_requested_at
         FROM jobs j
         JOIN teams t ON t.id = j.team_id
         JOIN projects p ON p.id = j.project_id
         JOIN users u ON u.id = j.user_id
         WHERE ($1::text IS NULL OR t.name = $1)
           AND ($2::text[] IS NULL OR j.state = ANY($2))
           AND ($3::text IS NULL OR p.name = $3)
           AND ($4::text IS NULL OR u.name = $4)
           AND ($5::text IS NULL OR j.class = $5)
           AND ($6::bigint IS NULL OR j.seq < $6)
         ORDER BY j.seq DESC
         LIMIT $7",
        f.team.as_deref(),
        f.states.as_deref(),
        f.project.as_deref(),
        f.user.as_deref(),
        f.class.as_deref(),
        f.before,
        f.limit
    )
    .fetch_all(pool)
    .await
}

/// The job with public id `id`.
pub async fn get(db: impl PgExecutor<'_>, id: &str) -> sqlx::Result<Option<JobRow>> {
    sqlx::query_as!(
        JobRow,
        "SELECT j.seq, j.id, j.name, t.name AS team, j.team_id, p.name AS project, u.name AS user,
                j.class, j.state, j.reason, j.spec, j.request, j.submitted_at, j.started_at,
                j.finished_at, j.attempts, j.requeue_requested_at, j.cancel_requested_at
         FROM jobs j
         JOIN teams t ON t.id = j.team_id
         JOIN projects p ON p.id = j.project_id
         JOIN users u ON u.id = j.user_id
         WHERE j.id = $1",
        id
    )
    .fetch_optional(db)
    .await
}

/// Locks a job's row for the rest of the transaction (the worker takes
/// the same lock before it changes a job), and gives its state.
pub async fn lock(tx: &mut Transaction<'_, Postgres>, seq: i64) -> sqlx::Result<String> {
    sqlx::query_scalar!("SELECT state FROM jobs WHERE seq = $1 FOR UPDATE", seq)
        .fetch_one(&mut **tx)
        .await
}

#[derive(Debug, Clone)]
pub struct EventRow {
    pub at: DateTime<Utc>,
    pub clock: String,
    pub state: String,
    pub reason: String,
}

pub async fn events(pool: &PgPool, job_seq: i64) -> sqlx::Result<Vec<EventRow>> {
    sqlx::query_as!(
        EventRow,
        "SELECT at, clock, state, reason FROM job_events WHERE job_seq = $1 ORDER BY seq",
        job_seq
    )
    .fetch_all(pool)
    .await
}

pub async fn set_class(
    tx: &mut Transaction<'_, Postgres>,
    seq: i64,
    class: &str,
) -> sqlx::Result<()> {
    // The worker takes the new class up at its next tick (queue_version).
    sqlx::query!(
        "UPDATE jobs SET class = $2, queue_version = queue_version + 1 WHERE seq = $1",
        seq,
        class
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Which way a job moves in its team's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

/// Moves a queued job one place up or down among its team's queued jobs
/// of its class, by swapping its queue key with its neighbour's
/// (migrations/0013_team_queue_order.sql). The caller has locked the job.
/// Returns the neighbour's id, or None when the job is already first
/// (last) of its class.
pub async fn move_in_queue(
    tx: &mut Transaction<'_, Postgres>,
    seq: i64,
    direction: Direction,
) -> sqlx::Result<Option<String>> {
    let up = direction == Direction::Up;
    // The job and its neighbour in the scheduler's order within the team
    // and class: the key (submission time when never moved), then the id
    // by its bytes (COLLATE "C"), as the engine compares ids.
    let pair = sqlx::query!(
        r#"WITH me AS (
               SELECT seq, id, team_id, class, COALESCE(queue_key, submitted_at) AS key
               FROM jobs WHERE seq = $1)
           SELECT me.key AS "my_key!", n.seq AS "other_seq!", n.id AS "other_id!",
                  COALESCE(n.queue_key, n.submitted_at) AS "other_key!"
           FROM me JOIN jobs n
             ON n.team_id = me.team_id AND n.class = me.class AND n.state = 'queued' AND n.seq <> me.seq
           WHERE CASE WHEN $2
                      THEN (COALESCE(n.queue_key, n.submitted_at), n.id COLLATE "C") < (me.key, me.id COLLATE "C")
                      ELSE (COALESCE(n.queue_key, n.submitted_at), n.id COLLATE "C") > (me.key, me.id COLLATE "C") END
           ORDER BY CASE WHEN $2 THEN COALESCE(n.queue_key, n.submitted_at) END DESC,
                    CASE WHEN $2 THEN n.id COLLATE "C" END DESC,
                    CASE WHEN NOT $2 THEN COALESCE(n.queue_key, n.submitted_at) END ASC,
                    CASE WHEN NOT $2 THEN n.id COLLATE "C" END ASC
           LIMIT 1
           FOR UPDATE OF n"#,
        seq,
        up
    )
    .fetch_optional(&mut **tx)
    .await?;
    let Some(p) = pair else {
        return Ok(None);
    };
    // Equal keys (two submissions in one microsecond) are told apart by
    // id: a swap would change nothing, so the job takes a key a
    // microsecond before (after) its neighbour's.
    let (mine, theirs) = if p.my_key == p.other_key {
        let step = chrono::Duration::microseconds(if up { -1 } else { 1 });
        (p.other_key + step, p.other_key)
    } else {
        (p.other_key, p.my_key)
    };
    sqlx::query!(
        r#"UPDATE jobs SET queue_key = k.key, queue_version = queue_version + 1
           FROM UNNEST($1::int8[], $2::timestamptz[]) AS k(seq, key)
           WHERE jobs.seq = k.seq"#,
        &[seq, p.other_seq][..],
        &[mine, theirs][..]
    )
    .execute(&mut **tx)
    .await?;
    Ok(Some(p.other_id))
}

/// Asks the worker to cancel a job (`by`: who asked). The worker alone
/// changes a job's state, so that a request never races a start.
pub async fn request_cancel(
    tx: &mut Transaction<'_, Postgres>,
    seq: i64,
    by: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE jobs SET cancel_requested_at = COALESCE(cancel_requested_at, now()),
                         cancel_requested_by = COALESCE(cancel_requested_by, $2)
         WHERE seq = $1",
        seq,
        by
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Asks the worker to put a job that holds resources back in its queue.
pub async fn request_requeue(
    tx: &mut Transaction<'_, Postgres>,
    seq: i64,
    by: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE jobs SET requeue_requested_at = COALESCE(requeue_requested_at, now()),
                         requeue_requested_by = COALESCE(requeue_requested_by, $2)
         WHERE seq = $1",
        seq,
        by
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The number of jobs stored (tests count before and after).
pub async fn count(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM jobs"#)
        .fetch_one(pool)
        .await
}
