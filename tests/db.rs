//! The schema on a real PostgreSQL (started by `support`): migrations, the
//! append-only tables, check constraints, the advisory lock, the first
//! start's admin token, and `/readyz` through `app(state)`.

mod support;

use std::os::unix::fs::PermissionsExt;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use partita::db::{self, MIGRATOR, bootstrap};
use partita::server::{AppState, app};
use sqlx::PgPool;
use tower::ServiceExt;

/// The migrations' versions, in order, as this binary knows them.
fn known_versions() -> Vec<i64> {
    MIGRATOR.iter().map(|m| m.version).collect()
}

async fn applied_versions(pool: &PgPool) -> Vec<i64> {
    sqlx::query_scalar::<_, i64>(
        "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
    )
    .fetch_all(pool)
    .await
    .expect("the migrations table")
}

async fn table_exists(pool: &PgPool, table: &str) -> bool {
    sqlx::query_scalar::<_, bool>("SELECT to_regclass($1) IS NOT NULL")
        .bind(table)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn migrations_apply_to_an_empty_database_and_again_do_nothing() {
    let (pool, _) = support::empty_db().await;
    assert!(
        !table_exists(&pool, "users").await,
        "the database is not empty"
    );
    db::migrate(&pool).await.expect("the migrations apply");
    assert_eq!(applied_versions(&pool).await, known_versions());
    for table in [
        "meta",
        "business_units",
        "teams",
        "projects",
        "users",
        "api_tokens",
        "sessions",
        "jobs",
        "job_events",
        "prices",
        "usage_ledger",
        "audit_log",
    ] {
        assert!(table_exists(&pool, table).await, "no table {table}");
    }
    let installed_at: Vec<String> =
        sqlx::query_scalar("SELECT installed_on::text FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    // A restart runs the migrator again: nothing is applied twice.
    db::migrate(&pool)
        .await
        .expect("migrating again is a no-op");
    assert_eq!(applied_versions(&pool).await, known_versions());
    let again: Vec<String> =
        sqlx::query_scalar("SELECT installed_on::text FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(installed_at, again, "a migration was re-applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_migrating_at_once_apply_the_schema_once() {
    // Two pools stand for two servers starting at once on one database.
    let (first, name) = support::empty_db().await;
    let second = db::connect(support::options(&name)).await.unwrap();
    let (a, b) = tokio::join!(db::migrate(&first), db::migrate(&second));
    a.expect("the first migrator succeeds");
    b.expect("the second migrator succeeds (it waited on the advisory lock)");
    assert_eq!(applied_versions(&first).await, known_versions());
    let users_tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class WHERE relname = 'users' AND relkind = 'r'",
    )
    .fetch_one(&first)
    .await
    .unwrap();
    assert_eq!(users_tables, 1);
}

/// A team, project, user and job to hang ledger rows on; the ids.
async fn seed(pool: &PgPool) -> (i64, i64, i64, i64) {
    let team: i64 = sqlx::query_scalar("INSERT INTO teams (name, guarantee_milli, burst_milli) VALUES ('search', 16000, 32000) RETURNING id")
        .fetch_one(pool).await.unwrap();
    let project: i64 =
        sqlx::query_scalar("INSERT INTO projects (team_id, name) VALUES ($1, 'chat') RETURNING id")
            .bind(team)
            .fetch_one(pool)
            .await
            .unwrap();
    let user: i64 = sqlx::query_scalar(
        "INSERT INTO users (name, role, team_id) VALUES ('ann', 'member', $1) RETURNING id",
    )
    .bind(team)
    .fetch_one(pool)
    .await
    .unwrap();
    let job: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (id, team_id, project_id, user_id, class, state, spec, request, submitted_at)
         VALUES ('job-1', $1, $2, $3, 'batch', 'queued', '{}', '{}', now()) RETURNING seq",
    )
    .bind(team).bind(project).bind(user).fetch_one(pool).await.unwrap();
    (team, project, user, job)
}

async fn insert_ledger_row(pool: &PgPool, hold: &str, share_ms: i64) -> Result<(), sqlx::Error> {
    let (team, project, user, job) = ids(pool).await;
    sqlx::query(
        "INSERT INTO usage_ledger (hold_id, team_id, project_id, user_id, job_seq, task, node, gpu_index,
            gpu_model, mig_profile, gpu_share, capacity_tier, job_class, started_at, ended_at,
            share_ms, micro_gpu_hours, price_micros, cost_micros)
         VALUES ($1, $2, $3, $4, $5, 't0', 'node-1', 0, 'H100-80GB', '3g.40gb', 3000, 'reserved', 'batch',
            now() - interval '1 hour', now(), $6, 428571, 2500000, 1071428)",
    )
    .bind(hold).bind(team).bind(project).bind(user).bind(job).bind(share_ms)
    .execute(pool)
    .await
    .map(|_| ())
}

async fn ids(pool: &PgPool) -> (i64, i64, i64, i64) {
    sqlx::query_as(
        "SELECT t.id, p.id, u.id, j.seq FROM teams t, projects p, users u, jobs j LIMIT 1",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

fn database_error(err: sqlx::Error) -> Box<dyn sqlx::error::DatabaseError> {
    match err {
        sqlx::Error::Database(e) => e,
        other => panic!("expected a database error, got {other}"),
    }
}

#[tokio::test]
async fn the_ledger_and_the_audit_log_refuse_update_and_delete() {
    let (pool, _) = support::fresh_db().await;
    seed(&pool).await;
    // 3/7 of a GPU for an hour: 3000 x 3,600,000 share-ms.
    insert_ledger_row(&pool, "hold-1", 10_800_000_000)
        .await
        .expect("INSERT into the ledger works");
    sqlx::query("INSERT INTO audit_log (actor, action, target_kind, target, before, after) VALUES ('root', 'team.quota', 'team', 'search', '{\"guarantee_milli\": 8000}', '{\"guarantee_milli\": 16000}')")
        .execute(&pool).await.expect("INSERT into the audit log works");
    sqlx::query(
        "INSERT INTO job_events (job_seq, at, state) SELECT seq, now(), 'submitted' FROM jobs",
    )
    .execute(&pool)
    .await
    .expect("INSERT into job events works");

    for (table, statements) in [
        (
            "usage_ledger",
            [
                "UPDATE usage_ledger SET cost_micros = 0",
                "DELETE FROM usage_ledger",
                "TRUNCATE usage_ledger",
            ],
        ),
        (
            "audit_log",
            [
                "UPDATE audit_log SET actor = 'someone else'",
                "DELETE FROM audit_log",
                "TRUNCATE audit_log",
            ],
        ),
        (
            "job_events",
            [
                "UPDATE job_events SET reason = 'x'",
                "DELETE FROM job_events",
                "TRUNCATE job_events",
            ],
        ),
    ] {
        for sql in statements {
            let err = sqlx::query(sql).execute(&pool).await.expect_err(sql);
            let message = database_error(err).message().to_string();
            assert!(
                message.contains(table) && message.contains("append-only"),
                "{sql}: the error does not name {table}: {message}"
            );
        }
        let rows: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(rows, 1, "{table} lost its row");
    }
    let cost: i64 = sqlx::query_scalar("SELECT cost_micros FROM usage_ledger")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(cost, 1_071_428, "the ledger row changed");
    // Other tables stay editable (teams' quotas are meant to change).
    sqlx::query("UPDATE teams SET guarantee_milli = 8000")
        .execute(&pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn check_constraints_refuse_bad_values_naming_the_column() {
    let (pool, _) = support::fresh_db().await;
    seed(&pool).await;

    let err = sqlx::query("INSERT INTO users (name, role) VALUES ('bob', 'superuser')")
        .execute(&pool)
        .await
        .expect_err("a bad role is refused");
    assert_eq!(database_error(err).constraint(), Some("users_role_check"));

    let err = insert_ledger_row(&pool, "hold-neg", -1)
        .await
        .expect_err("negative GPU-seconds are refused");
    assert_eq!(
        database_error(err).constraint(),
        Some("usage_ledger_share_ms_check")
    );

    let err = sqlx::query("UPDATE teams SET burst_milli = -1000")
        .execute(&pool)
        .await
        .expect_err("a negative quota is refused");
    assert_eq!(
        database_error(err).constraint(),
        Some("teams_burst_milli_check")
    );

    let err = sqlx::query("UPDATE jobs SET state = 'paused'")
        .execute(&pool)
        .await
        .expect_err("an unknown job state is refused");
    assert_eq!(database_error(err).constraint(), Some("jobs_state_check"));

    // A member needs a team; an admin has none.
    let err = sqlx::query("INSERT INTO users (name, role) VALUES ('carl', 'member')")
        .execute(&pool)
        .await
        .expect_err("a member without a team is refused");
    assert_eq!(
        database_error(err).constraint(),
        Some("users_team_for_role")
    );

    // The SSO identity is unique.
    sqlx::query("INSERT INTO users (name, role, external_issuer, external_subject) VALUES ('dee', 'finance', 'https://idp', 'sub-1')")
        .execute(&pool).await.expect("a finance user with an SSO identity");
    let err = sqlx::query("INSERT INTO users (name, role, external_issuer, external_subject) VALUES ('eve', 'admin', 'https://idp', 'sub-1')")
        .execute(&pool).await.expect_err("a second user with the same SSO identity is refused");
    assert_eq!(
        database_error(err).constraint(),
        Some("users_external_identity_unique")
    );

    // One idempotency key per user.
    let insert_job = "INSERT INTO jobs (id, team_id, project_id, user_id, class, state, spec, request, submitted_at, idempotency_key, idempotency_hash)
         SELECT $1, t.id, p.id, u.id, 'batch', 'queued', '{}', '{}', now(), 'nightly', sha256('x') FROM teams t, projects p, users u WHERE u.name = 'ann'";
    sqlx::query(insert_job)
        .bind("job-2")
        .execute(&pool)
        .await
        .expect("the first use of a key");
    let err = sqlx::query(insert_job)
        .bind("job-3")
        .execute(&pool)
        .await
        .expect_err("a reused key is refused");
    assert_eq!(database_error(err).constraint(), Some("jobs_idempotency"));
}

#[tokio::test]
async fn the_first_start_writes_the_admin_token_once() {
    let (pool, _) = support::fresh_db().await;
    let dir = tempfile::tempdir().unwrap();
    let first = bootstrap::ensure_admin(&pool, dir.path()).await.unwrap();
    let path = dir.path().join("admin.token");
    assert_eq!(first, bootstrap::Bootstrap::Created(path.clone()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert!(token.starts_with("pt_") && token.len() == 46, "{token}");

    // The database keeps the hash, never the token.
    let (role, hash): (String, Vec<u8>) = sqlx::query_as(
        "SELECT u.role, t.token_sha256 FROM users u JOIN api_tokens t ON t.user_id = u.id WHERE u.name = 'admin'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(role, "admin");
    assert_eq!(hash, bootstrap::token_hash(&token));
    let stored_as_text: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM api_tokens WHERE position($1::bytea in token_sha256) > 0",
    )
    .bind(token.as_bytes())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(stored_as_text, 0);

    let second = bootstrap::ensure_admin(&pool, dir.path()).await.unwrap();
    assert_eq!(second, bootstrap::Bootstrap::Existing);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().trim(),
        token,
        "the token changed"
    );
    let audit: i64 =
        sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'user.create'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(audit, 1);
}

#[tokio::test]
async fn readyz_answers_200_with_what_it_checked_and_healthz_answers() {
    let (pool, _) = support::fresh_db().await;
    let app = app(AppState::new(pool.clone()));
    let response = app
        .clone()
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["status"], "ready");
    assert_eq!(json["checks"]["database"]["reachable"], true);
    assert_eq!(
        json["checks"]["database"]["schema_version"],
        *known_versions().last().unwrap()
    );

    let response = app
        .clone()
        .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    // With the database gone, /readyz says so (503), /healthz does not care.
    pool.close().await;
    let response = app
        .clone()
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["checks"]["database"]["ok"], false);
    let response = app
        .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// One job that the database refuses does not sink the others written in
/// its batch: the batch is written again job by job, and each submission
/// gets its own answer.
#[tokio::test]
async fn a_refused_job_does_not_sink_its_batch() {
    use partita::store::group_commit::JobWriter;
    use partita::store::jobs::{NewJob, Submitted};

    let (pool, _) = support::fresh_db().await;
    let (team, project, user, _) = seed(&pool).await;
    let writer = JobWriter::spawn(pool.clone());
    let job = |n: usize, project_id: i64| NewJob {
        id: format!("job-batch-{n}"),
        team_id: team,
        project_id,
        user_id: user,
        name: format!("j{n}"),
        class: "batch".into(),
        spec: serde_json::json!({"tasks": []}),
        request: serde_json::json!({}),
        idempotency: Some((format!("key-{n}"), vec![n as u8; 32])),
    };
    // Job 3 names a project that does not exist (as if it went between the
    // check and the write).
    let handles: Vec<_> = (0..8)
        .map(|n| {
            let writer = writer.clone();
            let j = job(n, if n == 3 { project + 1000 } else { project });
            tokio::spawn(async move { writer.submit(j, "ann", "search").await })
        })
        .collect();
    let mut answers = Vec::new();
    for h in handles {
        answers.push(h.await.unwrap());
    }
    for (n, a) in answers.iter().enumerate() {
        match (n, a) {
            (3, Err(e)) => assert!(e.to_string().contains("foreign key"), "{e}"),
            (3, Ok(s)) => panic!("job 3 stored: {s:?}"),
            (_, Ok(s)) => assert_eq!(s.outcome, Submitted::Created(format!("job-batch-{n}"))),
            (_, Err(e)) => panic!("job {n}: {e}"),
        }
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE id LIKE 'job-batch-%'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 7);
    let events: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM job_events e JOIN jobs j ON j.seq = e.job_seq WHERE j.id LIKE 'job-batch-%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(events, 14);
    // Replays of the stored ones answer with their job, in a batch too.
    let handles: Vec<_> = (0..8)
        .filter(|&n| n != 3)
        .map(|n| {
            let writer = writer.clone();
            let mut j = job(n, project);
            j.id = format!("job-other-{n}");
            tokio::spawn(async move { (n, writer.submit(j, "ann", "search").await.unwrap()) })
        })
        .collect();
    for h in handles {
        let (n, s) = h.await.unwrap();
        assert_eq!(s.outcome, Submitted::Replayed(format!("job-batch-{n}")));
    }
}

/// `cluster_now()`, the clock submissions are stamped with: NULL before
/// any worker started the clock; the last tick's time while no active
/// worker was seen lately; running on at the worker's speed while one was.
#[tokio::test]
async fn cluster_now_runs_at_the_workers_speed_only_while_a_worker_is_seen() {
    let (pool, _) = support::fresh_db().await;
    let now = || async {
        sqlx::query_scalar::<_, Option<chrono::DateTime<chrono::Utc>>>("SELECT cluster_now()")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(now().await, None);
    // Cluster time zero at 2026-01-01T00:00:00Z; the last tick at cluster
    // time 1 h, reached 2 wall seconds ago; 60 times faster than the wall.
    let epoch = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let wall = chrono::Utc::now() - chrono::TimeDelta::seconds(2);
    for (k, v) in [
        ("epoch", epoch.timestamp_nanos_opt().unwrap().to_string()),
        ("clock", (3600 * 1_000_000_000_i64).to_string()),
        (
            "clock_wall",
            wall.timestamp_nanos_opt().unwrap().to_string(),
        ),
        ("speed", "60".to_string()),
    ] {
        sqlx::query("INSERT INTO meta (key, value) VALUES ($1, $2)")
            .bind(k)
            .bind(v)
            .execute(&pool)
            .await
            .unwrap();
    }
    let tick = epoch + chrono::TimeDelta::hours(1);
    assert_eq!(now().await, Some(tick), "no worker: the clock stands still");
    sqlx::query("INSERT INTO workers (id, active, heartbeat_at) VALUES ('w1', true, now())")
        .execute(&pool)
        .await
        .unwrap();
    let ran = (now().await.unwrap() - tick).num_milliseconds();
    // 2 wall seconds (and a little) at 60x: about 120 cluster seconds.
    assert!((120_000..125_000).contains(&ran), "{ran} ms");
    sqlx::query("UPDATE workers SET heartbeat_at = now() - interval '11 seconds'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(now().await, Some(tick), "the worker was not seen lately");
}

/// A job's project must be its team's: the database refuses another
/// team's project (migration 0010).
#[tokio::test]
async fn a_job_cannot_name_another_teams_project() {
    let (pool, _) = support::fresh_db().await;
    let (team, _, user, _) = seed(&pool).await;
    let other: i64 = sqlx::query_scalar("INSERT INTO teams (name) VALUES ('ads') RETURNING id")
        .fetch_one(&pool)
        .await
        .unwrap();
    let theirs: i64 = sqlx::query_scalar(
        "INSERT INTO projects (team_id, name) VALUES ($1, 'banners') RETURNING id",
    )
    .bind(other)
    .fetch_one(&pool)
    .await
    .unwrap();
    let err = sqlx::query(
        "INSERT INTO jobs (id, team_id, project_id, user_id, class, state, spec, request, submitted_at)
         VALUES ('job-x', $1, $2, $3, 'batch', 'queued', '{}', '{}', now())",
    )
    .bind(team)
    .bind(theirs)
    .bind(user)
    .execute(&pool)
    .await
    .unwrap_err();
    assert_eq!(
        database_error(err).constraint(),
        Some("jobs_project_in_team")
    );
}
