//! The API and the worker together on one real PostgreSQL: a job submitted
//! through the API runs on the virtual cluster and succeeds, with its
//! events in order (each saying its clock) and its ledger row; a cancel
//! asked through the API of a running job is carried out by the worker.
//! Waits are bounded; nothing measures speed.

mod support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use partita::worker;
use serde_json::{Value, json};
use support::api::{call, world};

fn options(speed: f64) -> worker::Options {
    let mut opt = worker::Options::new(worker::load_scenario(None).unwrap(), speed);
    opt.tick = Duration::from_millis(20);
    opt.lock_poll = Duration::from_millis(100);
    opt.id = "e2e".into();
    opt
}

/// The job as the API shows it, once `done` says so (at most 30 s).
async fn wait_for(
    w: &support::api::World,
    token: &str,
    id: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let a = call(
            &w.app,
            "GET",
            &format!("/api/v1/jobs/{id}"),
            Some(token),
            None,
        )
        .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        if done(&a.body) {
            return a.body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "job {id}: not {what} after 30 s: {}",
            a.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_submitted_through_the_api_runs_and_a_cancel_is_carried_out() {
    let w = world().await;
    let member = w.token("member").unwrap().to_string();
    let handle = worker::spawn(w.pool.clone(), options(3000.0));

    // Ten minutes on one whole GPU: placed, run and done.
    let a = call(
        &w.app,
        "POST",
        "/api/v1/jobs",
        Some(&member),
        Some(json!({"gpu": {"count": 1}, "duration": "10m"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let id = a.body["id"].as_str().unwrap().to_string();
    let job = wait_for(&w, &member, &id, "succeeded", |j| j["state"] == "succeeded").await;
    let events: Vec<(String, String)> = job["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["state"].as_str().unwrap().to_string(),
                e["clock"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let states: Vec<&str> = events.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        states,
        ["submitted", "queued", "admitted", "running", "succeeded"],
        "{job}"
    );
    assert!(
        events.iter().all(|(_, clock)| clock == "cluster"),
        "a job's life is in cluster time: {events:?}"
    );
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM usage_ledger l JOIN jobs j ON j.seq = l.job_seq WHERE j.id = $1",
    )
    .bind(&id)
    .fetch_one(&w.pool)
    .await
    .unwrap();
    assert_eq!(rows, 1, "one GPU held once: one ledger row");

    // A long job, cancelled through the API once it runs: the API only
    // asks; the worker releases its GPU, ends its hold in the ledger and
    // records the cancel.
    let a = call(
        &w.app,
        "POST",
        "/api/v1/jobs",
        Some(&member),
        Some(json!({"gpu": {"count": 1}, "duration": "1000h"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    let long = a.body["id"].as_str().unwrap().to_string();
    wait_for(&w, &member, &long, "running", |j| j["state"] == "running").await;
    let a = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{long}/cancel"),
        Some(&member),
        None,
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let job = wait_for(&w, &member, &long, "cancelled", |j| {
        j["state"] == "cancelled"
    })
    .await;
    let last = job["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["state"], "cancelled", "{job}");
    let rows: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM usage_ledger l JOIN jobs j ON j.seq = l.job_seq WHERE j.id = $1",
    )
    .bind(&long)
    .fetch_one(&w.pool)
    .await
    .unwrap();
    assert_eq!(rows, 1, "the cancelled job's hold is in the ledger");
    handle.abort();
}
