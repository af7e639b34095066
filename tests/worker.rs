//! The background worker against a real PostgreSQL (started by `support`):
//! jobs inserted as queued rows are placed on the virtual cluster (the demo
//! cluster: 6 nodes of 8 GPUs, MIG on), run their duration in scaled time
//! and succeed, with their events and ledger rows; a job too big for any
//! node waits with a reason; a second worker takes over when the active
//! one dies; a restarted worker carries on where the last one stopped.
//!
//! Jobs are inserted with plain SQL (the submit API is built elsewhere).
//! Speeds are high (600-2000 cluster seconds per wall second) and every
//! wait is bounded; nothing here measures wall-clock speed.

mod support;

use std::time::{Duration, Instant};

use partita::accounting;
use partita::worker::{self, clock, store};
use proptest::prelude::*;
use sqlx::{PgPool, Row};

const SECOND: i64 = 1_000_000_000;
/// The longest any wait here may take before the test fails.
const LIMIT: Duration = Duration::from_secs(60);

/// Worker options for tests: the demo cluster at `speed`, short ticks.
fn options(speed: f64, id: &str) -> worker::Options {
    let mut opt = worker::Options::new(worker::load_scenario(None).unwrap(), speed);
    opt.tick = Duration::from_millis(20);
    opt.lock_poll = Duration::from_millis(200);
    opt.id = id.to_string();
    opt
}

/// A fresh database with the demo cluster's teams and a member of
/// `research`.
async fn setup() -> PgPool {
    let (pool, _) = support::fresh_db().await;
    let sc = worker::load_scenario(None).unwrap();
    let mut conn = pool.acquire().await.unwrap();
    assert!(store::seed_teams(&mut conn, &sc.teams).await.unwrap());
    sqlx::query(
        "INSERT INTO users (name, role, team_id) SELECT 'alice', 'member', id FROM teams WHERE name = 'research'",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    pool
}

/// A task's GPU demand, as the spec's JSON (Go field names).
fn whole(count: i32) -> serde_json::Value {
    serde_json::json!({"Kind": 1, "Count": count, "Milli": 0, "Profile": "", "PeakMemoryMiB": 0, "Compute": 0, "Models": null})
}

fn mig(profile: &str) -> serde_json::Value {
    serde_json::json!({"Kind": 2, "Count": 0, "Milli": 0, "Profile": profile, "PeakMemoryMiB": 0, "Compute": 0, "Models": null})
}

/// Inserts a queued job of one task for alice (research, batch), as the
/// API would; returns its seq.
async fn submit(pool: &PgPool, id: &str, gpu: serde_json::Value, seconds: i64) -> i64 {
    let spec = serde_json::json!({
        "tasks": [{"Name": "t0", "CPUMilli": 1000, "MemoryMiB": 1024, "GPU": gpu}],
        "duration": seconds * SECOND,
    });
    let mut conn = pool.acquire().await.unwrap();
    let now = clock::cluster_now(&mut conn)
        .await
        .unwrap()
        .unwrap_or_else(chrono::Utc::now);
    sqlx::query(
        "INSERT INTO jobs (id, team_id, project_id, user_id, class, state, spec, request, submitted_at)
         SELECT $1, t.id, p.id, u.id, 'batch', 'queued', $2, '{}', $3
         FROM teams t JOIN projects p ON p.team_id = t.id AND p.name = 'default'
              JOIN users u ON u.name = 'alice'
         WHERE t.name = 'research'
         RETURNING seq",
    )
    .bind(id)
    .bind(spec)
    .bind(now)
    .fetch_one(&mut *conn)
    .await
    .unwrap()
    .get(0)
}

/// Waits until `sql` (a query of one boolean) is true.
async fn wait_for(pool: &PgPool, what: &str, sql: &'static str) {
    let started = Instant::now();
    loop {
        let done: bool = sqlx::query_scalar(sql).fetch_one(pool).await.unwrap();
        if done {
            return;
        }
        if started.elapsed() > LIMIT {
            let jobs: Vec<(String, String, String)> =
                sqlx::query_as("SELECT id, state, reason FROM jobs ORDER BY seq")
                    .fetch_all(pool)
                    .await
                    .unwrap();
            let ev: Vec<(i64, String, String, String)> = sqlx::query_as(
                "SELECT job_seq, at::text, state, reason FROM job_events ORDER BY seq",
            )
            .fetch_all(pool)
            .await
            .unwrap();
            panic!("timed out after {LIMIT:?} waiting for {what}; jobs: {jobs:?}; events: {ev:#?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn all_succeeded(pool: &PgPool) {
    wait_for(
        pool,
        "every job to succeed",
        "SELECT bool_and(state = 'succeeded') FROM jobs",
    )
    .await;
}

/// The job's event states in order, with their cluster times in seconds
/// since the epoch.
async fn events(pool: &PgPool, seq: i64) -> Vec<(String, i64)> {
    sqlx::query("SELECT state, EXTRACT(EPOCH FROM at)::bigint FROM job_events WHERE job_seq = $1 ORDER BY seq")
        .bind(seq)
        .fetch_all(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// A ledger row: (gpu_share, seconds held, share_ms, price, cost,
/// mig_profile, micro_gpu_hours).
type LedgerRow = (i64, i64, i64, i64, i64, Option<String>, i64);

async fn ledger(pool: &PgPool, seq: i64) -> Vec<LedgerRow> {
    sqlx::query(
        "SELECT gpu_share::bigint, EXTRACT(EPOCH FROM ended_at - started_at)::bigint,
                share_ms, price_micros, cost_micros, mig_profile, micro_gpu_hours
         FROM usage_ledger WHERE job_seq = $1 ORDER BY seq",
    )
    .bind(seq)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(|r| {
        (
            r.get(0),
            r.get(1),
            r.get(2),
            r.get(3),
            r.get(4),
            r.get(5),
            r.get(6),
        )
    })
    .collect()
}

/// Checks a ledger row's arithmetic, written out here independently of
/// `accounting`: share_ms = share x held ms; micro GPU-hours = share_ms /
/// (7000 x 3600 x 1000 / 10^6) and cost = micro GPU-hours x price / 10^6,
/// each rounded half up; exact integers.
fn check_row(row: &LedgerRow) {
    let (share, seconds, share_ms, price, cost, _, micro_h) = row;
    assert_eq!(*share_ms, share * seconds * 1000, "{row:?}");
    assert_eq!(*micro_h, (share_ms + 12_600) / 25_200, "{row:?}");
    assert_eq!(*cost, (micro_h * price + 500_000) / 1_000_000, "{row:?}");
}

#[tokio::test]
async fn a_queued_job_is_placed_runs_and_succeeds_with_its_events_and_ledger_rows() {
    let pool = setup().await;
    let w = worker::spawn(pool.clone(), options(600.0, "w1"));
    let gpus = submit(&pool, "two-gpus", whole(2), 120).await;
    let slice = submit(&pool, "a-slice", mig("1g.10gb"), 120).await;
    all_succeeded(&pool).await;
    w.stop().await;

    for seq in [gpus, slice] {
        let ev = events(&pool, seq).await;
        let states: Vec<&str> = ev.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(states, ["admitted", "running", "succeeded"], "job {seq}");
        // It ran exactly its duration, in cluster time.
        assert_eq!(ev[2].1 - ev[1].1, 120, "job {seq}: {ev:?}");
        let rows = ledger(&pool, seq).await;
        for row in &rows {
            check_row(row);
            // Held from its admission to its end (a MIG instance's
            // creation included).
            assert_eq!(row.1, ev[2].1 - ev[0].1, "job {seq}: {row:?}");
        }
        if seq == gpus {
            // One row per GPU: two whole H100s or A100s.
            assert_eq!(rows.len(), 2, "{rows:?}");
            assert!(
                rows.iter().all(|r| r.0 == 7000 && r.5.is_none()),
                "{rows:?}"
            );
        } else {
            assert_eq!(rows.len(), 1, "{rows:?}");
            // One of seven compute slices: exactly 1/7 of a GPU.
            assert_eq!((rows[0].0, rows[0].5.as_deref()), (1000, Some("1g.10gb")));
        }
        let (attempts, finished): (i32, bool) =
            sqlx::query_as("SELECT attempts, finished_at IS NOT NULL FROM jobs WHERE seq = $1")
                .bind(seq)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((attempts, finished), (1, true));
    }
    // The built-in prices: an H100 or A100 GPU-hour, reserved.
    let price: i64 = sqlx::query_scalar("SELECT min(price_micros) FROM usage_ledger")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(price == 2_500_000 || price == 1_550_000, "{price}");
    // A retried write of the same holds adds nothing (hold_id is unique).
    let dup = sqlx::query(
        "INSERT INTO usage_ledger (hold_id, team_id, project_id, user_id, job_seq, task, node, gpu_index,
            gpu_model, gpu_share, capacity_tier, job_class, started_at, ended_at, share_ms,
            micro_gpu_hours, price_micros, cost_micros)
         SELECT hold_id, team_id, project_id, user_id, job_seq, task, node, gpu_index, gpu_model,
            gpu_share, capacity_tier, job_class, started_at, ended_at, share_ms, micro_gpu_hours,
            price_micros, cost_micros FROM usage_ledger
         ON CONFLICT (hold_id) DO NOTHING",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(dup.rows_affected(), 0);
}

#[tokio::test]
async fn a_job_bigger_than_any_node_stays_queued_with_a_reason_and_nothing_else_changes() {
    let pool = setup().await;
    let w = worker::spawn(pool.clone(), options(600.0, "w1"));
    let seq = submit(&pool, "too-big", whole(9), 60).await;
    // Why it waits is published with its team's queue (not written on
    // the job's row, which keeps the reason of its last change of state).
    wait_for(
        &pool,
        "a reason in the published queue",
        "SELECT EXISTS (SELECT 1 FROM worker_views v, jsonb_each(v.body->'slots') s
                        WHERE v.kind = 'queue'
                          AND s.value->>'reason' <> 'submitted; waiting for the next scheduling cycle')",
    )
    .await;
    // Several more ticks: still nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.stop().await;
    let (state, attempts, runtime): (String, i32, serde_json::Value) =
        sqlx::query_as("SELECT state, attempts, runtime FROM jobs WHERE seq = $1")
            .bind(seq)
            .fetch_one(&pool)
            .await
            .unwrap();
    let reason: String = sqlx::query_scalar(
        "SELECT s.value->>'reason' FROM worker_views v, jsonb_each(v.body->'slots') s
         WHERE v.kind = 'queue' AND s.key = (SELECT id FROM jobs WHERE seq = $1)",
    )
    .bind(seq)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(state, "queued");
    assert!(
        reason.contains("never run") || reason.contains("no room"),
        "{reason}"
    );
    assert_eq!(attempts, 0);
    // Never placed: the row keeps the runtime it was submitted with (the
    // worker writes a job's row when its state changes).
    let placed = runtime["placed"].as_array().cloned().unwrap_or_default();
    assert!(placed.iter().all(|p| p.is_null()), "{runtime}");
    assert!(runtime["epoch"].as_i64().unwrap_or(0) == 0, "{runtime}");
    assert!(events(&pool, seq).await.is_empty());
    let holds: i64 = sqlx::query_scalar("SELECT count(*) FROM usage_ledger")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(holds, 0);
}

/// The id of the active worker, once one is.
async fn active_worker(pool: &PgPool) -> String {
    let started = Instant::now();
    loop {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT id FROM workers WHERE active AND heartbeat_at > now() - interval '2 seconds'",
        )
        .fetch_optional(pool)
        .await
        .unwrap();
        if let Some(id) = id {
            return id;
        }
        assert!(started.elapsed() < LIMIT, "no worker became active");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Checks that every job started once and ran once: one admission, one
/// start, one end, one attempt; and that its ledger rows add up.
async fn started_once(pool: &PgPool, seqs: &[i64], seconds: i64) {
    for &seq in seqs {
        let ev = events(pool, seq).await;
        let states: Vec<&str> = ev.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(states, ["admitted", "running", "succeeded"], "job {seq}");
        assert_eq!(ev[2].1 - ev[1].1, seconds, "job {seq} ran {ev:?}");
        let rows = ledger(pool, seq).await;
        assert!(!rows.is_empty(), "job {seq} has no ledger row");
        for row in &rows {
            check_row(row);
            assert_eq!(row.1, ev[2].1 - ev[0].1, "job {seq}: {row:?}");
        }
    }
    let attempts: Vec<i32> = sqlx::query_scalar("SELECT attempts FROM jobs ORDER BY seq")
        .fetch_all(pool)
        .await
        .unwrap();
    assert!(attempts.iter().all(|&a| a == 1), "{attempts:?}");
}

#[tokio::test]
async fn a_waiting_worker_takes_over_when_the_active_one_dies() {
    let pool = setup().await;
    let a = worker::spawn(pool.clone(), options(600.0, "a"));
    assert_eq!(active_worker(&pool).await, "a");
    let b = worker::spawn(pool.clone(), options(600.0, "b"));
    let mut seqs = Vec::new();
    for i in 0..4 {
        seqs.push(submit(&pool, &format!("job-{i}"), whole(1), 600).await);
    }
    wait_for(
        &pool,
        "the jobs to run",
        "SELECT count(*) FILTER (WHERE state = 'running') > 0 FROM jobs",
    )
    .await;
    // The active worker dies: its task is dropped, and with it the
    // connection that holds the lock.
    a.abort();
    let died = Instant::now();
    let started = Instant::now();
    loop {
        let id: Option<String> =
            sqlx::query_scalar("SELECT id FROM workers WHERE active AND id = 'b'")
                .fetch_optional(&pool)
                .await
                .unwrap();
        if id.is_some() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "b did not take over within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("b took over {:?} after a died", died.elapsed());
    all_succeeded(&pool).await;
    b.stop().await;
    started_once(&pool, &seqs, 600).await;
}

#[tokio::test]
async fn a_restarted_worker_carries_on_without_a_jump_in_cluster_time() {
    let pool = setup().await;
    let speed = 600.0;
    let a = worker::spawn(pool.clone(), options(speed, "a"));
    let mut seqs = Vec::new();
    // One job: a second MIG job waits until the first ends (see the
    // worker's notes), and this test needs jobs running at the stop.
    seqs.push(submit(&pool, "job-0", mig("3g.40gb"), 1800).await);
    wait_for(
        &pool,
        "the jobs to run",
        "SELECT bool_and(state = 'running') FROM jobs",
    )
    .await;
    a.stop().await;
    let clock_at_stop = meta_clock(&pool).await;
    let running: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE state = 'running'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        running, 1,
        "the job were still running when the worker stopped"
    );
    // Down for 1.5 s of wall time: 900 s of cluster time had the clock run.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(meta_clock(&pool).await, clock_at_stop);
    let spawned = Instant::now();
    let b = worker::spawn(pool.clone(), options(speed, "b"));
    wait_for(
        &pool,
        "b to be active",
        "SELECT EXISTS (SELECT 1 FROM workers WHERE id = 'b' AND active)",
    )
    .await;
    let resumed = meta_clock(&pool).await;
    let allowed = (spawned.elapsed().as_secs_f64() * speed) as i64 * SECOND + 60 * SECOND;
    assert!(
        resumed >= clock_at_stop && resumed - clock_at_stop <= allowed,
        "cluster time jumped from {clock_at_stop} to {resumed} (allowed {allowed})"
    );
    all_succeeded(&pool).await;
    b.stop().await;
    started_once(&pool, &seqs, 1800).await;
}

async fn meta_clock(pool: &PgPool) -> i64 {
    let v: String = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'clock'")
        .fetch_one(pool)
        .await
        .unwrap();
    v.parse().unwrap()
}

/// A ledger row's hold: share, start, end, model, tier.
type HoldRow = (
    i64,
    chrono::DateTime<chrono::Utc>,
    chrono::DateTime<chrono::Utc>,
    String,
    String,
);

/// The GPU part a demand holds, as the ledger counts it, in 1/7000 GPU.
fn held_share(count: i32, profile: Option<&str>) -> i64 {
    match profile {
        None => 7000 * i64::from(count),
        Some(p) => {
            let compute: i64 = p[..1].parse().unwrap();
            compute * 1000
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// For random small job sets run to completion, the ledger's
    /// GPU-seconds add up exactly to the jobs' held spans (from their
    /// admission to their end, times the GPU part each holds).
    #[test]
    fn ledger_share_ms_equal_the_jobs_held_spans(
        jobs in prop::collection::vec(
            (prop_oneof![
                (1..=4i32).prop_map(|n| (n, None)),
                prop::sample::select(vec!["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]).prop_map(|p| (0, Some(p))),
            ], 30..=300i64),
            1..6,
        )
    ) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let pool = setup().await;
            let w = worker::spawn(pool.clone(), options(2000.0, "w"));
            let mut expected = 0;
            let mut seqs = Vec::new();
            for (i, ((count, profile), seconds)) in jobs.iter().enumerate() {
                let gpu = match profile {
                    None => whole(*count),
                    Some(p) => mig(p),
                };
                seqs.push((submit(&pool, &format!("j{i}"), gpu, *seconds).await, held_share(*count, *profile)));
            }
            all_succeeded(&pool).await;
            w.stop().await;
            for (seq, share) in &seqs {
                let ev = events(&pool, *seq).await;
                expected += share * (ev.last().unwrap().1 - ev[0].1) * 1000;
            }
            let total: i64 = sqlx::query_scalar("SELECT sum(share_ms)::bigint FROM usage_ledger")
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_eq!(total, expected, "{jobs:?}");
            let cost: i64 = sqlx::query_scalar("SELECT sum(cost_micros)::bigint FROM usage_ledger")
                .fetch_one(&pool)
                .await
                .unwrap();
            // Each row's cost is what the one charging function gives
            // for its own hold at the built-in prices.
            let rows: Vec<HoldRow> =
                sqlx::query_as("SELECT gpu_share::bigint, started_at, ended_at, gpu_model, capacity_tier FROM usage_ledger")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let prices = accounting::Prices::builtin();
            let want: i64 = rows
                .into_iter()
                .map(|(share, start, end, model, tier)| {
                    let hold = accounting::Hold {
                        business_unit: String::new(),
                        team: String::new(),
                        project: String::new(),
                        user: String::new(),
                        model,
                        tier,
                        class: String::new(),
                        share,
                        start,
                        end: Some(end),
                    };
                    accounting::charge(&hold, &prices).unwrap().1.cost_micros
                })
                .sum();
            assert_eq!(cost, want);
        });
    }
}
