//! The worker's reads and writes in PostgreSQL. Every write of a tick goes
//! through one transaction on the worker's locked connection (`mod.rs`):
//! job states, their events, the ledger rows, the clock and the heartbeat
//! commit together or not at all.

use chrono::{DateTime, Utc};
use partita_engine::sched::{Nanos, Team};
use partita_engine::workload::Class;
use sqlx::PgConnection;

use super::clock;
use super::spec::{JobSpec, Runtime};
use super::world::{Changes, JobRecord};
use crate::accounting;
use crate::store::ledger;

/// An error reading a job: its row does not say what the worker needs.
fn bad_row(seq: i64, what: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Protocol(format!("job {seq}: {what}"))
}

/// The teams and their quotas, in GPU milli.
pub async fn teams(conn: &mut PgConnection) -> Result<Vec<Team>, sqlx::Error> {
    let rows =
        sqlx::query!("SELECT name, guarantee_milli, burst_milli, weight FROM teams ORDER BY name")
            .fetch_all(&mut *conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|r| Team {
            name: r.name,
            guarantee: r.guarantee_milli,
            burst: r.burst_milli.max(r.guarantee_milli),
            weight: r.weight,
        })
        .collect())
}

/// The oldest transaction still running, as a mark for [`new_jobs`]:
/// every job a read after this call cannot see was inserted by a
/// transaction at or above it (`migrations/0006_new_job_window.sql`).
pub async fn xmin(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8 AS "xmin!""#)
        .fetch_one(&mut *conn)
        .await
}

/// Every unfinished job (at start), in submission order.
pub async fn unfinished_jobs(
    conn: &mut PgConnection,
    epoch: DateTime<Utc>,
) -> Result<Vec<JobRecord>, sqlx::Error> {
    jobs(conn, epoch, false, 0).await
}

/// The queued jobs inserted by transactions at or above `since` (an
/// [`xmin`] taken before the previous read), in submission order: every
/// job submitted since then, and some already known (the caller skips
/// those).
pub async fn new_jobs(
    conn: &mut PgConnection,
    epoch: DateTime<Utc>,
    since: i64,
) -> Result<Vec<JobRecord>, sqlx::Error> {
    jobs(conn, epoch, true, since).await
}

async fn jobs(
    conn: &mut PgConnection,
    epoch: DateTime<Utc>,
    only_new: bool,
    since: i64,
) -> Result<Vec<JobRecord>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT j.seq, j.id, t.name AS team, j.team_id, p.name AS project, j.project_id,
                  j.user_id, j.class, j.state, j.reason, j.spec, j.submitted_at, j.started_at,
                  j.attempts, j.runtime, COALESCE(j.queue_key, j.submitted_at) AS "queue_key!",
                  j.cluster_job
           FROM jobs j JOIN teams t ON t.id = j.team_id JOIN projects p ON p.id = j.project_id
           WHERE CASE WHEN $1
                      THEN j.state = 'queued' AND j.created_xid >= $2::int8::text::xid8
                      ELSE j.state IN ('queued', 'admitted', 'running', 'preempted') END
           ORDER BY j.seq"#,
        only_new,
        since
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let seq = r.seq;
        let class: Class = r.class.parse().map_err(|e| bad_row(seq, e))?;
        let spec: JobSpec = serde_json::from_value(r.spec).map_err(|e| bad_row(seq, e))?;
        let runtime: Runtime = serde_json::from_value(r.runtime).map_err(|e| bad_row(seq, e))?;
        out.push(JobRecord {
            seq,
            id: r.id,
            team: r.team,
            team_id: r.team_id,
            project: r.project,
            project_id: r.project_id,
            user_id: r.user_id,
            class,
            state: r.state,
            reason: r.reason,
            spec,
            submitted: clock::since(epoch, r.submitted_at),
            queue_key: clock::since(epoch, r.queue_key),
            started: r.started_at.map(|t| clock::since(epoch, t)),
            attempts: r.attempts,
            runtime,
            cluster_job: r.cluster_job,
        });
    }
    Ok(out)
}

/// A change to a known job's place in its team's queue: its class (PATCH
/// /jobs/{id}) or its queue key (POST /jobs/{id}/move).
#[derive(Debug)]
pub struct QueueChange {
    pub seq: i64,
    pub class: Class,
    pub queue_key: Nanos,
    version: i32,
}

/// The unfinished jobs whose class or queue key changed since the worker
/// last took them up (migrations/0013_team_queue_order.sql).
pub async fn queue_changes(
    conn: &mut PgConnection,
    epoch: DateTime<Utc>,
) -> Result<Vec<QueueChange>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT seq, class, COALESCE(queue_key, submitted_at) AS "queue_key!", queue_version
           FROM jobs WHERE queue_version <> queue_seen AND state = ANY ($1)
           ORDER BY seq"#,
        &UNFINISHED.map(String::from)[..]
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(QueueChange {
            seq: r.seq,
            class: r.class.parse().map_err(|e| bad_row(r.seq, e))?,
            queue_key: clock::since(epoch, r.queue_key),
            version: r.queue_version,
        });
    }
    Ok(out)
}

/// Notes the queue changes as taken up: each job's version as read (a
/// newer change keeps the job in [`queue_changes`]).
pub async fn queue_changes_seen(
    conn: &mut PgConnection,
    seen: &[QueueChange],
) -> Result<(), sqlx::Error> {
    if seen.is_empty() {
        return Ok(());
    }
    let seqs: Vec<i64> = seen.iter().map(|c| c.seq).collect();
    let versions: Vec<i32> = seen.iter().map(|c| c.version).collect();
    sqlx::query!(
        r#"UPDATE jobs SET queue_seen = s.version
           FROM UNNEST($1::int8[], $2::int4[]) AS s(seq, version)
           WHERE jobs.seq = s.seq"#,
        &seqs,
        &versions
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Refreshes PostgreSQL's statistics of `jobs` (see the worker's
/// `JobStats`).
pub async fn analyze_jobs(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query!("ANALYZE jobs").execute(&mut *conn).await?;
    Ok(())
}

/// The states of a job that is not finished.
const UNFINISHED: [&str; 4] = ["queued", "admitted", "running", "preempted"];

/// A cancel or requeue request on an unfinished job.
#[derive(Debug)]
pub struct Request {
    pub seq: i64,
    pub cancel_by: Option<String>,
    pub requeue_by: Option<String>,
}

/// The cancel and requeue requests not yet carried out.
pub async fn requests(conn: &mut PgConnection) -> Result<Vec<Request>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT seq, cancel_requested_by, requeue_requested_by FROM jobs
         WHERE state = ANY ($1)
           AND (cancel_requested_by IS NOT NULL OR requeue_requested_by IS NOT NULL)
         ORDER BY seq",
        // A parameter, so that the plan is made at each run (see
        // `become_active`): a statement without one keeps its first plan.
        &UNFINISHED.map(String::from)[..]
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Request {
            seq: r.seq,
            cancel_by: r.cancel_requested_by,
            requeue_by: r.requeue_requested_by,
        })
        .collect())
}

/// Writes a tick's changes (in the caller's transaction): job rows,
/// events, ledger rows (priced; a hold already written is skipped, so a
/// retried write adds nothing), the clock and the heartbeat.
pub async fn write(
    conn: &mut PgConnection,
    clock: &clock::Clock,
    now: Nanos,
    changes: &Changes,
    worker_id: &str,
) -> Result<(), sqlx::Error> {
    if !changes.jobs.is_empty() {
        // One statement for every changed job (a busy tick changes
        // thousands).
        let j = &changes.jobs;
        let mut runtimes = Vec::with_capacity(j.len());
        for u in j {
            runtimes.push(serde_json::to_value(&u.runtime).map_err(|e| bad_row(u.seq, e))?);
        }
        sqlx::query!(
            "UPDATE jobs SET state = u.state, reason = u.reason, started_at = u.started_at,
                finished_at = u.finished_at, attempts = u.attempts, runtime = u.runtime,
                requeue_requested_by = CASE WHEN u.requeue_done THEN NULL ELSE requeue_requested_by END,
                requeue_requested_at = CASE WHEN u.requeue_done THEN NULL ELSE requeue_requested_at END
             FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[],
                         $6::int4[], $7::jsonb[], $8::bool[])
                  AS u(seq, state, reason, started_at, finished_at, attempts, runtime, requeue_done)
             WHERE jobs.seq = u.seq",
            &j.iter().map(|u| u.seq).collect::<Vec<_>>(),
            &j.iter().map(|u| u.state.clone()).collect::<Vec<_>>(),
            &j.iter().map(|u| u.reason.clone()).collect::<Vec<_>>(),
            &j.iter().map(|u| u.started.map(|t| clock.at(t))).collect::<Vec<_>>() as &[Option<DateTime<Utc>>],
            &j.iter().map(|u| u.finished.map(|t| clock.at(t))).collect::<Vec<_>>() as &[Option<DateTime<Utc>>],
            &j.iter().map(|u| u.attempts).collect::<Vec<_>>(),
            &runtimes,
            &j.iter().map(|u| u.requeue_done).collect::<Vec<_>>(),
        )
        .execute(&mut *conn)
        .await?;
    }
    if !changes.events.is_empty() {
        let e = &changes.events;
        sqlx::query!(
            "INSERT INTO job_events (job_seq, at, state, reason)
             SELECT * FROM UNNEST($1::bigint[], $2::timestamptz[], $3::text[], $4::text[])",
            &e.iter().map(|r| r.job_seq).collect::<Vec<_>>(),
            &e.iter().map(|r| clock.at(r.at)).collect::<Vec<_>>(),
            &e.iter().map(|r| r.state.clone()).collect::<Vec<_>>(),
            &e.iter().map(|r| r.reason.clone()).collect::<Vec<_>>(),
        )
        .execute(&mut *conn)
        .await?;
    }
    if !changes.holds.is_empty() {
        write_ledger(conn, clock, changes).await?;
    }
    clock::save(conn, clock, now).await?;
    sqlx::query!(
        "UPDATE workers SET heartbeat_at = now(), active = true, cluster_time = $2 WHERE id = $1",
        worker_id,
        clock.at(now)
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn write_ledger(
    conn: &mut PgConnection,
    clock: &clock::Clock,
    changes: &Changes,
) -> Result<(), sqlx::Error> {
    // One price table type and one charging function, shared with the
    // reports: a row's figures are computed here once and only summed
    // after.
    let table = ledger::prices(&mut *conn).await?;
    let h = &changes.holds;
    let n = h.len();
    let (mut share_ms, mut gpu_hours, mut cost) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut price, mut currency) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for r in h {
        let hold = accounting::Hold {
            business_unit: String::new(),
            team: String::new(),
            project: String::new(),
            user: String::new(),
            model: r.model.clone(),
            tier: r.tier.clone(),
            class: r.class.to_string(),
            share: r.share,
            start: clock.at(r.start),
            end: Some(clock.at(r.end)),
        };
        let (ms, usage) = accounting::charge(&hold, &table).expect("the hold has ended");
        share_ms.push(ms);
        gpu_hours.push(usage.micro_gpu_hours);
        cost.push(usage.cost_micros);
        price.push(table.per_hour(&r.model, &r.tier));
        currency.push(table.currency.clone());
    }
    sqlx::query!(
        "INSERT INTO usage_ledger (hold_id, team_id, project_id, user_id, job_seq, task, node,
            gpu_index, gpu_model, mig_profile, gpu_share, capacity_tier, job_class, started_at,
            ended_at, share_ms, micro_gpu_hours, price_micros, cost_micros, currency)
         SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[],
            $6::text[], $7::text[], $8::int[], $9::text[], $10::text[], $11::int[], $12::text[],
            $13::text[], $14::timestamptz[], $15::timestamptz[], $16::bigint[], $17::bigint[],
            $18::bigint[], $19::bigint[], $20::text[])
         ON CONFLICT (hold_id) DO NOTHING",
        &h.iter().map(|r| r.hold_id.clone()).collect::<Vec<_>>(),
        &h.iter().map(|r| r.team_id).collect::<Vec<_>>(),
        &h.iter().map(|r| r.project_id).collect::<Vec<_>>(),
        &h.iter().map(|r| r.user_id).collect::<Vec<_>>(),
        &h.iter().map(|r| r.job_seq).collect::<Vec<_>>(),
        &h.iter().map(|r| r.task.clone()).collect::<Vec<_>>(),
        &h.iter().map(|r| r.node.clone()).collect::<Vec<_>>(),
        &h.iter().map(|r| r.gpu).collect::<Vec<_>>(),
        &h.iter().map(|r| r.model.clone()).collect::<Vec<_>>(),
        &h.iter().map(|r| r.mig_profile.clone()).collect::<Vec<_>>() as &[Option<String>],
        &h.iter()
            .map(|r| i32::try_from(r.share).unwrap_or(i32::MAX))
            .collect::<Vec<_>>(),
        &h.iter().map(|r| r.tier.clone()).collect::<Vec<_>>(),
        &h.iter().map(|r| r.class.to_string()).collect::<Vec<_>>(),
        &h.iter().map(|r| clock.at(r.start)).collect::<Vec<_>>(),
        &h.iter().map(|r| clock.at(r.end)).collect::<Vec<_>>(),
        &share_ms,
        &gpu_hours,
        &price,
        &cost,
        &currency,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Announces (or refreshes) a worker that waits for the lock.
pub async fn heartbeat_standby(
    conn: &mut PgConnection,
    worker_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO workers (id, active) VALUES ($1, false)
         ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), active = false",
        worker_id
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Marks every other worker inactive (the one that holds the lock is the
/// only active one; a dead worker's row says active until then) and
/// forgets workers not seen for a day.
pub async fn become_active(conn: &mut PgConnection, worker_id: &str) -> Result<(), sqlx::Error> {
    // The worker's queries run a few times a second on tables that grow
    // fast (from empty, on a new database): a plan PostgreSQL cached while
    // `jobs` had ten rows (a sequential scan) would stay until the next
    // autovacuum's ANALYZE, a minute on, scanning thousands of rows each
    // tick. Planned at each run instead (a fraction of a millisecond).
    sqlx::query!("SET plan_cache_mode = force_custom_plan")
        .execute(&mut *conn)
        .await?;
    sqlx::query!(
        "UPDATE workers SET active = (id = $1) WHERE active OR id = $1",
        worker_id
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!("DELETE FROM workers WHERE heartbeat_at < now() - interval '1 day'")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Seeds the teams of the scenario (and a `default` project each) on a
/// database that has no team yet, as the Go build seeds a new store.
pub async fn seed_teams(
    conn: &mut PgConnection,
    teams: &[partita_engine::scenario::Team],
) -> Result<bool, sqlx::Error> {
    let any = sqlx::query_scalar!(r#"SELECT EXISTS (SELECT 1 FROM teams) AS "any!""#)
        .fetch_one(&mut *conn)
        .await?;
    if any {
        return Ok(false);
    }
    for t in teams {
        let classes: Vec<String> = if t.classes.is_empty() {
            vec!["production".into(), "batch".into(), "best-effort".into()]
        } else {
            t.classes.iter().map(ToString::to_string).collect()
        };
        let weight = if t.weight > 0.0 { t.weight } else { 1.0 };
        sqlx::query!(
            "WITH t AS (
                INSERT INTO teams (name, guarantee_milli, burst_milli, weight, classes)
                VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING id)
             INSERT INTO projects (team_id, name) SELECT id, 'default' FROM t",
            t.name,
            t.guaranteed_gpus * 1000,
            t.burst_gpus.max(t.guaranteed_gpus) * 1000,
            weight,
            &classes
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(true)
}

/// A job that arrived on a Kubernetes cluster: pods people created with
/// `spec.schedulerName: partita`, stored so that the queue view, the job
/// timeline and the ledger show them beside the API's jobs.
#[derive(Debug, Clone)]
pub struct ClusterJob {
    /// "<namespace>/<group or pod>".
    pub cluster_job: String,
    /// The team of the pods' Queue.
    pub team: String,
    pub class: Class,
    pub spec: JobSpec,
    pub submitted: DateTime<Utc>,
}

/// What storing a cluster job did.
#[derive(Debug, Clone, PartialEq)]
pub enum Adopted {
    /// Stored as a new queued job with this ID.
    Stored(String),
    /// An unfinished job of that name is stored already.
    Known,
    /// No team of that name: the work stays out of the ledger.
    NoTeam,
}

/// Stores a cluster job, queued, under its team, submitted by the team's
/// "kubernetes:<team>" user (made on first use, disabled: it is a name
/// for the ledger, nobody signs in as it) in the team's "default" project.
pub async fn adopt_cluster_job(
    conn: &mut PgConnection,
    job: &ClusterJob,
) -> Result<Adopted, sqlx::Error> {
    let Some(team_id) = sqlx::query_scalar!("SELECT id FROM teams WHERE name = $1", job.team)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(Adopted::NoTeam);
    };
    let user = format!("kubernetes:{}", job.team);
    sqlx::query!(
        "INSERT INTO users (name, role, team_id, disabled) VALUES ($1, 'member', $2, true)
         ON CONFLICT (name) DO NOTHING",
        user,
        team_id
    )
    .execute(&mut *conn)
    .await?;
    let user_id = sqlx::query_scalar!("SELECT id FROM users WHERE name = $1", user)
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query!(
        "INSERT INTO projects (team_id, name) VALUES ($1, 'default') ON CONFLICT DO NOTHING",
        team_id
    )
    .execute(&mut *conn)
    .await?;
    let project_id = sqlx::query_scalar!(
        "SELECT id FROM projects WHERE team_id = $1 AND name = 'default'",
        team_id
    )
    .fetch_one(&mut *conn)
    .await?;
    let id = format!("k8s-{:016x}", rand::random::<u64>());
    let spec = serde_json::to_value(&job.spec).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let request = serde_json::json!({ "cluster_job": job.cluster_job });
    let reason = crate::store::jobs::queued_reason(&job.team);
    let seq = sqlx::query_scalar!(
        "INSERT INTO jobs (id, team_id, project_id, user_id, name, class, state, reason, spec,
                           request, submitted_at, cluster_job)
         VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10, $5)
         ON CONFLICT (cluster_job)
             WHERE cluster_job IS NOT NULL AND state IN ('queued', 'admitted', 'running', 'preempted')
             DO NOTHING
         RETURNING seq",
        id,
        team_id,
        project_id,
        user_id,
        job.cluster_job,
        job.class.to_string(),
        reason,
        spec,
        request,
        job.submitted,
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(seq) = seq else {
        return Ok(Adopted::Known);
    };
    for (state, why) in [
        (
            "submitted",
            format!("on the cluster as {}", job.cluster_job),
        ),
        ("queued", reason.clone()),
    ] {
        sqlx::query!(
            "INSERT INTO job_events (job_seq, at, state, reason, clock) VALUES ($1, $2, $3, $4, 'cluster')",
            seq,
            job.submitted,
            state,
            why
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(Adopted::Stored(id))
}
