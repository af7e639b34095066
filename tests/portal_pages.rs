//! The portal's pages for every user and for team leads (issue 47, items
//! 1, 3 and 6): the cluster overview, queues, submit, my team and a job,
//! rendered as each role sees them, through a cookie-keeping client
//! (`support::portal::Visitor`) against a real PostgreSQL. Two tests run
//! a worker (the cluster drawing and the estimated starts need its
//! published views); the others need none.

mod support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::api::{World, call, worker_options, world};
use support::portal::{Page, Visitor, encode_form, field_value};

/// A visitor signed in as `role` of the world.
async fn visitor(w: &World, role: &str) -> Visitor {
    let mut v = Visitor::new(w.app.clone());
    let page = v.sign_in(w.token(role).unwrap()).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    v
}

/// Submits through the API as `token` and gives the job's id.
async fn submit(w: &World, token: &str, body: Value) -> String {
    let a = call(&w.app, "POST", "/api/v1/jobs", Some(token), Some(body)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    a.body["id"].as_str().unwrap().to_string()
}

/// How many times `needle` occurs in a page.
fn count(page: &Page, needle: &str) -> usize {
    page.body.matches(needle).count()
}

/// The version a live region was rendered with (its `since=`).
fn since(page: &Page) -> String {
    let at = page.body.find("since=").expect("a live region") + 6;
    let rest = &page.body[at..];
    rest[..rest.find('"').unwrap()].to_string()
}

/// The message of an error page.
fn message(page: &Page) -> &str {
    let needle = "id=\"error-message\">";
    let at = page.body.find(needle).expect("an error page") + needle.len();
    let rest = &page.body[at..];
    &rest[..rest.find("</p>").unwrap()]
}

/// Posts a form as htmx does (the CSRF token in its header).
async fn htmx_post(v: &mut Visitor, path: &str, fields: &[(&str, &str)]) -> Page {
    let csrf = v.csrf.clone();
    v.send(
        "POST",
        path,
        Some(encode_form(fields)),
        &[("HX-Request", "true"), ("X-CSRF-Token", &csrf)],
    )
    .await
}

#[tokio::test]
async fn every_page_renders_for_each_role() {
    let w = world().await;
    let job = submit(
        &w,
        w.token("member").unwrap(),
        json!({"gpu": {"count": 1}, "duration": "1h", "name": "probe"}),
    )
    .await;
    for role in ["admin", "lead", "member", "viewer", "finance"] {
        let mut v = visitor(&w, role).await;
        for path in [
            "/".to_string(),
            "/queue".into(),
            "/submit".into(),
            "/team?team=search".into(),
            format!("/jobs/{job}"),
        ] {
            let page = v.get(&path).await;
            assert_eq!(page.status, StatusCode::OK, "{role} {path}: {}", page.body);
            // The footer names the cluster clock, labelled.
            assert!(
                page.body.contains("id=\"clock\">Cluster time"),
                "{role} {path}: {}",
                page.body
            );
            // No inline script or style: the CSP forbids them.
            for bad in ["<script>", " style=\"", " onclick="] {
                assert!(!page.body.contains(bad), "{role} {path} has {bad}");
            }
        }
        // No worker has published the cluster: the overview says so.
        let home = v.get("/").await;
        assert!(home.body.contains("id=\"no-cluster\""), "{}", home.body);
        // Every role but finance and admin sees search's queue as its own;
        // those two see every team's, the job among them.
        let queue = v.get("/queue").await;
        assert!(
            queue.body.contains(&format!("id=\"q-{job}\"")),
            "{role}: {}",
            queue.body
        );
        let submit_page = v.get("/submit").await;
        let can_submit = ["admin", "lead", "member"].contains(&role);
        assert_eq!(
            submit_page.body.contains("id=\"submit-form\""),
            can_submit,
            "{role}: {}",
            submit_page.body
        );
        let team = v.get("/team?team=search").await;
        assert!(
            team.body.contains(&format!("id=\"job-{job}\"")),
            "{role}: {}",
            team.body
        );
        let picker = team.body.contains("id=\"team-pick\"");
        assert_eq!(picker, role == "admin" || role == "finance", "{role}");
    }
}

#[tokio::test]
async fn a_member_sees_no_other_team() {
    let w = world().await;
    let ads_job = submit(
        &w,
        &w.ads_member,
        json!({"gpu": {"count": 1}, "duration": "1h"}),
    )
    .await;
    let mine = submit(&w, w.token("member").unwrap(), json!({"gpu": {"count": 1}})).await;
    let mut v = visitor(&w, "member").await;
    for path in ["/queue", "/team", "/team?team=ads", "/"] {
        let page = v.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        assert!(
            !page.body.contains(&ads_job),
            "{path} shows ads' job: {}",
            page.body
        );
    }
    let team = v.get("/team?team=ads").await;
    assert!(
        team.body.contains(&format!("id=\"job-{mine}\"")),
        "{}",
        team.body
    );
    assert!(team.body.contains("<h1>Team search</h1>"), "{}", team.body);
    let other = v.get(&format!("/jobs/{ads_job}")).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.body);
    let other = v.get("/queue?team=ads").await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.body);
    assert_eq!(
        message(&other),
        "team &#34;ads&#34; not found",
        "{}",
        other.body
    );
    // An admin sees both.
    let mut a = visitor(&w, "admin").await;
    let all = a.get("/queue").await;
    assert!(
        all.body.contains(&ads_job) && all.body.contains(&mine),
        "{}",
        all.body
    );
}

#[tokio::test]
async fn viewers_get_no_action_buttons_and_their_posts_are_refused() {
    let w = world().await;
    let job = w.job(w.token("lead").unwrap()).await;
    let mut v = visitor(&w, "viewer").await;
    let team = v.get("/team").await;
    assert!(
        team.body.contains(&format!("id=\"job-{job}\"")),
        "{}",
        team.body
    );
    let page = v.get(&format!("/jobs/{job}")).await;
    for p in [&team, &page] {
        for action in ["/cancel\"", "/move\"", "/class\"", "/requeue\""] {
            assert!(
                !p.body.contains(action),
                "a viewer sees {action}: {}",
                p.body
            );
        }
    }
    assert!(page.body.contains("id=\"no-actions\""), "{}", page.body);
    // Posted anyway (a form of their own): the API refuses, in words.
    for (path, fields) in [
        (format!("/jobs/{job}/cancel"), vec![]),
        (format!("/jobs/{job}/class"), vec![("class", "production")]),
        (format!("/jobs/{job}/requeue"), vec![]),
    ] {
        let mut all = fields.clone();
        all.push(("back", "/team"));
        let refused = v.post(&path, &all).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            refused.body
        );
        assert!(
            refused.body.contains("As a viewer you may not"),
            "{path}: {}",
            refused.body
        );
        assert!(!message(&refused).contains("/api/"), "{}", refused.body);
    }
    let posted = v
        .post(
            "/submit",
            &[
                ("kind", "training"),
                ("gpu_mode", "count"),
                ("gpu_count", "1"),
            ],
        )
        .await;
    assert_eq!(posted.status, StatusCode::FORBIDDEN, "{}", posted.body);
    assert!(
        posted.body.contains("As a viewer you may not"),
        "{}",
        posted.body
    );
    let a = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{job}"),
        w.token("lead"),
        None,
    )
    .await;
    assert_eq!(a.body["state"], "queued", "{}", a.body);
    assert_eq!(a.body["class"], "batch", "{}", a.body);
    assert_eq!(w.count("jobs").await, 1);
}

/// The submit form as a lead fills it in: a training gang of whole GPUs.
fn training(key: &str) -> Vec<(&'static str, String)> {
    vec![
        ("kind", "training".into()),
        ("team", "search".into()),
        ("project", "default".into()),
        ("class", "batch".into()),
        ("name", "llama finetune".into()),
        ("gpu_mode", "count".into()),
        ("gpu_count", "2".into()),
        ("tasks", "2".into()),
        ("gang", "2".into()),
        ("duration", "3h".into()),
        ("checkpoint_every", "30m".into()),
        ("idempotency_key", key.into()),
    ]
}

fn fields<'a>(f: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    f.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn the_submit_form_shows_every_error_together() {
    let w = world().await;
    let mut v = visitor(&w, "lead").await;
    v.get("/submit").await;
    let mut form = training("");
    for (k, val) in form.iter_mut() {
        match *k {
            // Two fields the form checks itself, and two only the API
            // knows are wrong: all four come back at once.
            "tasks" => *val = "two".into(),
            "gang" => *val = "-3".into(),
            "duration" => *val = "soon".into(),
            "checkpoint_every" => *val = "never".into(),
            _ => {}
        }
    }
    let page = v.post("/submit", &fields(&form)).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.body);
    for field in ["tasks", "gang", "duration", "checkpoint_every"] {
        assert!(
            page.body.contains(&format!("id=\"err-{field}\"")),
            "no error beside {field}: {}",
            page.body
        );
        assert!(
            page.body
                .contains(&format!("aria-describedby=\"err-{field}\"")),
            "{field} not marked invalid"
        );
    }
    assert!(page.body.contains("4 problems to fix"), "{}", page.body);
    assert!(page.body.contains("\"soon\""), "{}", page.body);
    // In words: no API paths, no field name in front of the message.
    assert!(!page.body.contains("/api/v1/jobs"), "{}", page.body);
    assert!(!page.body.contains("duration: "), "{}", page.body);
    // What was typed is kept.
    assert!(
        page.body.contains("value=\"llama finetune\""),
        "{}",
        page.body
    );
    assert_eq!(w.count("jobs").await, 0);
}

#[tokio::test]
async fn a_submit_posted_twice_with_one_key_makes_one_job() {
    let w = world().await;
    let mut v = visitor(&w, "lead").await;
    let form_page = v.get("/submit").await;
    let key = field_value(&form_page.body, "idempotency_key").expect("an idempotency key");
    assert!(key.starts_with("portal-"), "{key}");
    let form = training(&key);
    let first = v.post("/submit", &fields(&form)).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER, "{}", first.body);
    let second = v.post("/submit", &fields(&form)).await;
    assert_eq!(second.status, StatusCode::SEE_OTHER, "{}", second.body);
    let to = first.location().to_string();
    assert!(to.starts_with("/jobs/"), "{to}");
    let path = |l: &str| l.split('?').next().unwrap().to_string();
    assert_eq!(path(&to), path(second.location()));
    assert_eq!(w.count("jobs").await, 1);
    // The job's page, with the flash.
    let job = v.get(&to).await;
    assert_eq!(job.status, StatusCode::OK, "{}", job.body);
    assert!(
        job.body.contains("id=\"flash\">Submitted job"),
        "{}",
        job.body
    );
    assert!(job.body.contains("llama finetune"), "{}", job.body);
    let id = path(&to).trim_start_matches("/jobs/").to_string();
    let a = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{id}"),
        w.token("lead"),
        None,
    )
    .await;
    assert_eq!(a.body["gang"], 2, "{}", a.body);
    assert_eq!(a.body["tasks"].as_array().unwrap().len(), 2, "{}", a.body);
    assert_eq!(a.body["checkpoint_every"], "30m0s", "{}", a.body);
    // A fresh form has a fresh key: a second job is a second job.
    let again = v.get("/submit").await;
    assert_ne!(field_value(&again.body, "idempotency_key").unwrap(), key);
}

#[tokio::test]
async fn the_preview_is_in_the_first_get_and_follows_the_form() {
    let w = world().await;
    let mut v = visitor(&w, "member").await;
    let page = v.get("/submit").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("id=\"preview-body\""), "{}", page.body);
    assert!(page.body.contains("Each task asks for"), "{}", page.body);
    assert!(
        page.body.contains("hx-post=\"/submit/preview\""),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("input changed delay:300ms"),
        "{}",
        page.body
    );
    // As the user types: a fragment, not a page.
    let mut form = training("");
    form.retain(|(k, _)| *k != "idempotency_key");
    let part = htmx_post(&mut v, "/submit/preview", &fields(&form)).await;
    assert_eq!(part.status, StatusCode::OK, "{}", part.body);
    assert!(!part.body.contains("<html"), "{}", part.body);
    assert!(
        part.body.contains("<b>2</b> tasks, started together"),
        "{}",
        part.body
    );
    // A bad field: its error in words, in the preview.
    form.push(("gpu_count", "99".into()));
    form.retain(|(k, v)| *k != "gpu_count" || v == "99");
    let part = htmx_post(&mut v, "/submit/preview", &fields(&form)).await;
    assert!(
        part.body.contains("data-field=\"gpu_count\""),
        "{}",
        part.body
    );
    assert_eq!(w.count("jobs").await, 0);
}

#[tokio::test]
async fn a_long_queue_is_paged_and_its_live_part_resent_only_when_changed() {
    let w = world().await;
    let lead = w.token("lead").unwrap().to_string();
    let mut ids = Vec::new();
    for _ in 0..300 {
        ids.push(submit(&w, &lead, json!({"gpu": {"count": 1}, "duration": "1h"})).await);
    }
    let mut v = visitor(&w, "lead").await;
    let page = v.get("/queue").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(count(&page, "<tr id=\"q-"), 50, "one page of 50");
    assert!(
        page.body.contains("jobs 1–50 of 300 · page 1 of 6"),
        "{}",
        page.body
    );
    assert!(page.body.len() < 120_000, "{} bytes", page.body.len());
    let last = v.get("/queue?team=search&page=6").await;
    assert_eq!(count(&last, "<tr id=\"q-"), 50);
    assert!(last.body.contains("jobs 251–300 of 300"), "{}", last.body);
    assert!(last.body.contains(&format!("id=\"q-{}\"", ids[299])));
    assert!(!last.body.contains(&format!("id=\"q-{}\"", ids[0])));
    let past = v.get("/queue?team=search&page=99").await;
    assert!(past.body.contains("page 6 of 6"), "{}", past.body);
    // The team page pages its queue alike.
    let team = v.get("/team?page=2").await;
    assert_eq!(count(&team, "<tr id=\"job-"), 50, "{}", team.body);

    // The live part refreshes the visible page only, and only when it
    // changed: the same version is answered 204, as is its ETag.
    let version = since(&last);
    assert!(
        last.body
            .contains("hx-get=\"/fragments/queue?team=search&#38;page=6&#38;since="),
        "{}",
        last.body
    );
    let path = format!("/fragments/queue?team=search&page=6&since={version}");
    let same = v.get(&path).await;
    assert_eq!(same.status, StatusCode::NO_CONTENT, "{}", same.body);
    assert!(same.body.is_empty());
    let etag = format!("\"{version}\"");
    let same = v
        .send(
            "GET",
            "/fragments/queue?team=search&page=6",
            None,
            &[("If-None-Match", &etag)],
        )
        .await;
    assert_eq!(same.status, StatusCode::NO_CONTENT);
    // A change on the visible page (a job's class) is re-sent.
    let a = call(
        &w.app,
        "PATCH",
        &format!("/api/v1/jobs/{}", ids[280]),
        Some(&lead),
        Some(json!({"class": "production"})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let changed = v.get(&path).await;
    assert_eq!(changed.status, StatusCode::OK);
    assert_eq!(count(&changed, "<tr id=\"q-"), 50);
    assert!(changed.body.contains("c-production"), "{}", changed.body);
    assert!(!changed.body.contains("<html"), "a fragment");
    assert_ne!(since(&changed), version);
}

#[tokio::test]
async fn a_lead_changes_class_and_cancels_from_the_team_page() {
    let w = world().await;
    let lead = w.token("lead").unwrap().to_string();
    let a = w.job(&lead).await;
    let b = w.job(&lead).await;
    let mut v = visitor(&w, "lead").await;
    let team = v.get("/team").await;
    for action in ["move", "class", "cancel"] {
        assert!(
            team.body
                .contains(&format!("action=\"/jobs/{a}/{action}\"")),
            "{action}: {}",
            team.body
        );
    }
    // Without JavaScript: a 303 back to the team page with the outcome.
    let done = v
        .post(
            &format!("/jobs/{a}/class"),
            &[
                ("class", "production"),
                ("back", "/team?team=search&page=1"),
            ],
        )
        .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert!(
        done.location()
            .starts_with("/team?team=search&page=1&done="),
        "{}",
        done.location()
    );
    let back = v.get(done.location()).await;
    assert!(back.body.contains("is now production"), "{}", back.body);
    let got = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{a}"),
        Some(&lead),
        None,
    )
    .await;
    assert_eq!(got.body["class"], "production");
    // A class the team may not use: refused, in words, on the page.
    let refused = v
        .post(
            &format!("/jobs/{a}/class"),
            &[("class", "nonsense"), ("back", "/team")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::SEE_OTHER);
    assert!(
        refused.location().contains("refused="),
        "{}",
        refused.location()
    );
    // With htmx: the team's live region alone, the outcome in it.
    let part = htmx_post(
        &mut v,
        &format!("/jobs/{b}/cancel"),
        &[("back", "/team?team=search&page=1")],
    )
    .await;
    assert_eq!(part.status, StatusCode::OK, "{}", part.body);
    assert!(part.body.starts_with("<div id=\"team\""), "{}", part.body);
    assert!(
        part.body
            .contains("id=\"action-outcome\">Cancel asked for job"),
        "{}",
        part.body
    );
    // The worker cancels it at its next tick; the API has the request.
    let got = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{b}"),
        Some(&lead),
        None,
    )
    .await;
    assert!(got.body["cancel_requested_at"].is_string(), "{}", got.body);
    let page = v.get(&format!("/jobs/{b}")).await;
    assert!(page.body.contains("id=\"cancel-asked\""), "{}", page.body);
}

/// NEEDS POST /api/v1/jobs/{id}/move, which the lead engineer adds in
/// parallel (200 with the job; 409 when the job is already first or last
/// of its class in its team's queue): this test fails until that is
/// merged.
#[tokio::test]
async fn a_lead_moves_a_job_within_its_class() {
    let w = world().await;
    let lead = w.token("lead").unwrap().to_string();
    let first = w.job(&lead).await;
    let second = w.job(&lead).await;
    let mut v = visitor(&w, "lead").await;
    v.get("/team").await;
    let moved = v
        .post(
            &format!("/jobs/{second}/move"),
            &[("direction", "up"), ("back", "/team")],
        )
        .await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER, "{}", moved.body);
    assert!(moved.location().contains("done="), "{}", moved.location());
    // Now first of its class: up again is refused (409), in words.
    let again = htmx_post(
        &mut v,
        &format!("/jobs/{second}/move"),
        &[("direction", "up"), ("back", "/team")],
    )
    .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert!(
        again.body.contains("class=\"flash error\""),
        "{}",
        again.body
    );
    // The other is now last of its class: down is refused too, without
    // JavaScript as a flash on the page it came from.
    let down = v
        .post(
            &format!("/jobs/{first}/move"),
            &[("direction", "down"), ("back", "/team")],
        )
        .await;
    assert_eq!(down.status, StatusCode::SEE_OTHER, "{}", down.body);
    assert!(
        down.location().starts_with("/team?refused="),
        "{}",
        down.location()
    );
    // A member may not.
    let mut m = visitor(&w, "member").await;
    m.get("/team").await;
    let refused = m
        .post(
            &format!("/jobs/{first}/move"),
            &[("direction", "up"), ("back", "/team")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
}

/// Polls the API as `token` until `done` (at most 30 s).
async fn poll(w: &World, token: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let a = call(&w.app, "GET", path, Some(token), None).await;
        if a.status == StatusCode::OK && done(&a.body) {
            return a.body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{path}: {}",
            a.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn with_a_worker_the_cluster_is_drawn_and_estimated_starts_say_both_clocks() {
    let w = world().await;
    let member = w.token("member").unwrap().to_string();
    // 60 cluster seconds per wall second.
    let handle = partita::worker::spawn(w.pool.clone(), worker_options(60.0, "pages"));
    // search fills its burst (32 GPUs) with a gang; the next job waits.
    let gang = submit(
        &w,
        &member,
        json!({"gpu": {"count": 8}, "tasks": 4, "gang": 4, "duration": "1h"}),
    )
    .await;
    poll(&w, &member, &format!("/api/v1/jobs/{gang}"), |j| {
        j["state"] == "running"
    })
    .await;
    let waiting = submit(&w, &member, json!({"gpu": {"count": 1}, "duration": "10m"})).await;
    poll(&w, &member, "/api/v1/queue", |q| {
        q["teams"][0]["jobs"][0]["estimated_start"].is_string()
    })
    .await;

    let mut v = visitor(&w, "lead").await;
    let home = v.get("/").await;
    assert_eq!(home.status, StatusCode::OK);
    assert!(home.body.contains("class=\"node card\""), "{}", home.body);
    assert!(home.body.contains("id=\"gpu-states\""), "{}", home.body);
    assert!(
        home.body.contains("cluster minutes before now"),
        "{}",
        home.body
    );
    // The lead's own team's tasks are linked; the footer says the speed.
    assert!(
        home.body.contains(&format!("href=\"/jobs/{gang}\"")),
        "{}",
        home.body
    );
    assert!(home.body.contains("runs at 60× wall time"), "{}", home.body);
    assert!(
        home.body.contains("hx-trigger=\"every 5s\""),
        "{}",
        home.body
    );

    // The estimated start: cluster time, and the wall time it is.
    let queue = v.get("/queue").await;
    let row_at = queue
        .body
        .find(&format!("id=\"q-{waiting}\""))
        .expect("the waiting job");
    let row = &queue.body[row_at..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains(" cluster"), "{row}");
    assert!(row.contains("UTC wall"), "{row}");
    assert!(row.contains("quota"), "why it waits: {row}");
    // The quota table: search holds its gang's 32 GPUs, 16 beyond its
    // guarantee; an admin also reads who lends them.
    assert!(
        queue.body.contains(
            "<tr><td>search</td><td class=\"num\">16</td><td class=\"num\">32</td><td class=\"num\">32</td><td class=\"num\">16</td>"
        ),
        "{}",
        queue.body
    );
    assert!(
        !queue.body.contains("id=\"loans\""),
        "a lead reads no loans"
    );
    let mut admin = visitor(&w, "admin").await;
    let all = admin.get("/queue").await;
    assert!(
        all.body
            .contains("<b>search</b> borrows <b>16</b> GPUs from capacity no team is guaranteed"),
        "{}",
        all.body
    );
    let job = v.get(&format!("/jobs/{waiting}")).await;
    assert!(
        job.body.contains("id=\"job-estimate\">expected to start"),
        "{}",
        job.body
    );
    assert!(job.body.contains("UTC wall"), "{}", job.body);
    let team = v.get("/team").await;
    assert!(
        team.body.contains(&format!("id=\"job-{gang}\"")),
        "{}",
        team.body
    );

    handle.stop().await;
    // With the worker stopped, nothing changes: the overview's live part
    // is answered "unchanged".
    let home = v.get("/").await;
    let version = since(&home);
    let same = v.get(&format!("/fragments/overview?since={version}")).await;
    assert_eq!(same.status, StatusCode::NO_CONTENT, "{}", same.body);
    let other = v.get("/fragments/overview?since=0").await;
    assert_eq!(other.status, StatusCode::OK);
    assert!(
        other.body.starts_with("<div id=\"overview\""),
        "{}",
        other.body
    );
}

/// The inputs of a page that no label names: every `<input>` (but hidden
/// ones and buttons), `<select>` and `<textarea>` needs a `<label for>`
/// naming its id, an enclosing `<label>`, or an `aria-label`.
fn unlabelled(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for tag in ["<input", "<select", "<textarea"] {
        let mut from = 0;
        while let Some(at) = html[from..].find(tag) {
            let start = from + at;
            let end = start + html[start..].find('>').unwrap_or(0);
            let element = &html[start..=end];
            from = end + 1;
            let attr = |name: &str| {
                let key = format!(" {name}=\"");
                element.find(&key).map(|i| {
                    let rest = &element[i + key.len()..];
                    rest[..rest.find('"').unwrap_or(0)].to_string()
                })
            };
            let kind = attr("type").unwrap_or_default();
            if ["hidden", "submit", "button"].contains(&kind.as_str())
                || element.contains("aria-label=")
            {
                continue;
            }
            let by_for = attr("id").is_some_and(|id| {
                html.match_indices(&format!(" for=\"{id}\"")).any(|(i, _)| {
                    html[..i]
                        .rfind('<')
                        .is_some_and(|t| html[t..].starts_with("<label"))
                })
            });
            let enclosed = html[..start]
                .rfind("<label")
                .is_some_and(|l| !html[l..start].contains("</label>"));
            if !by_for && !enclosed {
                out.push(element.to_string());
            }
        }
    }
    out
}

#[tokio::test]
async fn every_input_of_every_page_has_a_label() {
    let w = world().await;
    let job = submit(&w, w.token("member").unwrap(), json!({"gpu": {"count": 1}})).await;
    let mut pages = vec![
        ("lead", "/".to_string()),
        ("lead", "/queue".into()),
        ("lead", "/submit".into()),
        ("lead", "/team".into()),
        ("lead", format!("/jobs/{job}")),
        ("lead", "/chargeback".into()),
        ("finance", "/chargeback".into()),
        ("admin", "/submit".into()),
        ("admin", "/team?team=search".into()),
    ];
    for admin_page in [
        "/admin/teams",
        "/admin/teams/search",
        "/admin/users",
        "/admin/tokens",
        "/admin/prices",
        "/admin/audit",
        "/admin/sso",
    ] {
        pages.push(("admin", admin_page.to_string()));
    }
    let mut checked = 0;
    for (role, path) in pages {
        let mut v = visitor(&w, role).await;
        let page = v.get(&path).await;
        assert_eq!(page.status, StatusCode::OK, "{role} {path}: {}", page.body);
        let missing = unlabelled(&page.body);
        assert!(
            missing.is_empty(),
            "{role} {path}: inputs without a label: {missing:#?}"
        );
        checked += page.body.matches("<input").count() + page.body.matches("<select").count();
    }
    assert!(
        checked > 50,
        "only {checked} inputs seen: the pages lost their forms?"
    );
    // The check itself finds an unlabelled input.
    assert_eq!(
        unlabelled("<form><input name=\"x\" id=\"x\"></form>").len(),
        1
    );
    assert!(unlabelled("<label for=\"x\">X</label><input id=\"x\">").is_empty());
    assert!(unlabelled("<label class=\"c\" for=\"x\">X</label><input id=\"x\">").is_empty());
    assert_eq!(unlabelled("<p for=\"x\">X</p><input id=\"x\">").len(), 1);
    assert!(unlabelled("<label>X <input name=\"x\"></label>").is_empty());
}

#[tokio::test]
async fn a_flash_shows_only_from_the_sessions_own_redirect() {
    let w = world().await;
    let job = submit(&w, w.token("member").unwrap(), json!({"gpu": {"count": 1}})).await;
    let mut lead = visitor(&w, "lead").await;
    // A link someone made, with a text of their choosing: no flash.
    let crafted = lead
        .get(&format!(
            "/jobs/{job}?refused=Your+session+expired%3A+sign+in+at+evil.example&tag=00"
        ))
        .await;
    assert_eq!(crafted.status, StatusCode::OK);
    assert!(!crafted.body.contains("evil.example"), "{}", crafted.body);
    assert!(!crafted.body.contains("id=\"flash\""), "{}", crafted.body);
    // The portal's own redirect after an action shows its outcome.
    lead.get(&format!("/jobs/{job}")).await;
    let moved = lead
        .post(
            &format!("/jobs/{job}/class"),
            &[("class", "production"), ("back", &format!("/jobs/{job}"))],
        )
        .await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER, "{}", moved.body);
    let location = moved.location().to_string();
    assert!(location.contains("tag="), "{location}");
    let shown = lead.get(&location).await;
    assert!(shown.body.contains("id=\"flash\""), "{}", shown.body);
    // The same link in another session shows nothing.
    let mut other = visitor(&w, "lead").await;
    let page = other.get(&location).await;
    assert!(!page.body.contains("id=\"flash\""), "{}", page.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_utilization_history_fills_without_anyone_looking() {
    let w = world().await;
    let handle = partita::worker::spawn(w.pool.clone(), worker_options(60.0, "sampler"));
    let samples = std::sync::Arc::new(partita::portal::pages::svg::Samples::default());
    partita::portal::pages::svg::spawn_sampler(
        w.pool.clone(),
        samples.clone(),
        std::time::Duration::from_millis(100),
    );
    let start = std::time::Instant::now();
    while samples.all().len() < 3 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "{} samples after 30 s",
            samples.all().len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let all = samples.all();
    assert!(
        all.windows(2).all(|p| p[0].at < p[1].at),
        "one sample per publication, in order"
    );
    handle.stop().await;
}
