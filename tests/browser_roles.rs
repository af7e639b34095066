//! The portal's roles in a real browser (issue 47, item 7): headless
//! Chromium (tests/support/browser.rs) against `partita`'s app on a real
//! port, everyone signing in through the real OpenID provider
//! (tests/support/oidc.rs) with their `groups` claim giving team and role,
//! and a real worker running the demo cluster, so that the cluster, queue
//! and team pages have something to show.
//!
//! - A team lead submits a training job by typing and clicking (the
//!   preview shows on load; Tab moves the focus, visibly), lands on the
//!   job's page, and with the team's burst full moves the last of three
//!   waiting jobs up on /team: the page's order and the database's follow.
//! - An admin edits a team's guarantee on /admin/teams: a bad value is
//!   refused beside its field and the row stays; a good one is saved.
//! - Finance downloads the chargeback CSV through the page's link (fetched
//!   in the page, with the session's cookie): the same bytes as the API's;
//!   finance has no Submit link and /admin/teams answers 403 in words.
//! - A member sees no move buttons; a viewer no action at all and no Submit
//!   link.
//!
//! Skipped when Chromium, chromedriver or Node.js is missing, unless CI is
//! set. Screenshots (overview, queue, submit, team, job as the lead;
//! admin-teams as the admin; chargeback as finance) go to docs/screenshots/
//! when env PARTITA_SCREENSHOTS is set:
//! `PARTITA_SCREENSHOTS=1 cargo test --test browser_roles`.

mod support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use fantoccini::Locator;
use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use serde_json::{Value, json};
use sqlx::PgPool;
use support::api::{World, call, worker_options, world};
use support::browser::{self, Browser};
use support::oidc::{self, Provider};

/// The provider's users and their groups: who signs in as what.
const USERS: &str = r#"{
    "lena": ["team:search", "role:lead"],
    "adam": ["role:admin"],
    "fiona": ["role:finance"],
    "max": ["team:search", "role:member"],
    "vera": ["team:search", "role:viewer"]
}"#;

/// How long the page or the worker may take to show what a step awaits.
const WAIT: Duration = Duration::from_secs(20);

async fn text(b: &Browser, id: &str) -> String {
    match b.find(Locator::Id(id)).await {
        Ok(e) => e.text().await.unwrap(),
        Err(e) => panic!("#{id}: {e}; the page:\n{}", b.source().await),
    }
}

async fn count(b: &Browser, css: &str) -> usize {
    b.find_all(Locator::Css(css)).await.unwrap().len()
}

async fn click(b: &Browser, css: &str) {
    b.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

/// Replaces what the input `#id` holds by typing `value`.
async fn type_into(b: &Browser, id: &str, value: &str) {
    let input = b
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"));
    input.clear().await.unwrap();
    input.send_keys(value).await.unwrap();
}

/// Runs `script` in the page and gives its value.
async fn js(b: &Browser, script: &str) -> Value {
    b.execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("script {script}: {e}"))
}

/// Signs `user` in through single sign-on, as a new browser would (the
/// cookies of the portal and the provider, both on 127.0.0.1, forgotten
/// first), and checks who the portal says is signed in.
async fn sign_in(b: &Browser, base: &str, user: &str, role: &str) {
    b.delete_all_cookies().await.unwrap();
    b.goto(&format!("{base}/auth/login?login_hint={user}&next=/"))
        .await;
    b.wait_for_url(WAIT, |u| u.as_str().starts_with(base) && u.path() == "/")
        .await;
    assert_eq!(text(b, "whoami").await, user, "{}", b.source().await);
    let shown = b
        .find(Locator::Css(".me .role"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(shown, role);
}

async fn submit(w: &World, token: &str, body: Value) -> String {
    let a = call(&w.app, "POST", "/api/v1/jobs", Some(token), Some(body)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    a.body["id"].as_str().unwrap().to_string()
}

async fn job(w: &World, id: &str) -> Value {
    let a = call(
        &w.app,
        "GET",
        &format!("/api/v1/jobs/{id}"),
        w.token("admin"),
        None,
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    a.body
}

/// Waits until `done` holds of the job `id` as the API shows it.
async fn await_job(w: &World, id: &str, what: &str, done: impl Fn(&Value) -> bool) {
    let start = Instant::now();
    loop {
        let j = job(w, id).await;
        if done(&j) {
            return;
        }
        assert!(start.elapsed() < WAIT, "job {id} is not {what}: {j}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The team's queued jobs of `class` in the scheduler's order, as the
/// database keeps it (as tests/queue_order.rs reads it).
async fn stored_order(pool: &PgPool, team: &str, class: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT j.id FROM jobs j JOIN teams t ON t.id = j.team_id
         WHERE t.name = $1 AND j.state = 'queued' AND j.class = $2
         ORDER BY COALESCE(j.queue_key, j.submitted_at), j.id COLLATE \"C\"",
    )
    .bind(team)
    .bind(class)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// The ids of the jobs in the team page's queue table, top to bottom.
async fn page_queue(b: &Browser) -> Vec<String> {
    let ids = js(
        b,
        "var t = document.querySelector('#team-queue table.jobs');
         return t ? Array.from(t.querySelectorAll('tbody tr[id^=\"job-\"]'))
             .map(function (r) { return r.id.slice(4); }) : [];",
    )
    .await;
    serde_json::from_value(ids).unwrap()
}

/// Reloads the page until `pred` holds of its queue; the last queue.
async fn await_page_queue(
    b: &Browser,
    what: &str,
    pred: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let start = Instant::now();
    loop {
        let q = page_queue(b).await;
        if pred(&q) {
            return q;
        }
        assert!(
            start.elapsed() < WAIT,
            "the team page's queue is {q:?}, not {what}; the page:\n{}",
            b.source().await
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.refresh().await.unwrap();
    }
}

/// `ids` in the order they appear in `order` (others left out).
fn among(order: &[String], ids: &[&str]) -> Vec<String> {
    order
        .iter()
        .filter(|id| ids.contains(&id.as_str()))
        .cloned()
        .collect()
}

/// Ledger rows charged to `team` so far.
async fn charged(pool: &PgPool, team: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM usage_ledger l JOIN teams t ON t.id = l.team_id WHERE t.name = $1",
    )
    .bind(team)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_in_chromium_leads_admins_finance_members_viewers() {
    if !browser::available() || !oidc::node_available() {
        return;
    }
    let started = Instant::now();
    let w = world().await;
    let admin = w.token("admin").unwrap().to_string();
    let lead = w.token("lead").unwrap().to_string();
    let member = w.token("member").unwrap().to_string();
    // A second project for search, to pick in the submit form.
    let p = call(
        &w.app,
        "POST",
        "/api/v1/teams/search/projects",
        Some(&admin),
        Some(json!({"name": "ranking"})),
    )
    .await;
    assert_eq!(p.status, StatusCode::CREATED, "{}", p.body);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let op = Provider::start(&[format!("{base}/auth/callback")], USERS);
    support::portal::serve_sso_app(&w.pool, listener, &base, &op.issuer());
    let worker = partita::worker::spawn(w.pool.clone(), worker_options(60.0, "browser"));

    // Usage for chargeback: short jobs of both teams that end within
    // seconds (the worker runs 60 cluster seconds a second), a long one
    // of ads; then search fills its burst (32 GPUs) with a gang, so that
    // what it submits next waits (for 3 cluster hours: 3 minutes here).
    let short = submit(
        &w,
        &member,
        json!({"gpu": {"count": 2}, "duration": "1m", "name": "smoke"}),
    )
    .await;
    let mut ads_short = Vec::new();
    for (gpus, model, minutes) in [(4, "A100-80GB", 3), (2, "H100-80GB", 2)] {
        let id = submit(
            &w,
            &w.ads_member,
            json!({"gpu": {"count": gpus, "models": [model]}, "duration": format!("{minutes}m")}),
        )
        .await;
        ads_short.push(id);
    }
    submit(
        &w,
        &w.ads_member,
        json!({"gpu": {"count": 4}, "duration": "1h", "name": "ads-embed"}),
    )
    .await;
    let gang = submit(
        &w,
        &member,
        json!({"gpu": {"count": 8}, "tasks": 4, "gang": 4, "duration": "3h", "name": "llm-pretrain"}),
    )
    .await;

    let b = Browser::start().await;

    // ---- The team lead.
    sign_in(&b, &base, "lena", "lead · search").await;
    await_job(&w, &short, "finished", |j| j["state"] == "succeeded").await;
    await_job(&w, &gang, "running", |j| j["state"] == "running").await;
    // Submit: the preview is there on load, before any edit.
    b.goto(&format!("{base}/submit")).await;
    let preview = b.find(Locator::Id("preview-body")).await.unwrap();
    assert!(preview.is_displayed().await.unwrap());
    assert!(
        preview.text().await.unwrap().contains("for team search"),
        "{}",
        b.source().await
    );
    // The keyboard: the first Tab reaches the skip link, which shows
    // itself; Tab from the name goes on to the image, and the focus is
    // drawn (an outline, :focus-visible).
    b.perform_actions(
        KeyActions::new("keyboard".into())
            .then(KeyAction::Down {
                value: Key::Tab.into(),
            })
            .then(KeyAction::Up {
                value: Key::Tab.into(),
            }),
    )
    .await
    .unwrap();
    let skip = js(
        &b,
        "var a = document.activeElement; var r = a.getBoundingClientRect();
         return [a.className, a.textContent, r.left >= 0 && r.top >= 0];",
    )
    .await;
    assert_eq!(skip, json!(["skip", "Skip to the content", true]));
    click(&b, "#name").await;
    b.find(Locator::Id("name"))
        .await
        .unwrap()
        .send_keys(&Key::Tab)
        .await
        .unwrap();
    let focused = js(
        &b,
        "var a = document.activeElement; var s = getComputedStyle(a);
         return [a.id, a.matches(':focus-visible'), s.outlineStyle, s.outlineWidth];",
    )
    .await;
    assert_eq!(focused, json!(["image", true, "solid", "3px"]));

    // A training job typed in: 2 tasks of 4 whole GPUs as a gang, class
    // best-effort, project ranking.
    type_into(&b, "name", "bert-finetune").await;
    click(&b, "#kind-training").await;
    click(&b, "#mode-count").await;
    type_into(&b, "gpu_count", "4").await;
    type_into(&b, "tasks", "2").await;
    type_into(&b, "gang", "2").await;
    type_into(&b, "duration", "30m").await;
    b.find(Locator::Id("class"))
        .await
        .unwrap()
        .select_by_label("best-effort")
        .await
        .unwrap();
    b.find(Locator::Id("project"))
        .await
        .unwrap()
        .select_by_label("ranking")
        .await
        .unwrap();
    // The preview follows the form (htmx, after a short pause).
    let start = Instant::now();
    loop {
        let p = text(&b, "preview").await;
        if p.contains("2 tasks, started together (gang)") && p.contains("project ranking") {
            assert!(p.contains("4 whole GPUs on one node"), "{p}");
            break;
        }
        assert!(start.elapsed() < WAIT, "the preview: {p}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.screenshot_to(browser::screenshot_path("submit.png"))
        .await;
    click(&b, "#submit").await;
    let landed = b
        .wait_for_url(WAIT, |u| u.path().starts_with("/jobs/"))
        .await;
    let trained = landed.path().trim_start_matches("/jobs/").to_string();
    assert_eq!(text(&b, "job-id").await, trained);
    let j = job(&w, &trained).await;
    assert_eq!(j["user"], "lena", "{j}");
    assert_eq!(j["class"], "best-effort", "{j}");
    assert_eq!(j["project"], "ranking", "{j}");
    assert_eq!(j["gang"], 2, "{j}");
    assert_eq!(j["tasks"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(j["gpus"], 8.0, "{j}");
    assert_eq!(j["state"], "queued", "the burst is full: {j}");
    // Its page says where it waits, and when it may start, once the
    // worker has cycled it.
    let start = Instant::now();
    while count(&b, "#job-estimate").await == 0 {
        assert!(start.elapsed() < WAIT, "{}", b.source().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.refresh().await.unwrap();
    }
    b.screenshot_to(browser::screenshot_path("job.png")).await;

    // Three more jobs wait behind the gang; the lead moves the last one up.
    let mut waiting = Vec::new();
    for name in ["eval-a", "eval-b", "eval-c"] {
        let id = submit(
            &w,
            &lead,
            json!({"gpu": {"count": 1}, "duration": "10m", "name": name}),
        )
        .await;
        waiting.push(id);
    }
    let (a, bb, c) = (
        waiting[0].as_str(),
        waiting[1].as_str(),
        waiting[2].as_str(),
    );
    assert_eq!(stored_order(&w.pool, "search", "batch").await, [a, bb, c]);
    b.goto(&format!("{base}/team")).await;
    await_page_queue(&b, "a, b, c", |q| {
        among(q, &[a, bb, c]) == [a, bb, c] && q.contains(&trained)
    })
    .await;
    assert_eq!(count(&b, "#team-queue form.move").await, 4);
    click(&b, &format!("#up-{c}")).await;
    // htmx answers the team's region with the outcome in it.
    let start = Instant::now();
    loop {
        let said = match b.find(Locator::Id("action-outcome")).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if said.contains(&format!("Job {c} moved up")) {
            break;
        }
        assert!(start.elapsed() < WAIT, "{}", b.source().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(b.current_url().await.path(), "/team", "no page load");
    assert_eq!(stored_order(&w.pool, "search", "batch").await, [a, c, bb]);
    await_page_queue(&b, "a, c, b", |q| among(q, &[a, bb, c]) == [a, c, bb]).await;
    // Each waiting job shows its estimated start once the worker's
    // projection (a thread of its own, every second or more) includes it.
    let start = Instant::now();
    while text(&b, "team-queue").await.contains("not projected") {
        assert!(start.elapsed() < WAIT, "{}", b.source().await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.refresh().await.unwrap();
    }
    assert_eq!(among(&page_queue(&b).await, &[a, bb, c]), [a, c, bb]);
    js(&b, "window.scrollTo(0, 0); return null;").await;
    b.screenshot_to(browser::screenshot_path("team.png")).await;
    b.goto(&format!("{base}/queue")).await;
    assert!(
        count(&b, "#queue-search").await == 1,
        "{}",
        b.source().await
    );
    b.screenshot_to(browser::screenshot_path("queue.png")).await;

    // The overview draws the cluster as the worker last published it:
    // the gang's 32 GPUs and ads' 4 among what is allocated.
    b.goto(&format!("{base}/")).await;
    let start = Instant::now();
    loop {
        // "75% allocated (36 GPUs)"
        let allocated = js(
            &b,
            "var e = document.getElementById('allocated');
             return e ? e.parentElement.textContent : '';",
        )
        .await;
        let allocated = allocated.as_str().unwrap_or_default().to_string();
        let gpus: f64 = allocated
            .split_once('(')
            .and_then(|(_, n)| n.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        if gpus >= 36.0 && count(&b, "article.node").await > 0 {
            break;
        }
        assert!(start.elapsed() < WAIT, "{allocated}: {}", b.source().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        b.refresh().await.unwrap();
    }
    assert_eq!(text(&b, "gpus").await, "48");
    b.screenshot_to(browser::screenshot_path("overview.png"))
        .await;

    // The worker stops once both teams have been charged, so that the
    // ledger stands still while finance compares the CSVs.
    for id in &ads_short {
        await_job(&w, id, "finished", |j| j["state"] == "succeeded").await;
    }
    worker.stop().await;
    assert!(charged(&w.pool, "search").await > 0);
    assert!(charged(&w.pool, "ads").await > 0);

    // ---- The admin: a team's guarantee, refused beside its field, then saved.
    sign_in(&b, &base, "adam", "admin").await;
    b.goto(&format!("{base}/admin/teams")).await;
    click(&b, "#edit-search").await;
    b.wait_for_url(WAIT, |u| u.path() == "/admin/teams/search")
        .await;
    let guarantee = || async {
        sqlx::query_scalar::<_, i64>("SELECT guarantee_milli FROM teams WHERE name = 'search'")
            .fetch_one(&w.pool)
            .await
            .unwrap()
    };
    let before = guarantee().await;
    assert_eq!(before, 16_000);
    // ads guarantees 8 of the cluster's 48 GPUs: 45 is too many.
    type_into(&b, "guaranteed_gpus", "45").await;
    click(&b, "#save-team").await;
    let err = b
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Id("guaranteed_gpus-error"))
        .await
        .unwrap();
    let said = err.text().await.unwrap();
    assert!(
        said.contains("more than the cluster's 48") && said.contains("at most 40"),
        "{said}"
    );
    // Beside its field: the error follows the input, which points at it.
    let beside = js(
        &b,
        "var i = document.getElementById('guaranteed_gpus');
         return [i.getAttribute('aria-invalid'), i.getAttribute('aria-describedby'),
                 i.parentElement.contains(document.getElementById('guaranteed_gpus-error'))];",
    )
    .await;
    assert_eq!(beside, json!(["true", "guaranteed_gpus-error", true]));
    assert_eq!(guarantee().await, before, "nothing saved");
    type_into(&b, "guaranteed_gpus", "20").await;
    click(&b, "#save-team").await;
    b.wait_for_url(WAIT, |u| u.path() == "/admin/teams").await;
    let row = js(
        &b,
        "return Array.from(document.querySelectorAll('#team-search td'))
             .slice(0, 3).map(function (td) { return td.textContent.trim(); });",
    )
    .await;
    assert_eq!(row, json!(["search", "20", "32"]));
    assert_eq!(guarantee().await, 20_000);
    b.screenshot_to(browser::screenshot_path("admin-teams.png"))
        .await;

    // ---- Finance: the CSV link gives the API's bytes.
    sign_in(&b, &base, "fiona", "finance").await;
    assert_eq!(count(&b, "header nav a[href='/submit']").await, 0);
    assert_eq!(count(&b, "header nav a[href='/admin']").await, 0);
    b.goto(&format!("{base}/chargeback?group_by=team&group_by=model"))
        .await;
    let report = text(&b, "report").await;
    assert!(
        report.contains("search") && report.contains("ads"),
        "{report}"
    );
    b.screenshot_to(browser::screenshot_path("chargeback.png"))
        .await;
    let href = b
        .find(Locator::Id("csv"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert!(href.starts_with("/chargeback.csv?month="), "{href}");
    let got = b
        .execute_async(
            "var done = arguments[arguments.length - 1];
             fetch(arguments[0], {credentials: 'same-origin'}).then(function (r) {
               return r.arrayBuffer().then(function (buf) {
                 done({status: r.status, type: r.headers.get('content-type'),
                       disposition: r.headers.get('content-disposition'),
                       bytes: Array.from(new Uint8Array(buf))});
               });
             }).catch(function (e) { done({error: String(e)}); });",
            vec![json!(href)],
        )
        .await
        .unwrap();
    assert_eq!(got["status"], 200, "{got}");
    let page_bytes: Vec<u8> = serde_json::from_value(got["bytes"].clone()).unwrap();
    let api_path = format!(
        "/api/v1/reports/chargeback?{}&format=csv",
        href.trim_start_matches("/chargeback.csv?")
    );
    let (status, ct, cd, api_bytes) = api_bytes(&w, &api_path, w.token("finance").unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        String::from_utf8_lossy(&page_bytes),
        String::from_utf8_lossy(&api_bytes)
    );
    assert_eq!(page_bytes, api_bytes, "byte for byte");
    assert_eq!(got["type"], ct);
    assert_eq!(got["disposition"], cd);
    let csv = String::from_utf8(page_bytes).unwrap();
    for team in ["search,", "ads,"] {
        assert!(csv.lines().any(|l| l.starts_with(team)), "{csv}");
    }
    assert!(csv.contains("\r\nTOTAL,"), "{csv}");
    // The admin pages are not finance's: 403, in words.
    let status = b
        .execute_async(
            "var done = arguments[arguments.length - 1];
             fetch('/admin/teams').then(function (r) { done(r.status); });",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(status, 403);
    b.goto(&format!("{base}/admin/teams")).await;
    let message = text(&b, "error-message").await;
    assert!(
        message.contains("for administrators only") && message.contains("fiona (finance)"),
        "{message}"
    );
    assert_eq!(count(&b, "#teams").await, 0);

    // ---- A member: the team's queue without move buttons.
    sign_in(&b, &base, "max", "member · search").await;
    assert_eq!(count(&b, "header nav a[href='/submit']").await, 1);
    b.goto(&format!("{base}/team")).await;
    let q = page_queue(&b).await;
    assert_eq!(among(&q, &[a, bb, c]), [a, c, bb], "{}", b.source().await);
    assert_eq!(count(&b, "#team-queue form.move").await, 0);
    assert_eq!(count(&b, "#team-queue button[id^='up-']").await, 0);
    assert_eq!(count(&b, "#team-queue form.priority").await, 0);
    assert!(
        text(&b, "member-note")
            .await
            .contains("Only the team's leads order the queue")
    );
    b.goto(&format!("{base}/jobs/{c}")).await;
    assert_eq!(count(&b, "#move-up").await, 0);

    // ---- A viewer: no actions anywhere, no Submit link.
    sign_in(&b, &base, "vera", "viewer · search").await;
    assert_eq!(count(&b, "header nav a[href='/submit']").await, 0);
    b.goto(&format!("{base}/team")).await;
    let q = page_queue(&b).await;
    assert_eq!(among(&q, &[a, bb, c]), [a, c, bb], "{}", b.source().await);
    assert_eq!(
        count(&b, "#team .actions button").await,
        0,
        "{}",
        b.source().await
    );
    assert_eq!(count(&b, "#team .actions form").await, 0);
    b.goto(&format!("{base}/jobs/{c}")).await;
    assert_eq!(count(&b, "#no-actions").await, 1, "{}", b.source().await);
    assert_eq!(count(&b, "main button").await, 0, "{}", b.source().await);
    b.goto(&format!("{base}/submit")).await;
    assert!(text(&b, "viewer-note").await.contains("cannot submit jobs"));
    assert_eq!(count(&b, "#submit-form").await, 0);

    b.close().await;
    eprintln!("every role in Chromium: {:?}", started.elapsed());
}

/// The API's answer as bytes, with its content type and disposition.
async fn api_bytes(w: &World, path: &str, token: &str) -> (StatusCode, String, String, Vec<u8>) {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;
    let req = Request::builder()
        .uri(path)
        .header("Authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = w.app.clone().oneshot(req).await.unwrap();
    let h = |n: &str| {
        response
            .headers()
            .get(n)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let (ct, cd) = (h("content-type"), h("content-disposition"));
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .unwrap();
    (status, ct, cd, bytes.to_vec())
}
