//! Calling the API in process (`app(state)` with `oneshot`), and a world
//! to call it in: two teams (`search`, `ads`), a user of every role with
//! a token, a disabled user and an expired token.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use partita::db::bootstrap::{new_token, token_hash};
use partita::server::{AppState, app};
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;

/// The callers of the access matrix, in its columns' order.
pub const CALLERS: [&str; 8] = [
    "admin", "lead", "member", "viewer", "finance", "none", "expired", "disabled",
];

pub struct World {
    pub pool: PgPool,
    pub app: Router,
    /// Tokens by caller name (CALLERS; "none" has none).
    pub tokens: std::collections::BTreeMap<&'static str, String>,
    /// A member of `ads`, who submits the other team's jobs.
    pub ads_member: String,
}

/// An answer: status, headers we look at, body as JSON (Null if empty).
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub replayed: bool,
}

pub async fn call_raw(
    app: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(body.map(Body::from).unwrap_or_else(Body::empty))
        .unwrap();
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let replayed = response.headers().get("Idempotent-Replayed").is_some();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
    };
    Answer {
        status,
        body,
        replayed,
    }
}

pub async fn call(
    app: &Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Answer {
    call_raw(
        app,
        method,
        path,
        token,
        body.map(|b| serde_json::to_vec(&b).unwrap()),
        &[],
    )
    .await
}

/// A user with a token (valid for a day, or already expired).
pub async fn add_user(
    pool: &PgPool,
    name: &str,
    role: &str,
    team: Option<&str>,
    disabled: bool,
    expired: bool,
) -> String {
    let user_id: i64 = sqlx::query_scalar(
        "INSERT INTO users (name, role, team_id, disabled)
         VALUES ($1, $2, (SELECT id FROM teams WHERE name = $3), $4) RETURNING id",
    )
    .bind(name)
    .bind(role)
    .bind(team)
    .bind(disabled)
    .fetch_one(pool)
    .await
    .unwrap();
    let token = new_token();
    let (created, expires) = if expired {
        ("now() - interval '2 days'", "now() - interval '1 day'")
    } else {
        ("now()", "now() + interval '1 day'")
    };
    let sql = format!(
        "INSERT INTO api_tokens (user_id, token_sha256, created_at, expires_at) VALUES ($1, $2, {created}, {expires})"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(user_id)
        .bind(token_hash(&token))
        .execute(pool)
        .await
        .unwrap();
    token
}

/// Two teams made through the API, a user of every role in `search`
/// (admin and finance in none), a disabled member with a valid token, an
/// expired token of a member, and a member of `ads`.
pub async fn world() -> World {
    let (pool, _) = super::fresh_db().await;
    let app = app(AppState::new(pool.clone()));
    let admin = add_user(&pool, "root", "admin", None, false, false).await;
    for (team, g) in [("search", 16.0), ("ads", 8.0)] {
        let a = call(
            &app,
            "POST",
            "/api/v1/teams",
            Some(&admin),
            Some(json!({"name": team, "guaranteed_gpus": g, "burst_gpus": 32})),
        )
        .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    }
    let mut tokens = std::collections::BTreeMap::new();
    tokens.insert("admin", admin);
    tokens.insert(
        "lead",
        add_user(&pool, "leo", "lead", Some("search"), false, false).await,
    );
    tokens.insert(
        "member",
        add_user(&pool, "mia", "member", Some("search"), false, false).await,
    );
    tokens.insert(
        "viewer",
        add_user(&pool, "vic", "viewer", Some("search"), false, false).await,
    );
    tokens.insert(
        "finance",
        add_user(&pool, "fin", "finance", None, false, false).await,
    );
    tokens.insert(
        "expired",
        add_user(&pool, "old", "member", Some("search"), false, true).await,
    );
    tokens.insert(
        "disabled",
        add_user(&pool, "dis", "member", Some("search"), true, false).await,
    );
    let ads_member = add_user(&pool, "ada", "member", Some("ads"), false, false).await;
    World {
        pool,
        app,
        tokens,
        ads_member,
    }
}

impl World {
    pub fn token(&self, caller: &str) -> Option<&str> {
        self.tokens.get(caller).map(String::as_str)
    }

    /// Submits a one-GPU job with `token` (to its own team) and gives its id.
    pub async fn job(&self, token: &str) -> String {
        let a = call(
            &self.app,
            "POST",
            "/api/v1/jobs",
            Some(token),
            Some(json!({"gpu": {"count": 1}, "duration": "1h"})),
        )
        .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        a.body["id"].as_str().unwrap().to_string()
    }

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }
}

/// A worker for the tests: fast ticks, the demo cluster at `speed`.
pub fn worker_options(speed: f64, id: &str) -> partita::worker::Options {
    let mut opt =
        partita::worker::Options::new(partita::worker::load_scenario(None).unwrap(), speed);
    opt.tick = std::time::Duration::from_millis(20);
    opt.lock_poll = std::time::Duration::from_millis(100);
    opt.id = id.into();
    opt
}

impl World {
    /// Runs a worker until it has published its views, then stops it:
    /// GET /cluster has something to show.
    pub async fn publish_views(&self) {
        let handle = partita::worker::spawn(self.pool.clone(), worker_options(60.0, "views"));
        let start = std::time::Instant::now();
        loop {
            let n: i64 =
                sqlx::query_scalar("SELECT count(*) FROM worker_views WHERE kind = 'cluster'")
                    .fetch_one(&self.pool)
                    .await
                    .unwrap();
            if n == 1 {
                break;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "no view published in 30 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        handle.stop().await;
    }
}
