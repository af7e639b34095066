//! Submissions written together (group commit), as the Go build's store
//! does (`go/internal/store/writer.go`): every submission handler hands
//! its checked job to one writer task, which takes whatever else is
//! waiting (up to [`MAX_BATCH`]) and stores the lot with one statement, so
//! a burst of submissions shares one commit, one WAL flush and one round
//! trip instead of paying six each. Each handler is answered only after
//! that commit: an acknowledged job is on disk.
//!
//! One job refused in a batch (a lost race with an idempotency key is not
//! a refusal: it is answered from the stored row) must not refuse the
//! others: if the batch's statement fails, each of its jobs is written
//! again alone ([`jobs::submit`]) and gets its own answer.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::jobs::{self, NewJob, Submitted};

/// The most jobs in one statement: a flood of submissions still commits
/// (and answers) every few milliseconds, and the statement's arrays stay
/// small.
pub const MAX_BATCH: usize = 256;

/// Batches written at once, each on a connection of its own; the next
/// gathers while they are written. Two were no faster than one on this
/// 2-core machine (`partita bench api`, 24 clients, three rounds each:
/// 4,401-4,734 submissions/s with one, 4,584-4,681 with two) and cost
/// PostgreSQL 15 % more CPU, in smaller batches.
const IN_FLIGHT: usize = 1;

/// Submissions waiting for the writer; a full queue makes handlers wait
/// (back-pressure) rather than grow without bound.
const QUEUE: usize = 4096;

/// One submission and where its answer goes.
struct Pending {
    job: NewJob,
    user: String,
    team: String,
    reply: oneshot::Sender<sqlx::Result<Stored>>,
}

/// What became of a submission, with the time it was submitted (cluster
/// time, see [`jobs::submit`]) when it made a new job.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub outcome: Submitted,
    pub seq: Option<i64>,
    pub submitted_at: Option<DateTime<Utc>>,
}

/// The handle handlers submit through; cheap to clone. The writer task
/// ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct JobWriter {
    queue: mpsc::Sender<Pending>,
}

impl JobWriter {
    /// Starts the writer task on the current tokio runtime.
    pub fn spawn(pool: PgPool) -> JobWriter {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(run(pool, waiting));
        JobWriter { queue }
    }

    /// Stores `job` (with its `submitted` and `queued` events) and answers
    /// once it is committed. `user` and `team` are names for the events.
    pub async fn submit(&self, job: NewJob, user: &str, team: &str) -> sqlx::Result<Stored> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            job,
            user: user.to_string(),
            team: team.to_string(),
            reply,
        };
        let gone = || sqlx::Error::PoolClosed;
        self.queue.send(pending).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn run(pool: PgPool, mut waiting: mpsc::Receiver<Pending>) {
    let writing = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        // While every writer is busy, submissions gather for the next.
        let Ok(permit) = Arc::clone(&writing).acquire_owned().await else {
            return;
        };
        let mut batch = Vec::with_capacity(MAX_BATCH);
        if waiting.recv_many(&mut batch, MAX_BATCH).await == 0 {
            return;
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            let answers = match write_batch(&pool, &batch).await {
                Ok(stored) => stored.into_iter().map(Ok).collect(),
                Err(err) => {
                    tracing::warn!(jobs = batch.len(), %err, "a batch of submissions failed; writing each alone");
                    write_each(&pool, &batch).await
                }
            };
            drop(permit);
            for (p, answer) in batch.into_iter().zip(answers) {
                // The handler may have gone (its client hung up): the job
                // is stored all the same, as a replay of its key will show.
                let _ = p.reply.send(answer);
            }
        });
    }
}

/// Every job of `batch` in one statement (one transaction); the answers in
/// the batch's order.
async fn write_batch(pool: &PgPool, batch: &[Pending]) -> sqlx::Result<Vec<Stored>> {
    let mut conn = pool.acquire().await?;
    let n = batch.len();
    let mut ids = Vec::with_capacity(n);
    let mut team_ids = Vec::with_capacity(n);
    let mut project_ids = Vec::with_capacity(n);
    let mut user_ids = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    let mut classes = Vec::with_capacity(n);
    let mut reasons = Vec::with_capacity(n);
    let mut specs = Vec::with_capacity(n);
    let mut requests = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    let mut hashes = Vec::with_capacity(n);
    let mut submitters = Vec::with_capacity(n);
    for p in batch {
        let j = &p.job;
        ids.push(j.id.clone());
        team_ids.push(j.team_id);
        project_ids.push(j.project_id);
        user_ids.push(j.user_id);
        names.push(j.name.clone());
        classes.push(j.class.clone());
        reasons.push(jobs::queued_reason(&p.team));
        specs.push(j.spec.to_string());
        requests.push(j.request.to_string());
        let (key, hash) = match &j.idempotency {
            Some((k, h)) => (k.clone(), hex(h)),
            None => (String::new(), String::new()),
        };
        keys.push(key);
        hashes.push(hash);
        submitters.push(format!("by {}", p.user));
    }
    // Submitted in cluster time (`cluster_now()`, see `jobs::submit`), one
    // time for the batch. A key used twice within the batch, or before it,
    // makes no second row: ON CONFLICT skips it and it is answered below
    // from the row that has the key.
    let inserted = sqlx::query!(
        r#"WITH stamp AS MATERIALIZED (
               SELECT COALESCE(cluster_now(), now()) AS at
           ),
           input AS (
               SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::text[],
                                    $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                                    $11::text[], $12::text[])
                   WITH ORDINALITY AS x(id, team_id, project_id, user_id, name, class, reason, spec,
                                        request, key, hash, submitter, n)
           ),
           inserted AS (
               INSERT INTO jobs (id, team_id, project_id, user_id, name, class, state, reason, spec,
                                 request, idempotency_key, idempotency_hash, submitted_at)
               SELECT id, team_id, project_id, user_id, name, class, 'queued', reason, spec::jsonb,
                      request::jsonb, NULLIF(key, ''), decode(NULLIF(hash, ''), 'hex'), stamp.at
               FROM input, stamp ORDER BY n
               ON CONFLICT (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
               RETURNING seq, id, submitted_at
           ),
           events AS (
               INSERT INTO job_events (job_seq, at, state, reason, clock)
               SELECT i.seq, i.submitted_at, e.state, e.reason, 'cluster'
               FROM inserted i JOIN input USING (id)
               CROSS JOIN LATERAL (VALUES (1, 'submitted', input.submitter),
                                          (2, 'queued', input.reason)) AS e(k, state, reason)
               ORDER BY i.seq, e.k
           )
           SELECT id AS "id!", seq AS "seq!", submitted_at AS "submitted_at!" FROM inserted"#,
        &ids,
        &team_ids,
        &project_ids,
        &user_ids,
        &names,
        &classes,
        &reasons,
        &specs,
        &requests,
        &keys,
        &hashes,
        &submitters,
    )
    .fetch_all(&mut *conn)
    .await?;
    let seqs: HashMap<String, (i64, DateTime<Utc>)> = inserted
        .into_iter()
        .map(|r| (r.id, (r.seq, r.submitted_at)))
        .collect();

    // The jobs not inserted: their key was taken; by which job, and was
    // it the same request?
    let (mut taken_users, mut taken_keys) = (Vec::new(), Vec::new());
    for p in batch.iter().filter(|p| !seqs.contains_key(&p.job.id)) {
        if let Some((key, _)) = &p.job.idempotency {
            taken_users.push(p.job.user_id);
            taken_keys.push(key.clone());
        }
    }
    // (user, key) -> (the job that has the key, its request's hash).
    let mut holders: HashMap<(i64, String), KeyHolder> = HashMap::new();
    if !taken_keys.is_empty() {
        let rows = sqlx::query!(
            r#"SELECT j.user_id, j.idempotency_key AS "key!", j.id, j.idempotency_hash
               FROM jobs j
               JOIN UNNEST($1::int8[], $2::text[]) AS k(user_id, key)
                 ON j.user_id = k.user_id AND j.idempotency_key = k.key"#,
            &taken_users,
            &taken_keys
        )
        .fetch_all(&mut *conn)
        .await?;
        for r in rows {
            let holder = KeyHolder {
                job: r.id,
                hash: r.idempotency_hash,
            };
            holders.insert((r.user_id, r.key), holder);
        }
    }

    let mut out = Vec::with_capacity(n);
    for p in batch {
        if let Some(&(seq, submitted_at)) = seqs.get(&p.job.id) {
            out.push(Stored {
                outcome: Submitted::Created(p.job.id.clone()),
                seq: Some(seq),
                submitted_at: Some(submitted_at),
            });
            continue;
        }
        let Some((key, hash)) = &p.job.idempotency else {
            return Err(sqlx::Error::Protocol(format!(
                "job {}: not stored and no idempotency key to explain it",
                p.job.id
            )));
        };
        let Some(holder) = holders.get(&(p.job.user_id, key.clone())) else {
            return Err(sqlx::Error::Protocol(format!(
                "job {}: its idempotency key {key:?} is taken, but by no stored job",
                p.job.id
            )));
        };
        let outcome = if holder.hash.as_deref() == Some(hash.as_slice()) {
            Submitted::Replayed(holder.job.clone())
        } else {
            Submitted::Conflict(holder.job.clone())
        };
        out.push(Stored {
            outcome,
            seq: None,
            submitted_at: None,
        });
    }
    Ok(out)
}

/// The job that holds an idempotency key.
struct KeyHolder {
    job: String,
    hash: Option<Vec<u8>>,
}

/// The jobs of a failed batch, each in a transaction of its own.
async fn write_each(pool: &PgPool, batch: &[Pending]) -> Vec<sqlx::Result<Stored>> {
    let mut out = Vec::with_capacity(batch.len());
    for p in batch {
        let stored = jobs::submit(pool, &p.job, &p.user, &p.team)
            .await
            .map(|outcome| Stored {
                outcome,
                seq: None,
                submitted_at: None,
            });
        out.push(stored);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
