//! A team orders its own queue: POST /jobs/{id}/move swaps a queued job
//! with its neighbour of the same class, and the worker's scheduler takes
//! the jobs in that order (and takes up a class change) from its next
//! tick, against a real PostgreSQL and a running worker.

mod support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use partita::worker;
use serde_json::{Value, json};
use support::api::{World, call, worker_options, world};

async fn submit(w: &World, token: &str, body: Value) -> String {
    let a = call(&w.app, "POST", "/api/v1/jobs", Some(token), Some(body)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    a.body["id"].as_str().unwrap().to_string()
}

async fn move_job(w: &World, token: &str, id: &str, direction: &str) -> (StatusCode, Value) {
    let a = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{id}/move"),
        Some(token),
        Some(json!({ "direction": direction })),
    )
    .await;
    (a.status, a.body)
}

/// The team's queued jobs of `class` in the scheduler's order, as the
/// database keeps it.
async fn stored_order(w: &World, team: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT j.id FROM jobs j JOIN teams t ON t.id = j.team_id
         WHERE t.name = $1 AND j.state = 'queued'
         ORDER BY COALESCE(j.queue_key, j.submitted_at), j.id COLLATE \"C\"",
    )
    .bind(team)
    .fetch_all(&w.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_lead_moves_jobs_within_the_class_and_others_may_not() {
    let w = world().await;
    let member = w.token("member").unwrap();
    let lead = w.token("lead").unwrap();
    let a = submit(&w, member, json!({"gpu": {"count": 1}})).await;
    let b = submit(&w, member, json!({"gpu": {"count": 1}})).await;
    let c = submit(&w, member, json!({"gpu": {"count": 1}})).await;
    let prod = submit(
        &w,
        lead,
        json!({"gpu": {"count": 1}, "class": "production"}),
    )
    .await;
    assert_eq!(
        stored_order(&w, "search").await,
        [&a, &b, &c, &prod].map(String::as_str)
    );

    let (status, body) = move_job(&w, lead, &c, "up").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        stored_order(&w, "search").await,
        [&a, &c, &b, &prod].map(String::as_str)
    );
    let (status, _) = move_job(&w, lead, &c, "up").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        stored_order(&w, "search").await,
        [&c, &a, &b, &prod].map(String::as_str)
    );
    // The job's timeline says who moved it.
    let job = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{c}"),
        Some(lead),
        None,
    )
    .await;
    let events = job.body["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["reason"].as_str().unwrap().contains("moved up past")
                && e["reason"].as_str().unwrap().contains("by leo")),
        "{}",
        job.body
    );

    // First of its class: it cannot go higher; the production job is of
    // another class, so the last batch job cannot pass it either.
    let (status, body) = move_job(&w, lead, &c, "up").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("already first"),
        "{body}"
    );
    let (status, body) = move_job(&w, lead, &b, "down").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("already last"),
        "{body}"
    );
    let (status, _) = move_job(&w, lead, &prod, "up").await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Down undoes up.
    let (status, _) = move_job(&w, lead, &c, "down").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        stored_order(&w, "search").await,
        [&a, &c, &b, &prod].map(String::as_str)
    );

    // Who may not: a member, a viewer, another team's member (who does
    // not see the job), and a bad direction.
    let (status, _) = move_job(&w, member, &c, "up").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = move_job(&w, w.token("viewer").unwrap(), &c, "up").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = move_job(&w, &w.ads_member, &c, "up").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = move_job(&w, lead, &c, "sideways").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["field"], "direction");
    let (status, _) = move_job(&w, w.token("admin").unwrap(), &c, "up").await;
    assert_eq!(status, StatusCode::OK, "an admin orders any team's queue");
    assert_eq!(
        stored_order(&w, "search").await,
        [&c, &a, &b, &prod].map(String::as_str)
    );
}

/// The ids of a team's queue in GET /queue, once the worker cycled them.
async fn published_order(w: &World, want: &[&String]) -> Vec<String> {
    let admin = w.token("admin").unwrap();
    let start = Instant::now();
    loop {
        let q = call(
            &w.app,
            "GET",
            "/api/v1/queue?team=search",
            Some(admin),
            None,
        )
        .await;
        assert_eq!(q.status, StatusCode::OK, "{}", q.body);
        let jobs: Vec<&Value> = q.body["teams"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["jobs"].as_array().unwrap())
            .collect();
        let cycled = jobs
            .iter()
            .all(|e| e["reason"] != worker::views::NOT_CYCLED);
        let ids: Vec<String> = jobs
            .iter()
            .map(|e| e["job"].as_str().unwrap().to_string())
            .collect();
        let wanted: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        if cycled && ids == wanted {
            return ids;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the published queue is {ids:?} (cycled: {cycled}), not {wanted:?}: {}",
            q.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_takes_jobs_in_the_teams_order_and_takes_up_class_changes() {
    let w = world().await;
    let member = w.token("member").unwrap().to_string();
    let lead = w.token("lead").unwrap().to_string();
    let handle = worker::spawn(w.pool.clone(), worker_options(60.0, "order"));
    // search fills its burst (32 GPUs), so what it submits next waits.
    let gang = submit(
        &w,
        &member,
        json!({"gpu": {"count": 8}, "tasks": 4, "gang": 4, "duration": "1h"}),
    )
    .await;
    let start = Instant::now();
    loop {
        let j = call(
            &w.app,
            "GET",
            &format!("/api/v1/jobs/{gang}"),
            Some(&member),
            None,
        )
        .await;
        if j.body["state"] == "running" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{}", j.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a = submit(&w, &member, json!({"gpu": {"count": 1}, "duration": "10m"})).await;
    let b = submit(&w, &member, json!({"gpu": {"count": 1}, "duration": "10m"})).await;
    let c = submit(&w, &member, json!({"gpu": {"count": 1}, "duration": "10m"})).await;
    published_order(&w, &[&a, &b, &c]).await;

    // The lead puts c first: the scheduler's order follows.
    assert_eq!(move_job(&w, &lead, &c, "up").await.0, StatusCode::OK);
    assert_eq!(move_job(&w, &lead, &c, "up").await.0, StatusCode::OK);
    published_order(&w, &[&c, &a, &b]).await;

    // A class change reaches the worker too: production comes first.
    let p = call(
        &w.app,
        "PATCH",
        &format!("/api/v1/jobs/{b}"),
        Some(&lead),
        Some(json!({"class": "production"})),
    )
    .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.body);
    published_order(&w, &[&b, &c, &a]).await;
    handle.stop().await;
}
