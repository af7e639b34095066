//! The worker's world as the API shows it, with a worker running on the
//! same real PostgreSQL: the queue (positions, reasons, estimated starts,
//! team scoping), a queued job's place and a running job's placement, the
//! cluster (other teams' tasks unnamed), POST /jobs/preview (checked as a
//! submission, storing nothing, equal to the Go build's answers), and
//! /metrics (the Go build's names, submissions counted, the worker's
//! counters where it runs, the gauges from the published view).

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::{DateTime, TimeDelta, Utc};
use partita::metrics::Metrics;
use partita::server::{AppState, app};
use partita::worker;
use serde_json::{Value, json};
use support::api::{World, call, call_raw, worker_options, world};

/// Submits as `token` and gives the job's id.
async fn submit(w: &World, token: &str, body: Value) -> String {
    let a = call(&w.app, "POST", "/api/v1/jobs", Some(token), Some(body)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    a.body["id"].as_str().unwrap().to_string()
}

/// GETs `path` as `token` until `done` says so (at most 30 s).
async fn poll(
    w: &World,
    token: &str,
    path: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let a = call(&w.app, "GET", path, Some(token), None).await;
        if a.status == StatusCode::OK && done(&a.body) {
            return a.body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{path}: not {what} after 30 s: {} {}",
            a.status,
            a.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

/// The ids of a team's queue in a GET /queue answer.
fn queue_of<'a>(q: &'a Value, team: &str) -> Vec<&'a Value> {
    q["teams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["team"] == team)
        .flat_map(|t| t["jobs"].as_array().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_cluster_and_job_views_are_the_workers_and_scoped_per_team() {
    let w = world().await;
    let member = w.token("member").unwrap().to_string();
    let lead = w.token("lead").unwrap().to_string();
    let admin = w.token("admin").unwrap().to_string();
    // 60 cluster seconds per wall second: an hour lasts a minute, longer
    // than the checks below take.
    let handle = worker::spawn(w.pool.clone(), worker_options(60.0, "views"));

    // search fills its burst (32 GPUs) with a gang of four 8-GPU tasks;
    // ads takes the other 16 GPUs.
    let gang = submit(
        &w,
        &member,
        json!({"gpu": {"count": 8}, "tasks": 4, "gang": 4, "duration": "1h"}),
    )
    .await;
    let running = poll(
        &w,
        &member,
        &format!("/api/v1/jobs/{gang}"),
        "running",
        |j| j["state"] == "running",
    )
    .await;
    let ads_big = submit(
        &w,
        &w.ads_member,
        json!({"gpu": {"count": 8}, "tasks": 2, "gang": 2, "duration": "1h"}),
    )
    .await;
    poll(
        &w,
        &w.ads_member,
        &format!("/api/v1/jobs/{ads_big}"),
        "running",
        |j| j["state"] == "running",
    )
    .await;
    // Then three more of search's wait for its quota, and one of ads for
    // room.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(submit(&w, &member, json!({"gpu": {"count": 1}, "duration": "10m"})).await);
    }
    let ads_small = submit(
        &w,
        &w.ads_member,
        json!({"gpu": {"count": 1}, "duration": "10m"}),
    )
    .await;

    // Once the worker has cycled them and projected the queue:
    let q = poll(&w, &admin, "/api/v1/queue", "projected", |q| {
        let search = queue_of(q, "search");
        search.len() == 3
            && search
                .iter()
                .all(|e| e["reason"].as_str().unwrap_or("").starts_with("quota"))
            && search.iter().all(|e| e.get("estimated_start").is_some())
            && queue_of(q, "ads").len() == 1
    })
    .await;
    let teams: Vec<&str> = q["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["team"].as_str().unwrap())
        .collect();
    assert_eq!(teams, ["ads", "search"], "{q}");
    let search = queue_of(&q, "search");
    let order: Vec<(&str, i64)> = search
        .iter()
        .map(|e| (e["job"].as_str().unwrap(), e["position"].as_i64().unwrap()))
        .collect();
    // The scheduler's order: the oldest submission (cluster time) first.
    // (Submissions a few milliseconds apart may be stamped out of order:
    // cluster time as the API reads it can step back by up to a cluster
    // second when the worker stores its clock.)
    let mut by_age = Vec::new();
    for (i, id) in waiting.iter().enumerate() {
        let j = call(
            &w.app,
            "GET",
            &format!("/api/v1/jobs/{id}"),
            Some(&member),
            None,
        )
        .await;
        by_age.push((time(&j.body["submitted_at"]), i, id.as_str()));
    }
    by_age.sort();
    let expected: Vec<(&str, i64)> = by_age
        .iter()
        .zip(1..)
        .map(|((_, _, id), position)| (*id, position))
        .collect();
    assert_eq!(order, expected, "{q}");
    // The first waits until the gang ends (its run time after it started
    // running), in cluster time; its wait in wall seconds is the same at
    // the worker's speed.
    let ran_at = running["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["state"] == "running")
        .map(|e| time(&e["time"]))
        .unwrap();
    let first = search[0];
    let est = time(&first["estimated_start"]);
    assert_eq!(est, ran_at + TimeDelta::hours(1), "{first}");
    assert_eq!(q["clock"]["speed"], 60.0, "{q}");
    let now = time(&q["clock"]["now"]);
    let wait = first["wait_seconds"].as_f64().unwrap();
    let want = (est - now).num_milliseconds() as f64 / 1000.0 / 60.0;
    assert!(
        wait > 0.0 && (wait - want).abs() < 1e-6,
        "wait {wait}, want {want}: {q}"
    );
    assert_eq!(first["gpus"], 1.0);

    // A lead of search sees search's queue only, and no ads job anywhere.
    let mine = call(&w.app, "GET", "/api/v1/queue", Some(&lead), None).await;
    assert_eq!(mine.status, StatusCode::OK);
    let text = mine.body.to_string();
    assert_eq!(queue_of(&mine.body, "search").len(), 3, "{text}");
    for leak in [&ads_big, &ads_small, &"\"ads\"".to_string()] {
        assert!(!text.contains(leak.as_str()), "{leak} in {text}");
    }
    let other = call(&w.app, "GET", "/api/v1/queue?team=ads", Some(&lead), None).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.body);
    let only_ads = call(&w.app, "GET", "/api/v1/queue?team=ads", Some(&admin), None).await;
    assert_eq!(
        queue_of(&only_ads.body, "ads").len(),
        1,
        "{}",
        only_ads.body
    );
    assert_eq!(only_ads.body["teams"].as_array().unwrap().len(), 1);

    // A queued job says its place; another team's job is not found.
    let second = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{}", expected[1].0),
        Some(&member),
        None,
    )
    .await;
    assert_eq!(second.body["queue"]["position"], 2, "{}", second.body);
    assert!(
        second.body["queue"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("quota")
    );
    // Why it waits is the job's reason too, in its answer and in listings
    // (the row keeps "in team search's queue").
    assert_eq!(second.body["reason"], second.body["queue"]["reason"]);
    let listed = call(
        &w.app,
        "GET",
        "/api/v1/jobs?state=queued",
        Some(&member),
        None,
    )
    .await;
    let listed = listed.body["jobs"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(
        listed
            .iter()
            .all(|j| j["reason"].as_str().unwrap().starts_with("quota")),
        "{listed:?}"
    );
    let hidden = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{ads_small}"),
        Some(&member),
        None,
    )
    .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    // A running job says where each task is: eight whole GPUs on a node.
    let job = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{gang}"),
        Some(&member),
        None,
    )
    .await;
    assert!(job.body.get("queue").is_none(), "{}", job.body);
    let tasks = job.body["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4);
    let mut nodes = std::collections::BTreeSet::new();
    for t in tasks {
        let p = &t["placement"];
        nodes.insert(p["node"].as_str().unwrap().to_string());
        assert!(!p["tier"].as_str().unwrap().is_empty(), "{p}");
        let grants = p["grants"].as_array().unwrap();
        assert_eq!(grants.len(), 8, "{p}");
        assert!(
            grants
                .iter()
                .all(|g| g["milli"] == 1000 && g["model"].as_str().unwrap().ends_with("-80GB")),
            "{p}"
        );
    }
    assert_eq!(nodes.len(), 4, "one task per node: {nodes:?}");

    // The cluster: every GPU busy; search's member sees its gang by name
    // and ads's tasks as busy, unnamed.
    let c = call(&w.app, "GET", "/api/v1/cluster", Some(&member), None).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.body);
    let u = &c.body["utilization"];
    assert_eq!(c.body["gpus"], 48);
    assert_eq!(u["allocated_gpus"], 48.0, "{u}");
    assert_eq!(u["running_jobs"], 2, "{u}");
    assert_eq!(u["queued_jobs"], 4, "{u}");
    assert_eq!(c.body["nodes"].as_array().unwrap().len(), 6);
    let holders = |body: &Value| -> Vec<Value> {
        body["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|n| n["gpus"].as_array().unwrap())
            .flat_map(|g| g["holders"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let hs = holders(&c.body);
    assert_eq!(
        hs.iter()
            .filter(|h| h["job"] == gang.as_str() && h["team"] == "search")
            .count(),
        32
    );
    let unnamed: Vec<&Value> = hs.iter().filter(|h| h.get("job").is_none()).collect();
    assert_eq!(unnamed.len(), 16, "ads's GPUs, busy and unnamed");
    assert!(
        unnamed
            .iter()
            .all(|h| h["milli"] == 1000 && h.get("team").is_none())
    );
    let text = c.body.to_string();
    assert!(
        !text.contains(&ads_big) && !text.contains("\"ads\""),
        "{text}"
    );
    let all = call(&w.app, "GET", "/api/v1/cluster", Some(&admin), None).await;
    assert_eq!(
        holders(&all.body)
            .iter()
            .filter(|h| h["job"] == ads_big.as_str())
            .count(),
        16
    );
    let fin = call(&w.app, "GET", "/api/v1/cluster", w.token("finance"), None).await;
    assert_eq!(
        holders(&fin.body)
            .iter()
            .filter(|h| h["team"] == "ads")
            .count(),
        16
    );
    handle.abort();
}

#[tokio::test]
async fn a_job_submitted_before_any_worker_waits_after_the_others() {
    let w = world().await;
    let member = w.token("member").unwrap();
    let a = submit(&w, member, json!({"gpu": {"count": 1}})).await;
    let b = submit(&w, member, json!({"gpu": {"count": 1}})).await;
    let q = call(&w.app, "GET", "/api/v1/queue", Some(member), None).await;
    assert_eq!(q.status, StatusCode::OK, "{}", q.body);
    let jobs = queue_of(&q.body, "search");
    let ids: Vec<&str> = jobs.iter().map(|e| e["job"].as_str().unwrap()).collect();
    assert_eq!(ids, [a.as_str(), b.as_str()]);
    for e in &jobs {
        assert_eq!(e["position"], 1, "{e}");
        assert_eq!(e["reason"], worker::views::NOT_CYCLED);
        assert!(e.get("estimated_start").is_none());
    }
    assert_eq!(
        q.body["clock"]["speed"], 0.0,
        "no worker has run: {}",
        q.body
    );
    let c = call(&w.app, "GET", "/api/v1/cluster", Some(member), None).await;
    assert_eq!(c.status, StatusCode::SERVICE_UNAVAILABLE, "{}", c.body);
    assert!(c.body["error"].as_str().unwrap().contains("worker"));
}

#[tokio::test]
async fn preview_is_checked_as_a_submission_and_stores_nothing() {
    let w = world().await;
    let member = w.token("member").unwrap();
    let before = w.count("jobs").await;
    for (body, field) in [
        (json!({"gpu": {"count": 99}}), "gpu.count"),
        (json!({"gpu": {"count": 9}}), "gpu"),
        (json!({"gpu": {"mig": "9g.90gb"}}), "gpu"),
        (json!({"gpu": {"memory": "lots"}}), "gpu.memory"),
        (json!({"project": "nope"}), "project"),
        (json!({"team": "ads"}), "team"),
        (json!({"class": "royal"}), "class"),
        (json!({"cpu": "-1"}), "cpu"),
        (json!({"duration": "forever"}), "duration"),
        (json!({"gpu": {"count": 8}, "tasks": 5}), "gpu"),
        (json!({"gpus": 1}), "gpus"),
    ] {
        let a = call(
            &w.app,
            "POST",
            "/api/v1/jobs/preview",
            Some(member),
            Some(body.clone()),
        )
        .await;
        assert!(
            a.status.is_client_error(),
            "{body}: {} {}",
            a.status,
            a.body
        );
        assert_eq!(a.body["field"], field, "{body}: {}", a.body);
        // The same body submitted is refused the same way.
        let s = call(
            &w.app,
            "POST",
            "/api/v1/jobs",
            Some(member),
            Some(body.clone()),
        )
        .await;
        assert_eq!((s.status, &s.body), (a.status, &a.body), "{body}");
    }
    let a = call(
        &w.app,
        "POST",
        "/api/v1/jobs/preview",
        Some(member),
        Some(json!({"gpu": {"count": 2}, "tasks": 3})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["team"], "search");
    assert_eq!(a.body["gpus"], 6.0);
    assert_eq!(w.count("jobs").await, before, "a preview stores nothing");
    let viewer = call(
        &w.app,
        "POST",
        "/api/v1/jobs/preview",
        w.token("viewer"),
        Some(json!({})),
    )
    .await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN);
}

/// `v` with every number as a float: Go writes 32.0 as 32, serde_json as
/// 32.0; the values are what must be equal.
fn numbers_as_f64(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_f64).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), numbers_as_f64(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[tokio::test]
async fn preview_answers_as_the_go_build() {
    let w = world().await;
    let admin = w.token("admin").unwrap();
    let golden = include_str!("testdata/preview-go.tsv");
    let mut n = 0;
    for line in golden
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let mut cols = line.splitn(3, '\t');
        let (body, status, want) = (
            cols.next().unwrap(),
            cols.next().unwrap(),
            cols.next().unwrap(),
        );
        let want: Value = serde_json::from_str(want).unwrap();
        let a = call_raw(
            &w.app,
            "POST",
            "/api/v1/jobs/preview",
            Some(admin),
            Some(body.as_bytes().to_vec()),
            &[],
        )
        .await;
        assert_eq!(a.status.as_u16().to_string(), status, "{body}: {}", a.body);
        if a.status == StatusCode::OK {
            assert_eq!(numbers_as_f64(&a.body), numbers_as_f64(&want), "{body}");
        } else {
            assert_eq!(a.body["field"], want["field"], "{body}: {}", a.body);
        }
        n += 1;
    }
    assert!(n >= 10, "{n} cases");
}

/// The metric lines of a text exposition: (name with labels, value).
fn samples(text: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            assert!(
                line.is_empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                "{line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        let metric = name.split('{').next().unwrap();
        assert!(
            metric
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        out.push((name.to_string(), value));
    }
    out
}

fn value(s: &[(String, f64)], name: &str) -> Option<f64> {
    s.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_have_the_go_names_count_submissions_and_show_the_world() {
    let w = world().await;
    // As `partita serve` wires it: the worker in this process records into
    // the server's registry.
    let metrics = Arc::new(Metrics::new(true));
    let mut state = AppState::new(w.pool.clone());
    state.metrics = metrics.clone();
    let server = app(state);
    let mut opt = worker_options(600.0, "metrics");
    opt.metrics = metrics.worker();
    let handle = worker::spawn(w.pool.clone(), opt);

    let member = w.token("member").unwrap();
    for _ in 0..3 {
        let a = call(
            &server,
            "POST",
            "/api/v1/jobs",
            Some(member),
            Some(json!({"gpu": {"mig": "1g.10gb"}, "duration": "1h"})),
        )
        .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    }
    let bad = call(
        &server,
        "POST",
        "/api/v1/jobs",
        Some(member),
        Some(json!({"gpu": {"count": 99}})),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    // The worker starts them and publishes the world.
    let start = Instant::now();
    let s = loop {
        let a = call_raw(&server, "GET", "/metrics", None, None, &[]).await;
        assert_eq!(a.status, StatusCode::OK);
        let s = samples(a.body.as_str().unwrap());
        let started = value(
            &s,
            "partita_jobs_started_total{team=\"search\",class=\"batch\"}",
        );
        // The gauges come with a publication after the starts: three 1g
        // slices held (a slice counts its compute share, rounded down).
        let held = value(&s, "partita_team_gpus{team=\"search\"}").unwrap_or(0.0);
        if started == Some(3.0) && (held - 3.0 / 7.0).abs() < 0.01 {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        value(&s, "partita_jobs_submitted_total{team=\"search\"}"),
        Some(3.0)
    );
    assert_eq!(
        value(
            &s,
            "partita_api_requests_total{route=\"POST /api/v1/jobs\",code=\"201\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        value(
            &s,
            "partita_api_requests_total{route=\"POST /api/v1/jobs\",code=\"400\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "partita_api_request_seconds_count{route=\"POST /api/v1/jobs\"}"
        ),
        Some(4.0)
    );
    for name in [
        "partita_scheduler_cycle_seconds_count",
        "partita_mig_reconfigurations_total",
        "partita_job_wait_seconds_count{team=\"search\",class=\"batch\"}",
        "partita_gpu_utilization{kind=\"allocated\"}",
        "partita_gpu_utilization{kind=\"useful\"}",
        "partita_jobs_running",
        "partita_team_gpus{team=\"search\"}",
        "partita_team_gpus{team=\"ads\"}",
    ] {
        assert!(value(&s, name).is_some(), "no {name} in {s:?}");
    }
    // A web server without the worker shows no worker counters, only what
    // it saw and the published gauges.
    let web = call_raw(&w.app, "GET", "/metrics", None, None, &[]).await;
    let text = web.body.as_str().unwrap().to_string();
    assert!(
        !text.contains("partita_jobs_started") && !text.contains("partita_scheduler_cycle"),
        "{text}"
    );
    assert!(text.contains("partita_gpus 48"), "{text}");
    handle.abort();
}
