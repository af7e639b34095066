//! The JSON API on a real PostgreSQL: the access matrix (every route x
//! every kind of caller), submissions (validation, idempotency, paging),
//! the audit log, and the OpenAPI document against the routes.

mod support;

use std::collections::BTreeSet;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::api::{CALLERS, World, call, call_raw, world};

/// One row of the access matrix: a route, the concrete path (with
/// placeholders filled per cell), a body, and the status each caller gets,
/// in the order of CALLERS: admin, lead, member, viewer, finance, no
/// token, expired token, disabled user.
struct Row {
    method: &'static str,
    /// The route as the OpenAPI document names it.
    route: &'static str,
    /// `{own_job}` (a job of `search` by member mia), `{lead_job}` (of
    /// `search` by lead leo), `{other_job}` (of `ads`), `{new}` (a fresh
    /// name), `{user}` (a fresh user of `search`), `{token}` (a fresh token).
    path: &'static str,
    body: Option<&'static str>,
    expect: [u16; 8],
}

const fn row(
    method: &'static str,
    route: &'static str,
    path: &'static str,
    body: Option<&'static str>,
    expect: [u16; 8],
) -> Row {
    Row {
        method,
        route,
        path,
        body,
        expect,
    }
}

//                  admin lead member viewer finance none expired disabled
const ALL: [u16; 8] = [200, 200, 200, 200, 200, 401, 401, 401];
const ADMIN_ONLY: [u16; 8] = [200, 403, 403, 403, 403, 401, 401, 401];

const MATRIX: &[Row] = &[
    row(
        "GET",
        "/api/v1/openapi.json",
        "/api/v1/openapi.json",
        None,
        [200, 200, 200, 200, 200, 200, 200, 200],
    ),
    row("GET", "/api/v1/whoami", "/api/v1/whoami", None, ALL),
    // Submit to one's own team (the admin names it), and to another team.
    row(
        "POST",
        "/api/v1/jobs",
        "/api/v1/jobs",
        Some(r#"{"team": "search", "gpu": {"count": 1}}"#),
        [201, 201, 201, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs",
        "/api/v1/jobs",
        Some(r#"{"team": "ads", "gpu": {"count": 1}}"#),
        [201, 403, 403, 403, 403, 401, 401, 401],
    ),
    row("GET", "/api/v1/jobs", "/api/v1/jobs", None, ALL),
    row(
        "GET",
        "/api/v1/jobs",
        "/api/v1/jobs?team=ads",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row(
        "GET",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{own_job}",
        None,
        ALL,
    ),
    row(
        "GET",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{other_job}",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row(
        "GET",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/job-missing",
        None,
        [404, 404, 404, 404, 404, 401, 401, 401],
    ),
    row(
        "PATCH",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{own_job}",
        Some(r#"{"class": "production"}"#),
        [200, 200, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "PATCH",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{other_job}",
        Some(r#"{"class": "production"}"#),
        [200, 404, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/{id}/cancel",
        "/api/v1/jobs/{own_job}/cancel",
        None,
        [200, 200, 200, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/{id}/cancel",
        "/api/v1/jobs/{lead_job}/cancel",
        None,
        [200, 200, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/{id}/cancel",
        "/api/v1/jobs/{other_job}/cancel",
        None,
        [200, 404, 404, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/{id}/requeue",
        "/api/v1/jobs/{own_job}/requeue",
        None,
        [200, 200, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/{id}/requeue",
        "/api/v1/jobs/{other_job}/requeue",
        None,
        [200, 404, 403, 403, 403, 401, 401, 401],
    ),
    // A direction that is neither up nor down: the roles are checked
    // before the body (400 naming the field), whatever the queue holds.
    row(
        "POST",
        "/api/v1/jobs/{id}/move",
        "/api/v1/jobs/{own_job}/move",
        Some(r#"{"direction": "sideways"}"#),
        [400, 400, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/{id}/move",
        "/api/v1/jobs/{other_job}/move",
        Some(r#"{"direction": "sideways"}"#),
        [400, 404, 403, 403, 403, 401, 401, 401],
    ),
    row("GET", "/api/v1/teams", "/api/v1/teams", None, ALL),
    row(
        "POST",
        "/api/v1/teams",
        "/api/v1/teams",
        Some(r#"{"name": "{new}"}"#),
        [201, 403, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "GET",
        "/api/v1/teams/{team}",
        "/api/v1/teams/search",
        None,
        ALL,
    ),
    row(
        "GET",
        "/api/v1/teams/{team}",
        "/api/v1/teams/ads",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row(
        "PATCH",
        "/api/v1/teams/{team}",
        "/api/v1/teams/search",
        Some(r#"{"weight": 2}"#),
        ADMIN_ONLY,
    ),
    row(
        "PATCH",
        "/api/v1/teams/{team}",
        "/api/v1/teams/ads",
        Some(r#"{"weight": 2}"#),
        ADMIN_ONLY,
    ),
    row(
        "GET",
        "/api/v1/teams/{team}/projects",
        "/api/v1/teams/search/projects",
        None,
        ALL,
    ),
    row(
        "GET",
        "/api/v1/teams/{team}/projects",
        "/api/v1/teams/ads/projects",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/teams/{team}/projects",
        "/api/v1/teams/search/projects",
        Some(r#"{"name": "{new}"}"#),
        [201, 201, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/teams/{team}/projects",
        "/api/v1/teams/ads/projects",
        Some(r#"{"name": "{new}"}"#),
        [201, 404, 403, 403, 403, 401, 401, 401],
    ),
    row("GET", "/api/v1/users", "/api/v1/users", None, ADMIN_ONLY),
    row(
        "POST",
        "/api/v1/users",
        "/api/v1/users",
        Some(r#"{"name": "{new}", "role": "viewer", "team": "search"}"#),
        [201, 403, 403, 403, 403, 401, 401, 401],
    ),
    row(
        "PATCH",
        "/api/v1/users/{user}",
        "/api/v1/users/{user}",
        Some(r#"{"role": "member"}"#),
        ADMIN_ONLY,
    ),
    row(
        "POST",
        "/api/v1/users/{user}/tokens",
        "/api/v1/users/{user}/tokens",
        Some(r#"{"description": "ci"}"#),
        [201, 403, 403, 403, 403, 401, 401, 401],
    ),
    row("GET", "/api/v1/tokens", "/api/v1/tokens", None, ADMIN_ONLY),
    row(
        "DELETE",
        "/api/v1/tokens/{id}",
        "/api/v1/tokens/{token}",
        None,
        ADMIN_ONLY,
    ),
    row("GET", "/api/v1/profiles", "/api/v1/profiles", None, ALL),
    row("GET", "/api/v1/audit", "/api/v1/audit", None, ADMIN_ONLY),
    // Reports and the ledger: everyone reads their own team's; asking for
    // another team is answered as if it did not exist, except for admin
    // and finance, who read every team's.
    row(
        "GET",
        "/api/v1/reports/usage",
        "/api/v1/reports/usage",
        None,
        ALL,
    ),
    row(
        "GET",
        "/api/v1/reports/usage",
        "/api/v1/reports/usage?team=ads&format=csv",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row(
        "GET",
        "/api/v1/reports/chargeback",
        "/api/v1/reports/chargeback?month=2026-12",
        None,
        ALL,
    ),
    row(
        "GET",
        "/api/v1/reports/chargeback",
        "/api/v1/reports/chargeback?team=ads",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row("GET", "/api/v1/ledger", "/api/v1/ledger", None, ALL),
    row(
        "GET",
        "/api/v1/ledger",
        "/api/v1/ledger?team=ads&format=csv",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row("GET", "/api/v1/prices", "/api/v1/prices", None, ALL),
    row(
        "PUT",
        "/api/v1/prices",
        "/api/v1/prices",
        Some(r#"{"currency": "USD", "prices": [{"model": "L4", "tier": "spot", "price": 0.3}]}"#),
        ADMIN_ONLY,
    ),
    // The worker's views: every role reads its own team's queue, and the
    // cluster (other teams' tasks unnamed); a preview is a submission
    // that stores nothing, so it is allowed as a submission is.
    row("GET", "/api/v1/queue", "/api/v1/queue", None, ALL),
    row(
        "GET",
        "/api/v1/queue",
        "/api/v1/queue?team=ads",
        None,
        [200, 404, 404, 404, 200, 401, 401, 401],
    ),
    row(
        "GET",
        "/api/v1/queue",
        "/api/v1/queue?team=nope",
        None,
        [404, 404, 404, 404, 404, 401, 401, 401],
    ),
    row("GET", "/api/v1/cluster", "/api/v1/cluster", None, ALL),
    row(
        "POST",
        "/api/v1/jobs/preview",
        "/api/v1/jobs/preview",
        Some(r#"{"team": "search", "gpu": {"count": 1}}"#),
        [200, 200, 200, 403, 403, 401, 401, 401],
    ),
    row(
        "POST",
        "/api/v1/jobs/preview",
        "/api/v1/jobs/preview",
        Some(r#"{"team": "ads", "gpu": {"count": 1}}"#),
        [200, 403, 403, 403, 403, 401, 401, 401],
    ),
];

/// Fills a row's placeholders with objects made for this cell alone, so
/// that one cell's change (a cancel) never decides another's answer.
async fn fill(w: &World, text: &str, n: usize) -> String {
    let mut out = text.replace("{new}", &format!("n{n}"));
    if out.contains("{own_job}") {
        out = out.replace("{own_job}", &w.job(w.token("member").unwrap()).await);
    }
    if out.contains("{lead_job}") {
        out = out.replace("{lead_job}", &w.job(w.token("lead").unwrap()).await);
    }
    if out.contains("{other_job}") {
        out = out.replace("{other_job}", &w.job(&w.ads_member).await);
    }
    let admin = w.token("admin");
    if out.contains("{user}") || out.contains("{token}") {
        let name = format!("u{n}");
        let a = call(
            &w.app,
            "POST",
            "/api/v1/users",
            admin,
            Some(json!({"name": name, "role": "viewer", "team": "search"})),
        )
        .await;
        assert_eq!(a.status, StatusCode::CREATED);
        let t = call(
            &w.app,
            "POST",
            &format!("/api/v1/users/{name}/tokens"),
            admin,
            Some(json!({})),
        )
        .await;
        assert_eq!(t.status, StatusCode::CREATED);
        out = out
            .replace("{user}", &name)
            .replace("{token}", t.body["id"].as_str().unwrap());
    }
    out
}

#[tokio::test]
async fn access_matrix_every_route_every_caller() {
    let w = world().await;
    w.publish_views().await;
    let mut failures = Vec::new();
    let mut n = 0;
    for r in MATRIX {
        for (col, caller) in CALLERS.iter().enumerate() {
            n += 1;
            let path = fill(&w, r.path, n).await;
            let body = match r.body {
                Some(b) => Some(fill(&w, b, n).await.into_bytes()),
                None => None,
            };
            let a = call_raw(&w.app, r.method, &path, w.token(caller), body, &[]).await;
            if a.status.as_u16() != r.expect[col] {
                failures.push(format!(
                    "{} {} as {caller}: {} (want {}): {}",
                    r.method,
                    path,
                    a.status.as_u16(),
                    r.expect[col],
                    a.body
                ));
            }
            // An error tells nothing but the error: no data of the object.
            if a.status.is_client_error() {
                let keys: BTreeSet<&str> = a
                    .body
                    .as_object()
                    .map(|o| o.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                if !keys.contains("error") || keys.iter().any(|k| *k != "error" && *k != "field") {
                    failures.push(format!(
                        "{} {} as {caller}: error body {}",
                        r.method, path, a.body
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn listings_never_show_another_teams_objects() {
    let w = world().await;
    let ours = w.job(w.token("member").unwrap()).await;
    let theirs = w.job(&w.ads_member).await;
    for caller in ["lead", "member", "viewer"] {
        let jobs = call(&w.app, "GET", "/api/v1/jobs", w.token(caller), None)
            .await
            .body;
        let ids: Vec<&str> = jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, vec![ours.as_str()], "{caller}");
        let teams = call(&w.app, "GET", "/api/v1/teams", w.token(caller), None)
            .await
            .body;
        assert_eq!(teams.as_array().unwrap().len(), 1, "{caller}: {teams}");
        assert_eq!(teams[0]["name"], "search");
    }
    for caller in ["admin", "finance"] {
        let jobs = call(&w.app, "GET", "/api/v1/jobs", w.token(caller), None)
            .await
            .body;
        assert_eq!(jobs["jobs"].as_array().unwrap().len(), 2, "{caller}");
        assert_eq!(jobs["jobs"][0]["id"], theirs.as_str(), "newest first");
    }
}

#[tokio::test]
async fn bad_submissions_name_the_field_and_store_nothing() {
    let w = world().await;
    let member = w.token("member");
    let admin = w.token("admin");
    let cases: &[(Option<&str>, Value, u16, &str, &str)] = &[
        (
            member,
            json!({"gpu": {"count": 9}}),
            400,
            "gpu",
            "gpu.count: asks for 9 GPUs",
        ),
        (
            member,
            json!({"gpu": {"mig": "9g.99gb"}}),
            400,
            "gpu",
            "9g.99gb",
        ),
        (
            member,
            json!({"gpu": {"count": 17}}),
            400,
            "gpu.count",
            "17",
        ),
        (
            member,
            json!({"gpu": {"models": ["B9000"], "count": 1}}),
            400,
            "gpu.models",
            "B9000",
        ),
        (
            member,
            json!({"gpu": {"profile": "no-such"}}),
            400,
            "gpu.profile",
            "no-such",
        ),
        (
            admin,
            json!({"team": "nope", "gpu": {"count": 1}}),
            400,
            "team",
            "nope",
        ),
        (admin, json!({"gpu": {"count": 1}}), 400, "team", "required"),
        (member, json!({"team": "ads"}), 403, "team", "ads"),
        (member, json!({"project": "nope"}), 400, "project", "nope"),
        (member, json!({"class": "urgent"}), 400, "class", "urgent"),
        (member, json!({"tasks": 2, "gang": 3}), 400, "gang", "3"),
        (
            member,
            json!({"tasks": 2, "replicas": 2}),
            400,
            "replicas",
            "not both",
        ),
        (member, json!({"tasks": 5000}), 400, "tasks", "5000"),
        (member, json!({"cpu": "lots"}), 400, "cpu", "lots"),
        (member, json!({"cpu": "1000"}), 400, "cpu", "largest node"),
        (member, json!({"memory": "32GB"}), 400, "memory", "32GB"),
        (
            member,
            json!({"duration": "forever"}),
            400,
            "duration",
            "forever",
        ),
        (
            member,
            json!({"gpu": {"count": 8}, "tasks": 5}),
            400,
            "gpu",
            "burst_gpus",
        ),
        (
            member,
            json!({"colour": "red"}),
            400,
            "colour",
            "unknown field",
        ),
        (
            member,
            json!({"gpu": {"count": "one"}}),
            400,
            "gpu.count",
            "invalid type",
        ),
        (
            member,
            json!({"gpu": {"count": 1, "mig": "1g.10gb"}}),
            400,
            "gpu",
            "one of",
        ),
    ];
    let before = (w.count("jobs").await, w.count("job_events").await);
    for (token, body, status, field, says) in cases {
        let a = call(&w.app, "POST", "/api/v1/jobs", *token, Some(body.clone())).await;
        assert_eq!(a.status.as_u16(), *status, "{body}: {}", a.body);
        assert_eq!(a.body["field"], *field, "{body}: {}", a.body);
        let msg = a.body["error"].as_str().unwrap();
        assert!(msg.contains(says), "{body}: {msg:?} should say {says:?}");
    }
    // Wrong content type, trailing data, an oversized body.
    type Headers<'a> = &'a [(&'a str, &'a str)];
    let raw: &[(Headers, Vec<u8>, u16)] = &[
        (&[("Content-Type", "text/plain")], b"{}".to_vec(), 415),
        (&[], b"{} {}".to_vec(), 400),
        (&[], b"".to_vec(), 400),
        (&[], vec![b' '; 70_000], 413),
    ];
    for (headers, body, status) in raw {
        let a = call_raw(
            &w.app,
            "POST",
            "/api/v1/jobs",
            member,
            Some(body.clone()),
            headers,
        )
        .await;
        assert_eq!(a.status.as_u16(), *status, "{}", a.body);
        assert!(a.body["error"].is_string());
    }
    assert_eq!(
        (w.count("jobs").await, w.count("job_events").await),
        before,
        "nothing stored"
    );
}

#[tokio::test]
async fn idempotent_replay_answers_the_same_job_and_another_body_is_a_conflict() {
    let w = world().await;
    let member = w.token("member");
    let body = json!({"gpu": {"mig": "1g.10gb"}, "name": "nightly"});
    let first = call_raw(
        &w.app,
        "POST",
        "/api/v1/jobs",
        member,
        Some(serde_json::to_vec(&body).unwrap()),
        &[("Idempotency-Key", "k1")],
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(!first.replayed);
    // The key in the body instead of the header, same request: a replay.
    let mut with_key = body.clone();
    with_key["idempotency_key"] = json!("k1");
    let again = call(&w.app, "POST", "/api/v1/jobs", member, Some(with_key)).await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.replayed);
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(again.body["state"], first.body["state"]);
    // Another request under the same key: 409, naming the first job.
    let other = call_raw(
        &w.app,
        "POST",
        "/api/v1/jobs",
        member,
        Some(br#"{"gpu": {"mig": "2g.20gb"}}"#.to_vec()),
        &[("Idempotency-Key", "k1")],
    )
    .await;
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(other.body["field"], "idempotency_key");
    assert!(
        other.body["error"]
            .as_str()
            .unwrap()
            .contains(first.body["id"].as_str().unwrap())
    );
    // Header and body disagree: 400.
    let mut k2 = body.clone();
    k2["idempotency_key"] = json!("k2");
    let clash = call_raw(
        &w.app,
        "POST",
        "/api/v1/jobs",
        member,
        Some(serde_json::to_vec(&k2).unwrap()),
        &[("Idempotency-Key", "k3")],
    )
    .await;
    assert_eq!(clash.status, StatusCode::BAD_REQUEST);
    // Another user may use the same key for their own job.
    let lead = call_raw(
        &w.app,
        "POST",
        "/api/v1/jobs",
        w.token("lead"),
        Some(serde_json::to_vec(&body).unwrap()),
        &[("Idempotency-Key", "k1")],
    )
    .await;
    assert_eq!(lead.status, StatusCode::CREATED);
    assert_ne!(lead.body["id"], first.body["id"]);
    assert_eq!(w.count("jobs").await, 2);

    // Concurrent submissions with one key make one job.
    let mut handles = Vec::new();
    for _ in 0..8 {
        let app = w.app.clone();
        let token = member.unwrap().to_string();
        handles.push(tokio::spawn(async move {
            let a = call_raw(
                &app,
                "POST",
                "/api/v1/jobs",
                Some(&token),
                Some(br#"{"gpu": {"count": 2}}"#.to_vec()),
                &[("Idempotency-Key", "race")],
            )
            .await;
            (a.status, a.body["id"].as_str().unwrap().to_string())
        }));
    }
    let mut ids = BTreeSet::new();
    let mut created = 0;
    for h in handles {
        let (status, id) = h.await.unwrap();
        created += usize::from(status == StatusCode::CREATED);
        ids.insert(id);
    }
    assert_eq!((created, ids.len()), (1, 1));
    assert_eq!(w.count("jobs").await, 3);
}

/// Submissions arriving together are written together (one batch, one
/// commit): each still gets its own answer. Distinct keys make distinct
/// jobs; a key repeated with the same request answers with its job; a key
/// repeated with another request is refused (409) and stores nothing; the
/// answer to a new job is what reading it back gives.
#[tokio::test]
async fn submissions_written_together_each_get_their_own_answer() {
    let w = world().await;
    let member = w.token("member").unwrap().to_string();
    let mut handles = Vec::new();
    for i in 0..40 {
        let app = w.app.clone();
        let token = member.clone();
        // Keys k0..k9, four submissions each; the fourth of k0..k4 asks
        // for another GPU count.
        let key = format!("k{}", i % 10);
        let count = if i >= 30 && i % 10 < 5 { 2 } else { 1 };
        handles.push(tokio::spawn(async move {
            let body = json!({"name": key, "gpu": {"count": count}, "duration": "1h"});
            let a = call_raw(
                &app,
                "POST",
                "/api/v1/jobs",
                Some(&token),
                Some(serde_json::to_vec(&body).unwrap()),
                &[("Idempotency-Key", key.as_str())],
            )
            .await;
            (key, count, a.status, a.body)
        }));
    }
    let mut created = std::collections::BTreeMap::new();
    let mut answers = Vec::new();
    for h in handles {
        let (key, count, status, body) = h.await.unwrap();
        if status == StatusCode::CREATED {
            assert!(
                created.insert(key.clone(), body.clone()).is_none(),
                "{key} made two jobs"
            );
        }
        answers.push((key, count, status, body));
    }
    assert_eq!(created.len(), 10, "one job per key");
    assert_eq!(w.count("jobs").await, 10);
    assert_eq!(
        w.count("job_events").await,
        20,
        "submitted and queued, each"
    );
    for (key, count, status, body) in &answers {
        let first = &created[key];
        let first_count = first["gpus"].as_f64().unwrap() as i64;
        if *count == first_count {
            assert!(
                *status == StatusCode::CREATED || *status == StatusCode::OK,
                "{key}: {status} {body}"
            );
            assert_eq!(body["id"], first["id"], "{key}");
        } else {
            assert_eq!(*status, StatusCode::CONFLICT, "{key}: {body}");
            assert_eq!(body["field"], "idempotency_key");
        }
    }
    // A new job's answer is built from what was written, not read back:
    // it must equal the stored job.
    for first in created.values() {
        let id = first["id"].as_str().unwrap();
        let mut got = call(
            &w.app,
            "GET",
            &format!("/api/v1/jobs/{id}"),
            Some(&member),
            None,
        )
        .await;
        assert_eq!(got.status, StatusCode::OK);
        let stored = got.body.as_object_mut().unwrap();
        stored.remove("events");
        let mut answered = first.as_object().unwrap().clone();
        answered.remove("events");
        for (k, v) in &answered {
            assert_eq!(stored.get(k), Some(v), "{id}: field {k}");
        }
    }
}

#[tokio::test]
async fn paging_returns_every_job_once_newest_first() {
    let w = world().await;
    let mut submitted = Vec::new();
    for _ in 0..23 {
        submitted.push(w.job(w.token("member").unwrap()).await);
    }
    let mut seen = Vec::new();
    let mut path = "/api/v1/jobs?limit=5".to_string();
    let mut pages = 0;
    loop {
        let a = call(&w.app, "GET", &path, w.token("viewer"), None).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        pages += 1;
        for j in a.body["jobs"].as_array().unwrap() {
            seen.push(j["id"].as_str().unwrap().to_string());
        }
        match a.body["next"].as_str() {
            Some(next) => path = format!("/api/v1/jobs?limit=5&after={next}"),
            None => break,
        }
    }
    assert_eq!(pages, 5);
    submitted.reverse();
    assert_eq!(seen, submitted, "every job once, newest first");
    // Filters and bad parameters.
    let a = call(
        &w.app,
        "GET",
        "/api/v1/jobs?state=cancelled",
        w.token("viewer"),
        None,
    )
    .await;
    assert_eq!(a.body["jobs"].as_array().unwrap().len(), 0);
    for bad in [
        "limit=0",
        "limit=x",
        "after=-1",
        "state=gone",
        "class=urgent",
    ] {
        let a = call(
            &w.app,
            "GET",
            &format!("/api/v1/jobs?{bad}"),
            w.token("viewer"),
            None,
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

/// The newest audit row.
async fn last_audit(w: &World) -> Value {
    call(
        &w.app,
        "GET",
        "/api/v1/audit?limit=1",
        w.token("admin"),
        None,
    )
    .await
    .body["entries"][0]
        .clone()
}

#[tokio::test]
async fn every_admin_and_lead_change_is_audited_with_before_and_after() {
    let w = world().await;
    let admin = w.token("admin");
    let lead = w.token("lead");
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/teams/search",
        admin,
        Some(json!({"guaranteed_gpus": 12, "business_unit": "retail"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let e = last_audit(&w).await;
    assert_eq!(
        (
            e["action"].as_str(),
            e["actor"].as_str(),
            e["target"].as_str()
        ),
        (Some("team.update"), Some("root"), Some("search"))
    );
    assert_eq!(e["before"]["guaranteed_gpus"], 16.0);
    assert_eq!(e["after"]["guaranteed_gpus"], 12.0);
    assert_eq!(e["after"]["business_unit"], "retail");

    call(
        &w.app,
        "POST",
        "/api/v1/users",
        admin,
        Some(json!({"name": "neo", "role": "member", "team": "search"})),
    )
    .await;
    let e = last_audit(&w).await;
    assert_eq!(e["action"], "user.create");
    assert!(e["before"].is_null());
    assert_eq!(e["after"]["role"], "member");

    call(
        &w.app,
        "PATCH",
        "/api/v1/users/neo",
        admin,
        Some(json!({"role": "finance"})),
    )
    .await;
    let e = last_audit(&w).await;
    assert_eq!(
        (
            e["action"].as_str(),
            e["before"]["role"].as_str(),
            e["after"]["role"].as_str()
        ),
        (Some("user.update"), Some("member"), Some("finance"))
    );
    assert_eq!(e["after"].get("team"), None, "finance has no team");

    let t = call(
        &w.app,
        "POST",
        "/api/v1/users/neo/tokens",
        admin,
        Some(json!({"description": "ci"})),
    )
    .await;
    let e = last_audit(&w).await;
    assert_eq!(e["action"], "token.create");
    assert!(
        !e.to_string().contains(t.body["secret"].as_str().unwrap()),
        "the secret is never stored"
    );
    let id = t.body["id"].as_str().unwrap();
    // The new token works, then is revoked and refused.
    let neo = t.body["secret"].as_str().unwrap();
    assert_eq!(
        call(&w.app, "GET", "/api/v1/whoami", Some(neo), None)
            .await
            .body["role"],
        "finance"
    );
    call(
        &w.app,
        "DELETE",
        &format!("/api/v1/tokens/{id}"),
        admin,
        None,
    )
    .await;
    let e = last_audit(&w).await;
    assert_eq!(e["action"], "token.revoke");
    assert!(e["before"].get("revoked_at").is_none());
    assert!(e["after"]["revoked_at"].is_string());
    assert_eq!(
        call(&w.app, "GET", "/api/v1/whoami", Some(neo), None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );

    let job = w.job(w.token("member").unwrap()).await;
    call(
        &w.app,
        "PATCH",
        &format!("/api/v1/jobs/{job}"),
        lead,
        Some(json!({"class": "production"})),
    )
    .await;
    let e = last_audit(&w).await;
    assert_eq!(
        (e["action"].as_str(), e["actor"].as_str()),
        (Some("job.class"), Some("leo"))
    );
    assert_eq!(
        (e["before"]["class"].as_str(), e["after"]["class"].as_str()),
        (Some("batch"), Some("production"))
    );

    // A job that holds resources (as the worker would mark it): requeue
    // and cancel are requests for the worker, recorded and audited.
    sqlx::query("UPDATE jobs SET state = 'running', attempts = 1 WHERE id = $1")
        .bind(&job)
        .execute(&w.pool)
        .await
        .unwrap();
    let a = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{job}/requeue"),
        lead,
        None,
    )
    .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.body["requeue_requested_at"].is_string());
    assert!(
        a.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["state"] == "requeue_requested" && e["clock"] == "wall")
    );
    let e = last_audit(&w).await;
    assert_eq!(
        (
            e["action"].as_str(),
            e["after"]["requeue_requested"].as_bool()
        ),
        (Some("job.requeue"), Some(true))
    );
    let a = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{job}/cancel"),
        lead,
        None,
    )
    .await;
    assert_eq!(
        (
            a.body["state"].as_str(),
            a.body["cancel_requested_at"].is_string()
        ),
        (Some("running"), true)
    );
    assert_eq!(last_audit(&w).await["action"], "job.cancel");

    // A queued job too: a request the worker carries out (it alone changes
    // a job's state), recorded with who asked; asking again changes
    // nothing; a finished job's cancel is a conflict.
    let job = w.job(w.token("member").unwrap()).await;
    let a = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{job}/cancel"),
        lead,
        None,
    )
    .await;
    assert_eq!(
        (
            a.body["state"].as_str(),
            a.body["cancel_requested_at"].is_string()
        ),
        (Some("queued"), true)
    );
    let by: Option<String> =
        sqlx::query_scalar("SELECT cancel_requested_by FROM jobs WHERE id = $1")
            .bind(&job)
            .fetch_one(&w.pool)
            .await
            .unwrap();
    assert_eq!(by.as_deref(), Some("leo"));
    let e = last_audit(&w).await;
    assert_eq!(
        (
            e["action"].as_str(),
            e["before"]["state"].as_str(),
            e["after"]["cancel_requested"].as_bool()
        ),
        (Some("job.cancel"), Some("queued"), Some(true))
    );
    let audits = audit_count(&w).await;
    let again = call(
        &w.app,
        "POST",
        &format!("/api/v1/jobs/{job}/cancel"),
        lead,
        None,
    )
    .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        audit_count(&w).await,
        audits,
        "a second request is not a second change"
    );
    sqlx::query("UPDATE jobs SET state = 'cancelled' WHERE id = $1")
        .bind(&job)
        .execute(&w.pool)
        .await
        .unwrap();
    assert_eq!(
        call(
            &w.app,
            "POST",
            &format!("/api/v1/jobs/{job}/cancel"),
            lead,
            None
        )
        .await
        .status,
        StatusCode::CONFLICT
    );

    call(
        &w.app,
        "POST",
        "/api/v1/teams/search/projects",
        lead,
        Some(json!({"name": "chat"})),
    )
    .await;
    assert_eq!(last_audit(&w).await["action"], "project.create");
    call(
        &w.app,
        "POST",
        "/api/v1/teams",
        admin,
        Some(json!({"name": "vision", "guaranteed_gpus": 4})),
    )
    .await;
    assert_eq!(last_audit(&w).await["action"], "team.create");

    // Paging the audit log: every row once.
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(&w.pool)
        .await
        .unwrap();
    let mut seen = 0;
    let mut path = "/api/v1/audit?limit=3".to_string();
    loop {
        let a = call(&w.app, "GET", &path, admin, None).await.body;
        seen += a["entries"].as_array().unwrap().len() as i64;
        match a["next"].as_str() {
            Some(n) => path = format!("/api/v1/audit?limit=3&after={n}"),
            None => break,
        }
    }
    assert_eq!(seen, total);
}

/// Tokens' owners and teams are kept in memory by each server process;
/// a change made elsewhere (another server process, a person at psql)
/// reaches it through PostgreSQL's notice within moments.
#[tokio::test]
async fn account_changes_made_elsewhere_reach_every_server() {
    let w = world().await;
    // A second server process on the same database.
    let other = partita::server::app(partita::server::AppState::new(w.pool.clone()));
    let member = w.token("member");
    let until = |app: axum::Router,
                 path: &'static str,
                 token: Option<&'static str>,
                 want: StatusCode| async move {
        for _ in 0..100 {
            if call(&app, "GET", path, token, None).await.status == want {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        false
    };
    let member: Option<&'static str> = member.map(|t| &*t.to_string().leak());
    // Both have read the member (and keep them).
    for app in [&w.app, &other] {
        assert_eq!(
            call(app, "GET", "/api/v1/whoami", member, None)
                .await
                .status,
            StatusCode::OK
        );
    }
    // Disabled through the first: refused by the second.
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/users/mia",
        w.token("admin"),
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(
        until(
            other.clone(),
            "/api/v1/whoami",
            member,
            StatusCode::UNAUTHORIZED
        )
        .await
    );
    // Enabled at psql: both let them in again.
    sqlx::query("UPDATE users SET disabled = false WHERE name = 'mia'")
        .execute(&w.pool)
        .await
        .unwrap();
    assert!(until(other.clone(), "/api/v1/whoami", member, StatusCode::OK).await);
    assert!(until(w.app.clone(), "/api/v1/whoami", member, StatusCode::OK).await);
    // A class taken from the team at psql is refused on submission.
    let submit = |app: axum::Router| async move {
        call(
            &app,
            "POST",
            "/api/v1/jobs",
            member,
            Some(json!({"gpu": {"count": 1}, "class": "batch"})),
        )
        .await
    };
    assert_eq!(submit(other.clone()).await.status, StatusCode::CREATED);
    sqlx::query("UPDATE teams SET classes = ARRAY['production'] WHERE name = 'search'")
        .execute(&w.pool)
        .await
        .unwrap();
    let mut refused = None;
    for _ in 0..100 {
        let a = submit(other.clone()).await;
        if a.status != StatusCode::CREATED {
            refused = Some(a);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let a = refused.expect("the class change reached the second server");
    assert_eq!(
        (a.status, a.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("class")),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn disabled_users_and_expired_tokens_are_refused_and_admins_keep_themselves() {
    let w = world().await;
    let admin = w.token("admin");
    let a = call(&w.app, "GET", "/api/v1/whoami", w.token("disabled"), None).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.body["error"].as_str().unwrap().contains("disabled"));
    let a = call(&w.app, "GET", "/api/v1/whoami", w.token("expired"), None).await;
    assert!(a.body["error"].as_str().unwrap().contains("expired"));
    // Disabling a user refuses their token at once; enabling lets it in.
    call(
        &w.app,
        "PATCH",
        "/api/v1/users/mia",
        admin,
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!(
        call(&w.app, "GET", "/api/v1/whoami", w.token("member"), None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    call(
        &w.app,
        "PATCH",
        "/api/v1/users/mia",
        admin,
        Some(json!({"disabled": false})),
    )
    .await;
    assert_eq!(
        call(&w.app, "GET", "/api/v1/whoami", w.token("member"), None)
            .await
            .status,
        StatusCode::OK
    );
    // An admin may not lock themselves out.
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/users/root",
        admin,
        Some(json!({"disabled": true})),
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    // Role and team rules.
    let a = call(
        &w.app,
        "POST",
        "/api/v1/users",
        admin,
        Some(json!({"name": "x", "role": "finance", "team": "search"})),
    )
    .await;
    assert_eq!(
        (a.status, a.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("team"))
    );
    let a = call(
        &w.app,
        "POST",
        "/api/v1/users",
        admin,
        Some(json!({"name": "x", "role": "member"})),
    )
    .await;
    assert_eq!(
        (a.status, a.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("team"))
    );
    let a = call(
        &w.app,
        "POST",
        "/api/v1/users",
        admin,
        Some(json!({"name": "mia", "role": "member", "team": "search"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    // Team quota rules.
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/teams/ads",
        admin,
        Some(json!({"guaranteed_gpus": 40, "burst_gpus": 48})),
    )
    .await;
    assert_eq!(
        (a.status, a.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("guaranteed_gpus"))
    );
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/teams/ads",
        admin,
        Some(json!({"burst_gpus": 1})),
    )
    .await;
    assert_eq!(a.body["field"], "burst_gpus");
    let a = call(
        &w.app,
        "PATCH",
        "/api/v1/teams/ads",
        admin,
        Some(json!({"classes": ["batch", "batch"]})),
    )
    .await;
    assert_eq!(a.body["field"], "classes");
    // A class the team does not allow.
    call(
        &w.app,
        "PATCH",
        "/api/v1/teams/search",
        admin,
        Some(json!({"classes": ["batch"]})),
    )
    .await;
    let job = w.job(w.token("member").unwrap()).await;
    let a = call(
        &w.app,
        "PATCH",
        &format!("/api/v1/jobs/{job}"),
        w.token("lead"),
        Some(json!({"class": "production"})),
    )
    .await;
    assert_eq!(
        (a.status, a.body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("class"))
    );
}

#[tokio::test]
async fn the_openapi_document_has_every_route_and_only_routes() {
    let w = world().await;
    let doc = call(&w.app, "GET", "/api/v1/openapi.json", None, None)
        .await
        .body;
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let in_matrix: BTreeSet<(String, String)> = MATRIX
        .iter()
        .map(|r| (r.method.to_string(), r.route.to_string()))
        .collect();
    assert_eq!(
        documented, in_matrix,
        "the document's operations are the matrix's routes"
    );
    // Every documented operation is routed: none falls through to the
    // "no route" answer.
    for (method, path) in &documented {
        let concrete = path
            .replace("{id}", "x")
            .replace("{team}", "search")
            .replace("{user}", "mia");
        let a = call(&w.app, method, &concrete, w.token("admin"), None).await;
        let msg = a.body["error"].as_str().unwrap_or("");
        assert!(
            !msg.starts_with("no route") && a.status != StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}: {}",
            a.body
        );
    }
    let a = call(&w.app, "GET", "/api/v1/nothing", None, None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.body["error"].as_str().unwrap().starts_with("no route"));
    // Times say their clock.
    let text = doc.to_string();
    assert!(text.contains("wall time") && text.contains("cluster time"));
}

/// How many audit rows there are.
async fn audit_count(w: &World) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM audit_log")
        .fetch_one(&w.pool)
        .await
        .unwrap()
}
