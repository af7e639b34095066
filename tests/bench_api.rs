//! `partita bench api` against a real `partita serve` (on the tests'
//! PostgreSQL, with its worker, which seeds the teams): a short run with a
//! few clients prints a result that parses, and the jobs in the database
//! are exactly the submissions it reports as acknowledged, each with its
//! own idempotency key. No speed is asserted: the machine is shared.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{Serve, wait_until};

#[tokio::test]
async fn bench_api_submits_what_it_reports() {
    let (pool, name) = support::fresh_db().await;
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(
        &["--data-dir", dir.path().to_str().unwrap()],
        &[("DATABASE_URL", &support::url(&name))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let token = std::fs::read_to_string(dir.path().join("admin.token")).expect("admin.token");
    // The worker seeds the scenario's teams on its first start.
    let seeded = {
        let pool = pool.clone();
        tokio::task::spawn_blocking(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            wait_until(Duration::from_secs(60), || {
                rt.block_on(
                    sqlx::query_scalar::<_, bool>(
                        "SELECT EXISTS (SELECT 1 FROM teams WHERE name = 'research')",
                    )
                    .fetch_one(&pool),
                )
                .unwrap_or(false)
            })
        })
        .await
        .unwrap()
    };
    assert!(
        seeded,
        "the worker did not seed the teams:\n{}",
        serve.log()
    );

    let addr = serve.addr.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_partita"))
            .args(["bench", "api", "--server", &addr])
            .args(["--concurrency", "3", "--duration", "1500ms", "--json"])
            .env("PARTITA_TOKEN", token.trim())
            .env_remove("PARTITA_SERVER")
            .output()
            .expect("partita bench api runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench api failed ({}):\n{stdout}\n{stderr}\nserver log:\n{}",
        out.status,
        serve.log()
    );
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let submitted = r["submitted"].as_u64().expect("submitted");
    assert!(submitted > 0, "{stdout}");
    assert_eq!(r["errors"], 0, "{stdout}");
    assert_eq!(r["concurrency"], 3);
    assert_eq!(r["server"], format!("http://{}", serve.addr));
    let seconds = r["seconds"].as_f64().unwrap();
    assert!((1.4..30.0).contains(&seconds), "{stdout}");
    let rate = r["submissions_per_second"].as_f64().unwrap();
    assert!((rate - submitted as f64 / seconds).abs() < 1e-6 * rate.max(1.0));
    let p = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k}: {stdout}"));
    assert!(
        0.0 < p("p50_ms")
            && p("p50_ms") <= p("p90_ms")
            && p("p90_ms") <= p("p99_ms")
            && p("p99_ms") <= p("max_ms"),
        "{stdout}"
    );

    // Every acknowledged submission is one job, with a key of its own, and
    // there is no other (the last requests' answers are waited for).
    let (jobs, keys): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT idempotency_key) FROM jobs WHERE idempotency_key LIKE 'bench-%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(jobs, keys, "an idempotency key was reused");
    let all: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(all, jobs, "jobs without a bench key");
    assert_eq!(
        jobs as u64, submitted,
        "jobs in the database vs acknowledged submissions"
    );

    // The text output is Go's line.
    let addr = serve.addr.clone();
    let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_partita"))
            .args(["bench", "api", "--server", &addr, "--token", token.trim()])
            .args(["--concurrency", "1", "--duration", "200ms"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{line}");
    assert!(
        line.starts_with("bench api: 1 clients for ")
            && line.contains(" submissions acknowledged, 0 errors: ")
            && line.contains("/s; latency p50 ")
            && line.trim_end().ends_with(" ms"),
        "{line}"
    );
    let (code, log) = serve.terminate();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn bench_api_refuses_bad_flags_with_exit_2() {
    for args in [
        &["--concurrency", "0"][..],
        &["--duration", "0s"],
        &["--server", "https://example.org"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_partita"))
            .args(["bench", "api", "--token", "t"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("bench api: "), "{args:?}: {err}");
    }
}
