//! The client commands as processes against a real `partita serve` (on
//! the tests' PostgreSQL, with its worker): the token found through
//! `--data-dir`, `--token`, `$PARTITA_TOKEN` and `./partita-data`; what
//! each command prints and what the server then holds; and the errors: a
//! bad flag (exit 2), a server refusal in words with its status, message
//! and field (exit 1), no token (exit 2).
//!
//! `queue` and `cluster` run against a stub server in the test process,
//! answering the Go build's JSON shapes: the Rust server's routes for them
//! are being added elsewhere.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::Serve;

/// What a `partita` run left.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    /// Panics, showing everything, unless it exited 0.
    fn ok(self) -> Out {
        assert_eq!(self.code, Some(0), "{self:#?}");
        self
    }
}

/// Runs `partita ARGS` in `cwd` with `envs` and nothing of the caller's
/// PARTITA_ variables.
fn partita(cwd: &Path, args: &[&str], envs: &[(&str, &str)]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_partita"))
        .args(args)
        .current_dir(cwd)
        .env_remove("PARTITA_TOKEN")
        .env_remove("PARTITA_SERVER")
        .envs(envs.iter().copied())
        .output()
        .expect("partita runs");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A server on a fresh database, and how to reach it.
struct World {
    rt: tokio::runtime::Runtime,
    pool: sqlx::PgPool,
    serve: Serve,
    /// Holds `partita-data` (the server's data dir) and nothing else, so
    /// that a client run here finds `./partita-data/admin.token`.
    home: tempfile::TempDir,
    /// An empty directory to run clients in.
    elsewhere: tempfile::TempDir,
}

impl World {
    fn start() -> World {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (pool, name) = rt.block_on(support::fresh_db());
        let home = tempfile::tempdir().unwrap();
        let data = home.path().join("partita-data");
        let serve = Serve::start(
            &["--data-dir", data.to_str().unwrap()],
            &[("DATABASE_URL", &support::url(&name))],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        World {
            rt,
            pool,
            serve,
            home,
            elsewhere: tempfile::tempdir().unwrap(),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.home.path().join("partita-data")
    }

    fn admin_token(&self) -> String {
        std::fs::read_to_string(self.data_dir().join("admin.token"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// `partita ARGS --server ADDR --data-dir DATA`, run elsewhere.
    fn admin(&self, args: &[&str]) -> Out {
        let data = self.data_dir();
        let mut all = args.to_vec();
        all.extend([
            "--server",
            &self.serve.addr,
            "--data-dir",
            data.to_str().unwrap(),
        ]);
        partita(self.elsewhere.path(), &all, &[])
    }

    /// `partita ARGS --server ADDR --token TOKEN`, run elsewhere.
    fn with_token(&self, token: &str, args: &[&str]) -> Out {
        let mut all = args.to_vec();
        all.extend(["--server", &self.serve.addr, "--token", token]);
        partita(self.elsewhere.path(), &all, &[])
    }

    /// One row of the database as text columns.
    fn row(&self, sql: &'static str, id: &str) -> Vec<Option<String>> {
        use sqlx::Row;
        let row = self
            .rt
            .block_on(sqlx::query(sql).bind(id).fetch_one(&self.pool))
            .unwrap_or_else(|e| panic!("{sql} ({id}): {e}"));
        (0..row.len()).map(|i| row.get(i)).collect()
    }
}

/// The first word of the only line of `s`.
fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_string()
}

#[test]
fn the_client_commands_work_against_partita_serve() {
    let w = World::start();

    // --- admin: a team, a project, a user and a token for them.
    let out = w
        .admin(&[
            "admin",
            "teams",
            "create",
            "ml",
            "--guarantee",
            "4",
            "--burst",
            "8",
            "--classes",
            "batch,best-effort",
            "--business-unit",
            "r-and-d",
        ])
        .ok();
    let team: serde_json::Value = serde_json::from_str(&out.stdout).expect("the team as JSON");
    assert_eq!(team["name"], "ml");
    assert_eq!(team["guaranteed_gpus"], 4.0);
    assert_eq!(team["burst_gpus"], 8.0);
    assert_eq!(team["classes"], serde_json::json!(["batch", "best-effort"]));
    assert_eq!(team["business_unit"], "r-and-d");
    let out = w
        .admin(&["admin", "teams", "update", "ml", "--weight", "2"])
        .ok();
    assert!(out.stdout.contains("\"weight\": 2"), "{}", out.stdout);

    let out = w.admin(&["admin", "projects", "create", "ml", "chat"]).ok();
    assert_eq!(out.stdout, "created project ml/chat\n");
    let out = w.admin(&["admin", "projects", "list", "ml"]).ok();
    assert_eq!(out.stdout, "ml/chat\nml/default\n");

    let out = w.admin(&["admin", "teams", "list"]).ok();
    let header = out.stdout.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "TEAM",
            "GUARANTEE",
            "BURST",
            "WEIGHT",
            "CLASSES",
            "BUSINESS",
            "UNIT",
            "PROJECTS"
        ]
    );
    let ml: Vec<&str> = out
        .stdout
        .lines()
        .find(|l| l.starts_with("ml "))
        .unwrap_or_else(|| panic!("no ml row:\n{}", out.stdout))
        .split_whitespace()
        .collect();
    assert_eq!(
        ml,
        [
            "ml",
            "4",
            "8",
            "2",
            "batch,best-effort",
            "r-and-d",
            "chat,default"
        ]
    );

    let out = w
        .admin(&[
            "admin", "users", "create", "ann", "--role", "member", "--team", "ml",
        ])
        .ok();
    assert_eq!(
        out.stdout,
        "created user ann (member, team ml); give them a token with: partita admin tokens create ann\n"
    );
    let out = w
        .admin(&[
            "admin",
            "tokens",
            "create",
            "ann",
            "--description",
            "laptop",
        ])
        .ok();
    let ann = out.stdout.trim().to_string();
    assert!(
        ann.starts_with("pt_") && !ann.contains(char::is_whitespace),
        "the secret alone on stdout: {out:?}"
    );
    assert!(
        out.stderr.starts_with("token ")
            && out.stderr.contains(" for ann, expires ")
            && out.stderr.contains("the secret is shown only now"),
        "{}",
        out.stderr
    );

    // --- submit: as ann (--token), and as the admin (--data-dir), JSON.
    let out = w
        .with_token(
            &ann,
            &[
                "submit",
                "--project",
                "chat",
                "--mig",
                "3g.40gb",
                "--duration",
                "2h",
                "--name",
                "first",
            ],
        )
        .ok();
    let first = first_word(&out.stdout);
    assert!(first.starts_with("job-"), "{}", out.stdout);
    assert_eq!(
        out.stdout,
        format!("{first} queued (team ml, project chat, batch, 0.43 GPUs)\n")
    );
    let stored = w.row(
        "SELECT t.name, p.name, u.name, j.name, j.class, j.state
         FROM jobs j JOIN teams t ON t.id = j.team_id JOIN projects p ON p.id = j.project_id
         JOIN users u ON u.id = j.user_id WHERE j.id = $1",
        &first,
    );
    assert_eq!(
        stored[..5],
        [
            Some("ml".into()),
            Some("chat".into()),
            Some("ann".into()),
            Some("first".into()),
            Some("batch".into())
        ]
    );

    let job_file = w.elsewhere.path().join("job.json");
    std::fs::write(
        &job_file,
        r#"{"team":"search","class":"best-effort","gpu":{"count":2,"models":["H100-80GB"]},"duration":"1h"}"#,
    )
    .unwrap();
    let out = w
        .admin(&[
            "submit",
            "--json",
            "-f",
            job_file.to_str().unwrap(),
            "--team",
            "ml",
            "--gpus",
            "1",
        ])
        .ok();
    let second: serde_json::Value = serde_json::from_str(&out.stdout).expect("the job as JSON");
    let second_id = second["id"].as_str().unwrap().to_string();
    // The flags won over the file; the file's other fields stayed.
    assert_eq!(second["team"], "ml");
    assert_eq!(second["user"], "admin");
    assert_eq!(second["class"], "best-effort");
    assert_eq!(second["gpus"], 1.0);
    assert_eq!(second["duration"], "1h0m0s");

    // --- jobs: the list and one job.
    let out = w.admin(&["jobs", "--team", "ml"]).ok();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "ID",
            "STATE",
            "TEAM",
            "PROJECT",
            "CLASS",
            "GPUS",
            "SUBMITTED",
            "REASON"
        ]
    );
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    // Newest first.
    assert_eq!(first_word(lines[1]), second_id);
    assert_eq!(first_word(lines[2]), first);
    let cols: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(cols[2..6], ["ml", "chat", "batch", "0.43"]);
    let out = w
        .admin(&["jobs", "--team", "ml", "--limit", "1", "--json"])
        .ok();
    let list: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(list["jobs"].as_array().unwrap().len(), 1);
    assert!(
        list["next"].as_str().is_some_and(|n| !n.is_empty()),
        "{}",
        out.stdout
    );

    let out = w.with_token(&ann, &["jobs", &first]).ok();
    let mut lines = out.stdout.lines();
    let head = lines.next().unwrap();
    assert!(
        head.starts_with(&format!("{first}  "))
            && head.ends_with("  team ml  project chat  user ann  class batch"),
        "{head}"
    );
    assert!(
        out.stdout
            .contains("1 tasks, 0.43 GPUs, duration 2h0m0s, attempts "),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("MIG 3g.40gb"), "{}", out.stdout);
    let submitted = out
        .stdout
        .lines()
        .find(|l| l.contains(" submitted "))
        .unwrap_or_else(|| panic!("no submitted event:\n{}", out.stdout));
    // The worker's clock: a submission is aged in cluster time.
    assert_eq!(
        submitted.split_whitespace().nth(1),
        Some("cluster"),
        "{submitted}"
    );

    // --- cancel: one of ann's, one that does not exist.
    let out = w.with_token(&ann, &["cancel", &first, "job-0000000000000000"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let mut lines = out.stdout.lines();
    let cancelled = lines.next().unwrap();
    assert!(cancelled.starts_with(&format!("{first} ")), "{cancelled}");
    assert_eq!(
        lines.next(),
        Some("job-0000000000000000: 404 Not Found: job \"job-0000000000000000\" not found")
    );
    assert_eq!(out.stderr, "cancel: some jobs were not cancelled\n");
    let row = w.row(
        "SELECT (cancel_requested_at IS NOT NULL)::text, cancel_requested_by FROM jobs WHERE id = $1",
        &first,
    );
    assert_eq!(
        row[0].as_deref(),
        Some("true"),
        "the cancel was not recorded"
    );
    assert_eq!(row[1].as_deref(), Some("ann"));
    // The request is an event in the API's clock, the wall clock.
    let out = w.admin(&["jobs", &first]).ok();
    let requested = out
        .stdout
        .lines()
        .find(|l| l.contains(" cancel_requested "))
        .unwrap_or_else(|| panic!("no cancel_requested event:\n{}", out.stdout));
    assert_eq!(
        requested.split_whitespace().nth(1),
        Some("wall"),
        "{requested}"
    );

    // A member may not requeue: the server's 403, in words.
    let out = w.with_token(&ann, &["requeue", &second_id]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stdout
            .starts_with(&format!("{second_id}: 403 Forbidden: ")),
        "{}",
        out.stdout
    );
    assert_eq!(out.stderr, "requeue: some jobs were not requeued\n");
    // The admin may.
    let out = w.admin(&["requeue", &second_id]).ok();
    assert!(
        out.stdout.starts_with(&format!("{second_id} ")),
        "{}",
        out.stdout
    );

    // --- reports.
    let out = w.admin(&["report", "usage"]).ok();
    let mut lines = out.stdout.lines();
    let period = lines.next().unwrap();
    assert!(
        period.contains(" to ") && period.contains("(prices: "),
        "{period}"
    );
    assert_eq!(lines.next(), Some(""));
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["TEAM", "GPU-HOURS", "COST", "HOLDS"]
    );
    assert!(
        out.stdout.lines().last().unwrap().starts_with("TOTAL "),
        "{}",
        out.stdout
    );
    let out = w
        .admin(&[
            "report",
            "chargeback",
            "--format",
            "csv",
            "--month",
            "2026-01",
        ])
        .ok();
    // Passed through as the server wrote it: RFC 4180's CRLF line ends.
    assert!(out.stdout.ends_with("0\r\n"), "{:?}", out.stdout);
    let csv: Vec<&str> = out.stdout.lines().collect();
    assert!(
        csv[0].starts_with("business_unit,team,project,period_from,period_to,gpu_hours,cost_"),
        "{}",
        out.stdout
    );
    // Nothing ended in that month: the total alone, with the period.
    assert_eq!(
        csv[1..],
        ["TOTAL,TOTAL,TOTAL,2026-01-01T00:00:00Z,2026-02-01T00:00:00Z,0.000000,0.000000,0,0,0"]
    );
    let out = w
        .admin(&["report", "usage", "--json", "--group-by", "team,model"])
        .ok();
    let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(r["group_by"], serde_json::json!(["team", "model"]));
    let out = w.admin(&["report", "usage", "--group-by", "colour"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.starts_with("report usage: 400 Bad Request: ")
            && out.stderr.contains("group_by"),
        "{}",
        out.stderr
    );
    let out = w.admin(&["report", "usage", "--format", "xml"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("--format \"xml\""), "{}", out.stderr);

    // --- users and tokens: disable ann, revoke her token.
    let out = w
        .admin(&["admin", "users", "update", "ann", "--disable"])
        .ok();
    assert_eq!(out.stdout, "updated user ann (member, team ml, disabled)\n");
    let out = w.with_token(&ann, &["jobs"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        "jobs: 401 Unauthorized: user ann is disabled (the token from --token)\n"
    );
    let out = w.admin(&["admin", "users", "list"]).ok();
    let ann_row = out.stdout.lines().find(|l| l.starts_with("ann ")).unwrap();
    assert_eq!(
        ann_row.split_whitespace().collect::<Vec<_>>(),
        ["ann", "member", "ml", "disabled"]
    );
    let out = w.admin(&["admin", "tokens", "list"]).ok();
    let token_row = out
        .stdout
        .lines()
        .find(|l| l.contains(" ann ") && l.ends_with("laptop"))
        .unwrap_or_else(|| panic!("ann's token is not listed:\n{}", out.stdout));
    let token_id = first_word(token_row);
    let out = w.admin(&["admin", "tokens", "revoke", &token_id]).ok();
    assert_eq!(out.stdout, format!("revoked {token_id} (ann)\n"));
    let row = w.row(
        "SELECT (revoked_at IS NOT NULL)::text FROM api_tokens WHERE id = $1::bigint",
        &token_id,
    );
    assert_eq!(row[0].as_deref(), Some("true"));
    let out = w.admin(&["admin", "audit", "--limit", "3"]).ok();
    assert!(out.stdout.contains(" token.revoke "), "{}", out.stdout);

    let (code, log) = w.serve.terminate();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn tokens_are_found_as_documented_and_errors_are_clear() {
    let w = World::start();
    let admin = w.admin_token();
    let addr = w.serve.addr.clone();
    let data = w.data_dir();
    let data = data.to_str().unwrap();

    // ./partita-data/admin.token where the client runs, with no flag.
    let out = partita(w.home.path(), &["jobs", "--server", &addr], &[]).ok();
    assert!(out.stdout.starts_with("ID "), "{}", out.stdout);
    // The environment alone.
    let env = [("PARTITA_SERVER", addr.as_str()), ("PARTITA_TOKEN", &admin)];
    partita(w.elsewhere.path(), &["jobs"], &env).ok();
    // --data-dir comes before $PARTITA_TOKEN...
    let bogus = [
        ("PARTITA_SERVER", addr.as_str()),
        ("PARTITA_TOKEN", "pt_bogus"),
    ];
    partita(w.elsewhere.path(), &["jobs", "--data-dir", data], &bogus).ok();
    // ...which comes before ./partita-data.
    let out = partita(w.home.path(), &["jobs"], &bogus);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        "jobs: 401 Unauthorized: invalid or revoked token (the token from $PARTITA_TOKEN)\n"
    );
    // --token comes first of all.
    let out = partita(
        w.home.path(),
        &[
            "jobs",
            "--server",
            &addr,
            "--token",
            "pt_nope",
            "--data-dir",
            data,
        ],
        &[],
    );
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        "jobs: 401 Unauthorized: invalid or revoked token (the token from --token)\n"
    );

    // No token anywhere: a usage error that says where to put one.
    let out = partita(w.elsewhere.path(), &["jobs", "--server", &addr], &[]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(
        out.stderr,
        "jobs: no token: pass --token or --data-dir DIR (the server's), set PARTITA_TOKEN, or run where ./partita-data/admin.token is\n"
    );
    let missing = w.elsewhere.path().join("no-such-dir");
    let out = partita(
        w.elsewhere.path(),
        &[
            "queue",
            "--server",
            &addr,
            "--data-dir",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.starts_with("queue: no token: --data-dir ")
            && out.stderr.contains("no-such-dir/admin.token"),
        "{}",
        out.stderr
    );

    // Command lines the parser refuses: exit 2, naming what is wrong.
    for (args, names) in [
        (&["submit", "--bogus"][..], "--bogus"),
        (&["submit", "--gpus", "many"], "--gpus"),
        (&["cancel"], "ID"),
        (&["jobs", "job-1", "job-2"], "job-2"),
        (&["admin", "teams"], "Usage"),
        (&["admin", "users", "update", "ann"], "nothing to change"),
        (&["report"], "Usage"),
        (
            &["admin", "tokens", "create", "ann", "--expires-at", "soon"],
            "RFC 3339",
        ),
    ] {
        let out = w.admin(args);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.contains(names), "{args:?}: {}", out.stderr);
    }

    let out = partita(
        w.elsewhere.path(),
        &["jobs", "--server", "https://example.org", "--token", "t"],
        &[],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("only http://"), "{}", out.stderr);

    // A bad GPU demand: the server's 400 in words, naming the field, and
    // nothing stored.
    w.admin(&["admin", "teams", "create", "t1"]).ok();
    for (args, field) in [
        (
            &["submit", "--team", "t1", "--mig", "9g.99gb"][..],
            "gpu.mig: mig profile \"9g.99gb\"",
        ),
        (
            &["submit", "--team", "t1", "--gpus", "1", "--mig", "1g.10gb"],
            "gpu: give one of count, mig",
        ),
        (&["submit", "--team", "t1", "--gpus", "-1"], "gpu.count: -1"),
        (
            &["submit", "--team", "t1", "--class", "urgent"],
            "class: unknown priority class",
        ),
    ] {
        let out = w.admin(args);
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(
            out.stderr.starts_with("submit: 400 Bad Request: ") && out.stderr.contains(field),
            "{args:?}: {}",
            out.stderr
        );
    }
    let jobs: i64 =
        w.rt.block_on(sqlx::query_scalar("SELECT count(*) FROM jobs").fetch_one(&w.pool))
            .unwrap();
    assert_eq!(jobs, 0, "a refused submission was stored");
    // A refusal other than 400, with the field the server named.
    let out = w.admin(&["admin", "teams", "create", "t1"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.starts_with("admin teams create: 409 Conflict: "),
        "{}",
        out.stderr
    );

    // No server there.
    let out = partita(
        w.elsewhere.path(),
        &["jobs", "--server", "127.0.0.1:1", "--token", "t"],
        &[],
    );
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.starts_with(
            "jobs: GET http://127.0.0.1:1/api/v1/jobs?limit=50: connecting to 127.0.0.1:1: "
        ),
        "{}",
        out.stderr
    );
}

/// The Go build's answers to GET /queue and GET /cluster, with a field
/// the client does not know.
const QUEUE_JSON: &str = r#"{"clock":{"now":"2026-03-01T12:00:00Z","speed":60},"teams":[
  {"team":"search","jobs":[
    {"job":"job-a","name":"chat","project":"chat","class":"production","gpus":0.5,
     "submitted_at":"2026-03-01T11:58:30Z","position":1,"reason":"waiting for a 3g.40gb slice",
     "estimated_start":"2026-03-01T13:00:00Z","wait_seconds":60.4},
    {"job":"job-b","project":"default","class":"batch","gpus":8,
     "submitted_at":"2026-03-01T10:00:00Z","position":2,"reason":"gang of 8 waits for whole GPUs","new_field":[1,2]}]}]}"#;

const CLUSTER_JSON: &str = r#"{"clock":{"now":"2026-03-01T12:00:00Z","speed":60},"gpus":16,
  "utilization":{"allocated_gpus":2.5,"useful_gpus":1.25,"allocated":0.15625,"useful":0.078125,"queued_jobs":3,"running_jobs":2},
  "nodes":[
    {"name":"h100-0","tier":"a","cpu_milli":192000,"cpu_used_milli":0,"memory_mib":1,"memory_used_mib":0,"gpus":[
      {"index":0,"model":"H100-80GB","mig":true,"used_milli":0,"slices":[
        {"slice":"3g.40gb@0","busy":true,"job":"job-a","team":"search"},{"slice":"3g.40gb@4","busy":true},{"slice":"1g.10gb@6","busy":false}]},
      {"index":1,"model":"H100-80GB","mig":false,"cordoned":true,"used_milli":500,"holders":[{"milli":500}]}]},
    {"name":"a100-0","tier":"b","cpu_milli":1,"cpu_used_milli":0,"memory_mib":1,"memory_used_mib":0,"gpus":[
      {"index":0,"model":"A100-80GB","mig":false,"used_milli":1000}]}]}"#;

/// A stub of the two routes on a thread of its own, under `/` and under
/// `/partita` (a server behind a path prefix). It wants the token
/// `stub-token` and knows only the team `search`. Its address.
fn stub_server() -> String {
    use axum::Router;
    use axum::extract::Query;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;

    fn answer(headers: &HeaderMap, body: &'static str) -> Response {
        let ok = headers
            .get("authorization")
            .is_some_and(|v| v == "Bearer stub-token");
        if !ok {
            let err = r#"{"error":"invalid or revoked token"}"#;
            return (StatusCode::UNAUTHORIZED, err).into_response();
        }
        ([("content-type", "application/json")], body).into_response()
    }
    let routes = Router::new()
        .route(
            "/api/v1/queue",
            get(
                |headers: HeaderMap,
                 Query(q): Query<std::collections::BTreeMap<String, String>>| async move {
                    match q.get("team").map(String::as_str) {
                        None | Some("search") => answer(&headers, QUEUE_JSON),
                        Some(other) => (
                            StatusCode::NOT_FOUND,
                            format!(r#"{{"error":"team \"{other}\" not found","field":"team"}}"#),
                        )
                            .into_response(),
                    }
                },
            ),
        )
        .route(
            "/api/v1/cluster",
            get(|headers: HeaderMap| async move { answer(&headers, CLUSTER_JSON) }),
        );
    let app = Router::new().nest("/partita", routes.clone()).merge(routes);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    addr
}

#[test]
fn queue_and_cluster_print_the_go_shapes() {
    let addr = stub_server();
    let cwd = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--token", "stub-token"]);
        partita(cwd.path(), &all, &[])
    };

    let out = run(&["queue", "--server", &addr, "--team", "search"]).ok();
    assert_eq!(
        out.stdout,
        "TEAM    POS  JOB    CLASS       GPUS  WAITING  EST. START  REASON\n\
         search  1    job-a  production  0.50  1m30s    in 60s      waiting for a 3g.40gb slice\n\
         search  2    job-b  batch       8.00  2h0m0s   -           gang of 8 waits for whole GPUs\n"
    );
    // --json: the answer as it came, the field the client does not know
    // included.
    let out = run(&["queue", "--server", &addr, "--json"]).ok();
    let printed: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let sent: serde_json::Value = serde_json::from_str(QUEUE_JSON).unwrap();
    assert_eq!(printed, sent);
    let out = run(&["queue", "--server", &addr, "--team", "ads"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        "queue: 404 Not Found: team \"ads\" not found (field team)\n"
    );

    let prefixed = format!("http://{addr}/partita/");
    let out = run(&["cluster", "--server", &prefixed]).ok();
    assert_eq!(
        out.stdout,
        "cluster time 2026-03-01T12:00:00Z (60x); 16 GPUs: 2.5 allocated (16%), 1.2 useful (8%); 2 running, 3 queued\n\
         \n\
         NODE    GPU  MODEL      MODE              IN USE\n\
         h100-0  0    H100-80GB  mig               3g.40gb@0 job-a, 3g.40gb@4 busy, 1g.10gb@6 free\n\
         h100-0  1    H100-80GB  whole (changing)  500/1000\n\
         a100-0  0    A100-80GB  whole             1000/1000\n"
    );
    let out = partita(
        cwd.path(),
        &["cluster", "--server", &addr, "--token", "wrong"],
        &[],
    );
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(
        out.stderr,
        "cluster: 401 Unauthorized: invalid or revoked token (the token from --token)\n"
    );
}

/// `queue` and `cluster` against `partita serve` with its worker: a gang
/// that runs shows on its GPUs, a second one that the team's burst (48
/// GPUs) cannot hold beside it waits in the queue with a position and a
/// reason.
#[test]
fn queue_and_cluster_against_partita_serve() {
    let w = World::start();
    // The demo cluster's research team (the worker seeds it on a new
    // database); the admin names it. A gang of four 8-GPU tasks, then one
    // that waits behind it.
    for _ in 0..100 {
        if w.admin(&["admin", "teams", "list"])
            .ok()
            .stdout
            .contains("research")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let submit = |args: &[&str]| {
        let mut all = vec!["submit", "--team", "research"];
        all.extend(args);
        first_word(&w.admin(&all).ok().stdout)
    };
    let running = submit(&[
        "--gpus",
        "8",
        "--tasks",
        "4",
        "--gang",
        "4",
        "--duration",
        "2h",
    ]);
    let waiting = submit(&[
        "--gpus",
        "8",
        "--tasks",
        "4",
        "--gang",
        "4",
        "--duration",
        "1h",
    ]);
    let mut last = String::new();
    for _ in 0..100 {
        let out = w.admin(&["queue"]).ok();
        last = out.stdout.clone();
        if out.stdout.contains(&waiting) && !out.stdout.contains("next scheduling cycle") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let lines: Vec<&str> = last.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        [
            "TEAM", "POS", "JOB", "CLASS", "GPUS", "WAITING", "EST.", "START", "REASON"
        ],
        "{last}"
    );
    let row: Vec<&str> = lines
        .iter()
        .find(|l| l.contains(&waiting))
        .unwrap_or_else(|| panic!("{waiting} not queued: {last}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..5],
        ["research", "1", waiting.as_str(), "batch", "32.00"],
        "{last}"
    );
    assert!(
        !last.contains(&running),
        "the running gang is not queued: {last}"
    );

    let out = w.admin(&["cluster"]).ok();
    let first = out.stdout.lines().next().unwrap_or("");
    assert!(first.starts_with("cluster time "), "{}", out.stdout);
    assert!(
        first.ends_with("48 GPUs: 32.0 allocated (67%), 32.0 useful (67%); 1 running, 1 queued"),
        "{}",
        out.stdout
    );
    // As the Go client prints it: a whole GPU with the share held.
    let busy = out
        .stdout
        .lines()
        .filter(|l| l.split_whitespace().skip(3).collect::<Vec<_>>() == ["whole", "1000/1000"])
        .count();
    assert_eq!(busy, 32, "{}", out.stdout);
}

/// `partita serve --cluster FILE` checks submissions against that
/// cluster's nodes (here of four GPUs), not the built-in demo cluster's.
#[test]
fn serve_checks_submissions_against_its_cluster_file() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_pool, name) = rt.block_on(support::fresh_db());
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("partita-data");
    let cluster = home.path().join("small.yaml");
    std::fs::write(
        &cluster,
        "name: small\nduration: 1h\nnodes:\n  - group: l4\n    count: 2\n    gpu: H100-80GB\n    gpus: 4\n    cpu: 64\n    memory: 512Gi\nteams:\n  - name: research\n    guaranteed_gpus: 4\n    burst_gpus: 8\n",
    )
    .unwrap();
    let serve = Serve::start(
        &[
            "--data-dir",
            data.to_str().unwrap(),
            "--cluster",
            cluster.to_str().unwrap(),
        ],
        &[("DATABASE_URL", &support::url(&name))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let cwd = tempfile::tempdir().unwrap();
    let submit = |gpus: &str| {
        partita(
            cwd.path(),
            &[
                "submit",
                "--team",
                "research",
                "--gpus",
                gpus,
                "--server",
                &serve.addr,
                "--data-dir",
                data.to_str().unwrap(),
            ],
            &[],
        )
    };
    // The worker seeds the file's team on the new database.
    let mut out = submit("4");
    for _ in 0..100 {
        if out.code == Some(0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        out = submit("4");
    }
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = submit("8");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.starts_with("submit: 400 Bad Request: ") && out.stderr.contains("gpu"),
        "{out:?}"
    );
}
