//! Durability (issue 46, item 7): `kill -9` of `partita serve` while
//! clients submit jobs concurrently loses no acknowledged job and no
//! ledger row, and duplicates none; a replayed idempotency key answers with
//! the same job; at start the server logs what it found.
//!
//! The server is a real `partita serve` process on its embedded
//! PostgreSQL in a temporary data dir, with its default settings (fsync
//! and synchronous commit on), as a user's default start runs it: the
//! test then checks what a user would get, on the real PostgreSQL, and
//! the embedded database's own restart paths are part of it. Two rounds:
//!
//! 1. only Partita is killed; its PostgreSQL lives on (it runs in a
//!    session of its own), and the restart stops and restarts it;
//! 2. Partita and the postmaster are killed at once (a power cut, an OOM
//!    kill): PostgreSQL recovers from its WAL at the restart.
//!
//! In each round eight clients submit jobs over plain HTTP, each with a
//! unique `Idempotency-Key`, and record which were acknowledged (200/201)
//! with which job; the worker runs the virtual cluster fast, so jobs finish
//! and ledger rows are written. Once enough are acknowledged and finished,
//! the process is killed mid-stream (some requests are in flight), then
//! started again on the same data dir. Then: every acknowledged job is
//! there, once, under its key; no two jobs share a key; every job that had
//! finished before the kill still has exactly its ledger rows; no hold is
//! in the ledger twice (by `hold_id`, or as overlapping rows of one task on
//! one GPU); replaying every key (acknowledged or in flight) answers with
//! the acknowledged job, and makes at most one job per key. Waits are
//! bounded; nothing measures speed.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use partita::db::embedded::{PORT, SUPERUSER, is_postgres_process, read_postmaster_pid};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use support::Serve;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Cluster seconds per wall second: a 1-3 minute job ends in 0.1-0.3 s.
const SPEED: &str = "600";
const CLIENTS: usize = 8;
/// Acknowledged submissions and finished jobs in a round before the kill.
const ACKED_BEFORE_KILL: usize = 60;
const FINISHED_BEFORE_KILL: usize = 5;

// ---------------------------------------------------------------- HTTP

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): the
/// status and the body. An error is the transport's (refused, reset).
async fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: &str,
    key: Option<&str>,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(k) = key {
            req.push_str(&format!("Idempotency-Key: {k}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("no status line in {text:?}"),
                )
            })?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((status, body))
    };
    match tokio::time::timeout(Duration::from_secs(20), exchange).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{method} {path}: no answer in 20 s"),
        )),
    }
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// The job a submission answered with, if it was acknowledged.
fn acknowledged(status: u16, body: &str) -> Option<String> {
    matches!(status, 200 | 201).then(|| {
        json(body)["id"]
            .as_str()
            .unwrap_or_else(|| panic!("an acknowledgement without a job id: {body}"))
            .to_string()
    })
}

// ---------------------------------------------------------- the server

fn start(data: &Path) -> Serve {
    tokio::task::block_in_place(|| {
        Serve::start(
            &["--data-dir", data.to_str().unwrap(), "--speed", SPEED],
            &[],
        )
        .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// The embedded PostgreSQL, reached as Partita reaches it (its socket in
/// the data dir; the test runs as Partita does).
async fn database(data: &Path) -> PgPool {
    let options = PgConnectOptions::new()
        .socket(data.join("postgres"))
        .port(PORT)
        .username(SUPERUSER)
        .database(partita::db::DATABASE_NAME);
    PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .expect("connect to the embedded PostgreSQL")
}

/// Waits (bounded) until `serve`'s log has `needle`; the log.
async fn log_shows(serve: &Serve, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let log = serve.log();
        if log.contains(needle) {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log after {limit:?}:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ------------------------------------------------------------ clients

/// What the clients saw: every key sent with its request body, and the
/// job of each acknowledged one.
#[derive(Default)]
struct Seen {
    bodies: BTreeMap<String, String>,
    acked: BTreeMap<String, String>,
    /// Answers other than 200/201, and transport errors before the kill.
    unexpected: Vec<String>,
}

/// A client: submits jobs with unique keys until its connection fails
/// (the kill), recording each key before it is sent.
async fn client(
    addr: String,
    token: String,
    prefix: String,
    seen: Arc<Mutex<Seen>>,
    acks: Arc<AtomicUsize>,
    killed: Arc<AtomicBool>,
) {
    for i in 0.. {
        let key = format!("{prefix}-{i}");
        let body = format!(
            r#"{{"team":"search","gpu":{{"count":1}},"duration":"{}m"}}"#,
            1 + i % 3
        );
        seen.lock()
            .unwrap()
            .bodies
            .insert(key.clone(), body.clone());
        match http(&addr, "POST", "/api/v1/jobs", &token, Some(&key), &body).await {
            Ok((status, answer)) => match acknowledged(status, &answer) {
                Some(id) => {
                    seen.lock().unwrap().acked.insert(key, id);
                    acks.fetch_add(1, Ordering::SeqCst);
                }
                None => {
                    seen.lock()
                        .unwrap()
                        .unexpected
                        .push(format!("{key}: {status} {answer}"));
                    return;
                }
            },
            Err(e) => {
                if !killed.load(Ordering::SeqCst) {
                    seen.lock()
                        .unwrap()
                        .unexpected
                        .push(format!("{key}: before the kill: {e}"));
                }
                return;
            }
        }
    }
}

// ---------------------------------------------------------- the database

/// Ledger rows (their hold IDs) by finished job.
async fn finished_holds(pool: &PgPool) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let rows = sqlx::query(
        "SELECT j.id, l.hold_id FROM jobs j LEFT JOIN usage_ledger l ON l.job_seq = j.seq
         WHERE j.state IN ('succeeded', 'failed', 'cancelled')",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for r in rows {
        let holds = out.entry(r.get("id")).or_default();
        if let Some(h) = r.get::<Option<String>, _>("hold_id") {
            holds.insert(h);
        }
    }
    out
}

async fn all_holds(pool: &PgPool) -> BTreeSet<String> {
    sqlx::query_scalar("SELECT hold_id FROM usage_ledger")
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Jobs with a key: key -> the job IDs under it.
async fn jobs_by_key(pool: &PgPool) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let rows = sqlx::query(
        "SELECT id, idempotency_key FROM jobs WHERE idempotency_key IS NOT NULL ORDER BY seq",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for r in rows {
        out.entry(r.get("idempotency_key"))
            .or_default()
            .push(r.get("id"));
    }
    out
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Everything the database must say after a restart, given what the
/// clients saw and what the ledger held just before the kill.
async fn check_database(
    pool: &PgPool,
    seen: &Seen,
    finished_before: &BTreeMap<String, BTreeSet<String>>,
    holds_before: &BTreeSet<String>,
) {
    let by_key = jobs_by_key(pool).await;
    for (key, ids) in &by_key {
        assert_eq!(ids.len(), 1, "key {key} has several jobs: {ids:?}");
        assert!(
            seen.bodies.contains_key(key),
            "job {ids:?} has the key {key}, which no client sent"
        );
    }
    for (key, id) in &seen.acked {
        assert_eq!(
            by_key.get(key),
            Some(&vec![id.clone()]),
            "acknowledged job {id} (key {key}) is lost or not under its key"
        );
    }
    let ids = count(pool, "SELECT count(*) FROM jobs").await;
    let distinct = count(pool, "SELECT count(DISTINCT id) FROM jobs").await;
    assert_eq!(ids, distinct, "a job ID is stored twice");

    let rows = count(pool, "SELECT count(*) FROM usage_ledger").await;
    let holds = count(pool, "SELECT count(DISTINCT hold_id) FROM usage_ledger").await;
    assert_eq!(rows, holds, "a hold is in the ledger twice");
    let overlapping = count(
        pool,
        "SELECT count(*) FROM usage_ledger a JOIN usage_ledger b
           ON a.seq < b.seq AND a.job_seq = b.job_seq AND a.task = b.task AND a.node = b.node
          AND a.gpu_index = b.gpu_index
          AND coalesce(a.mig_profile, '') = coalesce(b.mig_profile, '')
          AND a.started_at < b.ended_at AND b.started_at < a.ended_at",
    )
    .await;
    assert_eq!(
        overlapping, 0,
        "one task's time on one GPU is charged twice"
    );
    let now = all_holds(pool).await;
    let lost: Vec<_> = holds_before.difference(&now).collect();
    assert!(lost.is_empty(), "ledger rows lost in the crash: {lost:?}");
    let after = finished_holds(pool).await;
    for (job, holds) in finished_before {
        assert_eq!(
            after.get(job),
            Some(holds),
            "job {job} had finished before the kill with these ledger rows"
        );
    }
}

/// Replays every key with its body: an acknowledged one answers 200 with
/// its job; one that was in flight answers 200 (it was committed) or 201
/// (it was not). Returns each key's job.
async fn replay(addr: &str, token: &str, seen: &Seen) -> BTreeMap<String, String> {
    let keys: Vec<(String, String)> = seen
        .bodies
        .iter()
        .map(|(k, b)| (k.clone(), b.clone()))
        .collect();
    let mut tasks = Vec::new();
    for chunk in keys.chunks(keys.len().div_ceil(CLIENTS).max(1)) {
        let (chunk, addr, token) = (chunk.to_vec(), addr.to_string(), token.to_string());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for (key, body) in chunk {
                let (status, answer) =
                    http(&addr, "POST", "/api/v1/jobs", &token, Some(&key), &body)
                        .await
                        .unwrap_or_else(|e| panic!("replay of {key}: {e}"));
                let id = acknowledged(status, &answer)
                    .unwrap_or_else(|| panic!("replay of {key}: {status} {answer}"));
                out.push((key, status, id));
            }
            out
        }));
    }
    let mut jobs = BTreeMap::new();
    for t in tasks {
        for (key, status, id) in t.await.unwrap() {
            if let Some(acked) = seen.acked.get(&key) {
                assert_eq!(status, 200, "replay of acknowledged key {key}: {status}");
                assert_eq!(&id, acked, "replay of key {key}: another job");
            }
            jobs.insert(key, id);
        }
    }
    jobs
}

// ---------------------------------------------------------------- test

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_concurrent_submissions_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data: PathBuf = dir.path().join("data");
    let mut serve = start(&data);
    let token = std::fs::read_to_string(data.join("admin.token"))
        .expect("admin.token")
        .trim()
        .to_string();
    let mut all = Seen::default();
    let mut in_flight = 0;

    for (round, kill_postgres) in [(1, false), (2, true)] {
        // The worker seeds the cluster's teams when it first becomes active.
        log_shows(
            &serve,
            "worker: recovered from the database",
            Duration::from_secs(30),
        )
        .await;
        let pool = database(&data).await;
        let finished_at_start = finished_holds(&pool).await.len();

        let seen = Arc::new(Mutex::new(Seen::default()));
        let acks = Arc::new(AtomicUsize::new(0));
        let killed = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                tokio::spawn(client(
                    serve.addr.clone(),
                    token.clone(),
                    format!("round{round}-client{c}"),
                    seen.clone(),
                    acks.clone(),
                    killed.clone(),
                ))
            })
            .collect();

        // Enough acknowledged and finished, the clients still going: the
        // ledger as it is now, then kill.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (finished_before, holds_before) = loop {
            let finished = finished_holds(&pool).await;
            let acked = acks.load(Ordering::SeqCst);
            if acked >= ACKED_BEFORE_KILL
                && finished.len() >= finished_at_start + FINISHED_BEFORE_KILL
            {
                break (finished, all_holds(&pool).await);
            }
            let unexpected = seen.lock().unwrap().unexpected.clone();
            assert!(unexpected.is_empty(), "round {round}: {unexpected:#?}");
            assert!(
                Instant::now() < deadline,
                "round {round}: after 30 s, {acked} acknowledged, {} jobs finished:\n{}",
                finished.len(),
                serve.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(
            finished_before.values().any(|h| !h.is_empty()),
            "round {round}: no finished job has a ledger row"
        );
        pool.close().await;
        let postmaster = read_postmaster_pid(&data.join("postgres")).expect("postmaster.pid");
        killed.store(true, Ordering::SeqCst);
        tokio::task::block_in_place(|| {
            serve.kill9();
            if kill_postgres {
                support::signal(postmaster, Signal::SIGKILL);
            }
        });
        for c in clients {
            tokio::time::timeout(Duration::from_secs(30), c)
                .await
                .expect("a client still waits 30 s after the kill")
                .expect("a client panicked");
        }
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        assert!(
            seen.unexpected.is_empty(),
            "round {round}: {:#?}",
            seen.unexpected
        );
        in_flight += seen.bodies.len() - seen.acked.len();
        all.bodies.extend(seen.bodies);
        all.acked.extend(seen.acked);
        if kill_postgres {
            let gone = tokio::task::block_in_place(|| {
                support::wait_until(Duration::from_secs(20), || !is_postgres_process(postmaster))
            });
            assert!(gone, "the killed postmaster {postmaster} lingers");
        } else {
            assert!(
                is_postgres_process(postmaster),
                "PostgreSQL should outlive a killed Partita"
            );
        }

        // The restart says what it found, before any new request.
        serve = start(&data);
        let log = log_shows(
            &serve,
            "recovered from the database: ",
            Duration::from_secs(5),
        )
        .await;
        let pool = database(&data).await;
        let jobs = count(&pool, "SELECT count(*) FROM jobs").await;
        let line = log
            .lines()
            .find(|l| l.contains("recovered from the database: "))
            .unwrap();
        assert!(
            line.contains(&format!("recovered from the database: {jobs} jobs (")),
            "round {round}: the restart's summary does not count the {jobs} stored jobs: {line}"
        );
        assert!(line.contains(" ledger rows"), "{line}");
        log_shows(
            &serve,
            "worker: recovered from the database",
            Duration::from_secs(30),
        )
        .await;

        check_database(&pool, &all, &finished_before, &holds_before).await;

        // Every key again: the same job for the acknowledged ones, one
        // job for each in-flight one; and a second time, all the same.
        let first = replay(&serve.addr, &token, &all).await;
        for (key, id) in &first {
            all.acked.entry(key.clone()).or_insert_with(|| id.clone());
        }
        let second = replay(&serve.addr, &token, &all).await;
        assert_eq!(first, second, "round {round}: a second replay differs");
        let by_key = jobs_by_key(&pool).await;
        assert_eq!(
            by_key.len(),
            all.bodies.len(),
            "round {round}: one job per key sent"
        );
        check_database(&pool, &all, &BTreeMap::new(), &BTreeSet::new()).await;
        eprintln!(
            "round {round}: {} keys, {} acknowledged before the kill, {} in flight so far; {} jobs had finished; {line}",
            all.bodies.len(),
            all.bodies.len() - in_flight,
            in_flight,
            finished_before.len(),
        );
        pool.close().await;
    }

    let (code, log) = tokio::task::block_in_place(|| serve.terminate());
    assert_eq!(code, Some(0), "serve did not stop cleanly:\n{log}");
}
