//! `partita serve` as a process: the embedded PostgreSQL in a fresh data
//! dir, a restart that reuses it, a clean stop, a stale postmaster.pid, a
//! machine without PostgreSQL, and an external database.

mod support;

use std::path::Path;
use std::time::Duration;

use nix::sys::signal::Signal;
use partita::db::embedded::{is_postgres_process, read_postmaster_pid};
use support::{Serve, http_get, wait_until};

const INITDB_LOG: &str = "initializing a new PostgreSQL cluster";

fn ready(addr: &str) {
    let (status, body) = http_get(addr, "/readyz");
    assert_eq!(status, 200, "/readyz: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(json["checks"]["database"]["reachable"], true, "{body}");
}

fn start(data_dir: &Path) -> Serve {
    Serve::start(&["--data-dir", data_dir.to_str().unwrap()], &[]).unwrap_or_else(|e| panic!("{e}"))
}

fn postmaster(data_dir: &Path) -> i32 {
    read_postmaster_pid(&data_dir.join("postgres")).expect("postmaster.pid while it runs")
}

#[test]
fn the_embedded_server_starts_restarts_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let serve = start(&data);
    ready(&serve.addr);
    let (status, _) = http_get(&serve.addr, "/healthz");
    assert_eq!(status, 200);
    // The portal's sign-in hint names this data dir, not the default.
    let (status, signin) = http_get(&serve.addr, "/signin");
    assert_eq!(status, 200, "{signin}");
    assert!(
        signin.contains(&format!("{}/admin.token", data.display())),
        "{signin}"
    );
    assert!(
        serve.log().contains(INITDB_LOG),
        "the first start ran no initdb"
    );
    let pid = postmaster(&data);
    assert!(is_postgres_process(pid));
    let token = std::fs::read_to_string(data.join("admin.token")).expect("admin.token written");
    let (code, log) = serve.terminate();
    assert_eq!(code, Some(0), "serve did not exit cleanly:\n{log}");
    assert!(
        log.contains("path=/readyz") && log.contains("status=200"),
        "requests are not logged:\n{log}"
    );
    // pg_ctl stop waited for the postmaster, which waits for its children.
    assert!(!is_postgres_process(pid), "the postmaster {pid} still runs");
    assert!(!data.join("postgres/postmaster.pid").exists());

    let serve = start(&data);
    ready(&serve.addr);
    assert!(
        !serve.log().contains(INITDB_LOG),
        "the second start ran initdb again"
    );
    assert_eq!(
        std::fs::read_to_string(data.join("admin.token")).unwrap(),
        token,
        "the admin token changed"
    );
    let pid = postmaster(&data);
    let (code, log) = serve.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert!(!is_postgres_process(pid));
}

#[test]
fn a_stale_postmaster_pid_does_not_block_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let serve = start(&data);
    ready(&serve.addr);
    // The postmaster and Partita die at once, as in a power cut or OOM kill.
    let pid = postmaster(&data);
    support::signal(pid, Signal::SIGKILL);
    serve.kill9();
    assert!(
        wait_until(Duration::from_secs(30), || !is_postgres_process(pid)),
        "the killed postmaster lingers"
    );
    assert!(
        data.join("postgres/postmaster.pid").exists(),
        "the pid file should be left behind"
    );

    let serve = start(&data);
    ready(&serve.addr);
    assert!(
        serve.log().contains("stale postmaster.pid"),
        "{}",
        serve.log()
    );
    let (code, log) = serve.terminate();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn a_server_left_running_by_a_killed_partita_is_stopped_and_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let serve = start(&data);
    ready(&serve.addr);
    let pid = postmaster(&data);
    serve.kill9(); // Partita dies; its PostgreSQL lives on.
    assert!(is_postgres_process(pid));

    let serve = start(&data);
    ready(&serve.addr);
    assert!(
        !is_postgres_process(pid),
        "the old postmaster {pid} still runs"
    );
    assert!(
        serve.log().contains("still runs in this data directory"),
        "{}",
        serve.log()
    );
    let (code, log) = serve.terminate();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn without_postgresql_binaries_the_error_names_the_package_and_the_alternative() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("no-binaries-here");
    std::fs::create_dir(&empty).unwrap();
    let data = dir.path().join("data");
    let err = Serve::start(
        &["--data-dir", data.to_str().unwrap()],
        &[("PARTITA_PG_BIN", empty.to_str().unwrap())],
    )
    .err()
    .expect("serve refuses to start");
    assert!(err.contains("exited (exit status: 1)"), "{err}");
    assert!(err.contains("apt-get install postgresql"), "{err}");
    assert!(err.contains("--database-url"), "{err}");
    assert!(
        err.contains("no-binaries-here"),
        "the error does not say where it looked: {err}"
    );
}

#[tokio::test]
async fn with_a_database_url_serve_migrates_the_external_database() {
    let (pool, name) = support::empty_db().await;
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(
        &["--data-dir", dir.path().to_str().unwrap()],
        &[("DATABASE_URL", &support::url(&name))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    ready(&serve.addr);
    assert!(
        !dir.path().join("postgres").exists(),
        "an embedded server was started"
    );
    assert!(
        serve.log().contains("external PostgreSQL"),
        "{}",
        serve.log()
    );
    let admins: i64 = sqlx::query_scalar("SELECT count(*) FROM users WHERE role = 'admin'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(admins, 1);
    let (code, log) = serve.terminate();
    assert_eq!(code, Some(0), "{log}");
}
