//! The admin and finance pages without a browser (`Visitor`), against a
//! real PostgreSQL: quotas edited (and refused, every problem beside its
//! field, nothing changed), every other role refused every admin page and
//! form, tokens issued (the secret shown once) and revoked, sessions
//! signed out, prices set from now on, the audit log; chargeback scoped
//! by role, its month picker, and its CSV byte for byte the API's.

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use partita::accounting::{self, Prices};
use support::api::{World, call, world};
use support::portal::{Page, Visitor};
use tower::ServiceExt;

/// A visitor signed in as `caller` (a World token name), on a page with
/// a CSRF token.
async fn visitor(w: &World, caller: &str) -> Visitor {
    let mut v = Visitor::new(w.app.clone());
    let page = v.sign_in(w.token(caller).unwrap()).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let home = v.get("/").await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    v
}

/// The text of the element with `id` up to its closing tag's start (no
/// nesting of the same tag): enough for the pages' error paragraphs.
fn element(body: &str, id: &str) -> String {
    let Some(at) = body.find(&format!("id=\"{id}\"")) else {
        return String::new();
    };
    let rest = &body[at..];
    let open_end = rest.find('>').unwrap() + 1;
    let close = rest[open_end..].find("</").unwrap();
    rest[open_end..open_end + close].to_string()
}

/// The part of a page between two markers.
fn between<'a>(body: &'a str, start: &str, end: &str) -> &'a str {
    let at = body
        .find(start)
        .unwrap_or_else(|| panic!("{start} in {body}"));
    let rest = &body[at..];
    &rest[..rest.find(end).unwrap()]
}

/// A team's quota row: (guarantee milli, burst milli, weight, classes,
/// business unit).
async fn team_row(w: &World, team: &str) -> (i64, i64, f64, Vec<String>, Option<String>) {
    sqlx::query_as(
        "SELECT t.guarantee_milli, t.burst_milli, t.weight, t.classes, b.name
         FROM teams t LEFT JOIN business_units b ON b.id = t.business_unit_id WHERE t.name = $1",
    )
    .bind(team)
    .fetch_one(&w.pool)
    .await
    .unwrap()
}

async fn count(w: &World, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(&w.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_admin_edits_a_quota_and_a_bad_edit_shows_every_problem_and_changes_nothing() {
    let w = world().await;
    let mut v = visitor(&w, "admin").await;
    let list = v.get("/admin/teams").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(list.body.contains("id=\"team-search\""), "{}", list.body);
    assert!(list.body.contains("next scheduling cycle"), "{}", list.body);
    assert!(list.body.contains("href=\"/admin/sso\""), "{}", list.body);
    let before = team_row(&w, "search").await;
    assert_eq!((before.0, before.1), (16_000, 32_000));

    let form = v.get("/admin/teams/search").await;
    assert_eq!(form.status, StatusCode::OK, "{}", form.body);
    assert!(
        form.body
            .contains("name=\"guaranteed_gpus\" id=\"guaranteed_gpus\" value=\"16\""),
        "{}",
        form.body
    );
    let saved = v
        .post(
            "/admin/teams/search",
            &[
                ("guaranteed_gpus", "20"),
                ("burst_gpus", "30.5"),
                ("weight", "2.5"),
                ("classes", "production"),
                ("classes", "batch"),
                ("business_unit", "research"),
            ],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    assert_eq!(saved.location(), "/admin/teams?saved=search");
    let after = team_row(&w, "search").await;
    assert_eq!(
        after,
        (
            20_000,
            30_500,
            2.5,
            vec!["production".to_string(), "batch".to_string()],
            Some("research".to_string())
        )
    );
    let list = v.get(saved.location()).await;
    assert!(
        element(&list.body, "flash").contains("next scheduling cycle"),
        "{}",
        list.body
    );

    // Burst below the guarantee and a negative weight: both shown, each
    // beside its field, and nothing changes.
    let audit_rows = count(&w, "SELECT count(*) FROM audit_log").await;
    let bad = v
        .post(
            "/admin/teams/search",
            &[
                ("guaranteed_gpus", "10"),
                ("burst_gpus", "5"),
                ("weight", "-1"),
                ("classes", "batch"),
                ("business_unit", "research"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let burst = element(&bad.body, "burst_gpus-error");
    let weight = element(&bad.body, "weight-error");
    assert!(burst.contains("below the guarantee"), "{}", bad.body);
    assert!(weight.contains("above 0"), "{}", bad.body);
    assert!(
        bad.body
            .contains("id=\"burst_gpus\" value=\"5\" aria-invalid=\"true\""),
        "the typed values stay: {}",
        bad.body
    );
    assert!(element(&bad.body, "guaranteed_gpus-error").is_empty());
    assert!(!bad.body.contains("/api/v1/teams"), "{}", bad.body);
    assert_eq!(team_row(&w, "search").await, after);
    assert_eq!(
        count(&w, "SELECT count(*) FROM audit_log").await,
        audit_rows
    );

    // Guarantees over the cluster (ads guarantees 8 of 48), no class, a
    // number that is not one.
    let bad = v
        .post(
            "/admin/teams/search",
            &[
                ("guaranteed_gpus", "41"),
                ("burst_gpus", "41"),
                ("weight", "two"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let g = element(&bad.body, "guaranteed_gpus-error");
    assert!(g.contains("add up to 49 GPUs"), "{g}");
    assert!(g.contains("at most 40"), "{g}");
    assert!(!element(&bad.body, "classes-error").is_empty());
    assert!(element(&bad.body, "weight-error").contains("not a number"));
    assert_eq!(team_row(&w, "search").await, after);

    // A project, and a bad one.
    let p = v
        .post("/admin/teams/search/projects", &[("project", "vision")])
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER, "{}", p.body);
    let n = count(
        &w,
        "SELECT count(*) FROM projects p JOIN teams t ON t.id = p.team_id
         WHERE t.name = 'search' AND p.name = 'vision'",
    )
    .await;
    assert_eq!(n, 1);
    let p = v
        .post("/admin/teams/search/projects", &[("project", "Vision 2")])
        .await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST);
    assert!(element(&p.body, "project-error").contains("lower-case"));
    let p = v
        .post("/admin/teams/search/projects", &[("project", "vision")])
        .await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST);
    assert!(element(&p.body, "project-error").contains("already has"));

    // A new team.
    let made = v
        .post(
            "/admin/teams",
            &[
                ("name", "speech"),
                ("guaranteed_gpus", "4"),
                ("burst_gpus", "12"),
                ("weight", "1"),
                ("classes", "batch"),
                ("business_unit", ""),
            ],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    assert_eq!(
        team_row(&w, "speech").await,
        (4000, 12_000, 1.0, vec!["batch".to_string()], None)
    );
    let dup = v
        .post(
            "/admin/teams",
            &[
                ("name", "speech"),
                ("guaranteed_gpus", "0"),
                ("burst_gpus", "1"),
                ("weight", "1"),
                ("classes", "batch"),
            ],
        )
        .await;
    assert_eq!(dup.status, StatusCode::BAD_REQUEST, "{}", dup.body);
    assert!(dup.body.contains("exists"), "{}", dup.body);

    // The audit log shows the edit, newest first, with what changed.
    let audit = v.get("/admin/audit").await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.body);
    let first_update = audit.body.find("team.update").unwrap();
    let first_create = audit.body.find("team.create").unwrap();
    assert!(first_create < first_update, "newest first: {}", audit.body);
    assert!(
        audit.body.contains("guaranteed_gpus: 16 → 20"),
        "{}",
        audit.body
    );
}

#[tokio::test]
async fn no_other_role_gets_an_admin_page_or_form() {
    let w = world().await;
    let pages = [
        "/admin",
        "/admin/teams",
        "/admin/teams/search",
        "/admin/users",
        "/admin/tokens",
        "/admin/prices",
        "/admin/audit",
    ];
    let posts: [(&str, &[(&str, &str)]); 8] = [
        (
            "/admin/teams/search",
            &[
                ("guaranteed_gpus", "1"),
                ("burst_gpus", "2"),
                ("weight", "1"),
                ("classes", "batch"),
            ],
        ),
        (
            "/admin/teams",
            &[
                ("name", "x"),
                ("guaranteed_gpus", "0"),
                ("burst_gpus", "1"),
                ("weight", "1"),
                ("classes", "batch"),
            ],
        ),
        ("/admin/teams/search/projects", &[("project", "p")]),
        ("/admin/users", &[("name", "eve"), ("role", "admin")]),
        ("/admin/users/mia", &[("role", "admin"), ("team", "")]),
        ("/admin/tokens", &[("user", "mia"), ("days", "1")]),
        ("/admin/tokens/1/revoke", &[]),
        (
            "/admin/prices",
            &[("currency", "USD"), ("model", "L4"), ("spot", "0")],
        ),
    ];
    let before = (
        team_row(&w, "search").await,
        count(&w, "SELECT count(*) FROM audit_log").await,
        count(
            &w,
            "SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL",
        )
        .await,
        count(&w, "SELECT count(*) FROM prices").await,
    );
    for caller in ["lead", "member", "viewer", "finance"] {
        let mut v = visitor(&w, caller).await;
        let home = v.get("/").await;
        assert!(
            !home.body.contains("href=\"/admin"),
            "{caller} sees no admin link: {}",
            home.body
        );
        for path in pages {
            let page = v.get(path).await;
            assert_eq!(page.status, StatusCode::FORBIDDEN, "{caller} {path}");
            assert!(
                element(&page.body, "error-message").contains("for administrators only"),
                "{caller} {path}: {}",
                page.body
            );
        }
        for (path, fields) in posts {
            v.get("/").await;
            let page = v.post(path, fields).await;
            assert_eq!(
                page.status,
                StatusCode::FORBIDDEN,
                "{caller} POST {path}: {}",
                page.body
            );
            assert!(
                page.body.contains("for administrators only"),
                "{}",
                page.body
            );
        }
    }
    let after = (
        team_row(&w, "search").await,
        count(&w, "SELECT count(*) FROM audit_log").await,
        count(
            &w,
            "SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL",
        )
        .await,
        count(&w, "SELECT count(*) FROM prices").await,
    );
    // The visitors' own sessions added tokens; nothing else changed.
    assert_eq!((before.0, before.1, before.3), (after.0, after.1, after.3));
    assert_eq!(after.2, before.2 + 4);
}

/// The value of the input with `id`.
fn input_value(body: &str, id: &str) -> String {
    let at = body
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("{id} in {body}"));
    let rest = &body[at..];
    let v = rest.find("value=\"").unwrap() + 7;
    rest[v..v + rest[v..].find('"').unwrap()].to_string()
}

#[tokio::test]
async fn a_token_is_shown_once_and_revoked_and_a_session_signed_out() {
    let w = world().await;
    let mut v = visitor(&w, "admin").await;
    assert_eq!(v.get("/admin/tokens").await.status, StatusCode::OK);
    let bad = v
        .post(
            "/admin/tokens",
            &[("user", ""), ("description", "x"), ("days", "0")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(!element(&bad.body, "user-error").is_empty());
    assert!(element(&bad.body, "days-error").contains("from 1 to 3650"));

    let issued = v
        .post(
            "/admin/tokens",
            &[("user", "mia"), ("description", "ci runner"), ("days", "7")],
        )
        .await;
    assert_eq!(issued.status, StatusCode::CREATED, "{}", issued.body);
    assert_eq!(
        issued.headers.get("cache-control").unwrap(),
        "no-store",
        "the secret is kept in no cache"
    );
    assert!(element(&issued.body, "once").contains("shown this once"));
    let secret = input_value(&issued.body, "secret");
    assert!(secret.starts_with("pt_"), "{secret}");
    let me = call(&w.app, "GET", "/api/v1/whoami", Some(&secret), None).await;
    assert_eq!(me.status, StatusCode::OK);
    assert_eq!(me.body["user"], "mia");
    let id = me.body["token_id"].as_str().unwrap().to_string();
    let expires: DateTime<Utc> =
        sqlx::query_scalar("SELECT expires_at FROM api_tokens WHERE id = $1::bigint")
            .bind(&id)
            .fetch_one(&w.pool)
            .await
            .unwrap();
    let days = (expires - Utc::now()).num_hours();
    assert!((7 * 24 - 1..=7 * 24).contains(&days), "{days} hours");

    // Never again: the list shows the token, not its secret.
    let list = v.get("/admin/tokens").await;
    assert!(
        list.body.contains(&format!("id=\"token-{id}\"")),
        "{}",
        list.body
    );
    assert!(!list.body.contains(&secret));
    let revoked = v.post(&format!("/admin/tokens/{id}/revoke"), &[]).await;
    assert_eq!(revoked.status, StatusCode::SEE_OTHER, "{}", revoked.body);
    let me = call(&w.app, "GET", "/api/v1/whoami", Some(&secret), None).await;
    assert_eq!(me.status, StatusCode::UNAUTHORIZED);
    let list = v.get(revoked.location()).await;
    assert!(
        between(&list.body, &format!("id=\"token-{id}\""), "</tr>").contains("revoked"),
        "{}",
        list.body
    );

    // A member's browser shows as a session; signing it out ends it.
    let mut member = visitor(&w, "member").await;
    let list = v.get("/admin/tokens").await;
    let sessions = between(&list.body, "id=\"sessions\"", "</table>");
    assert!(sessions.contains("mia"), "{sessions}");
    assert!(sessions.contains("(this browser)"), "{sessions}");
    let tokens = between(&list.body, "id=\"tokens\"", "</table>");
    assert!(!tokens.contains("portal session"), "{tokens}");
    let mia_session: i64 = sqlx::query_scalar(
        "SELECT s.token_id FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE u.name = 'mia' AND s.revoked_at IS NULL",
    )
    .fetch_one(&w.pool)
    .await
    .unwrap();
    assert!(sessions.contains(&format!("id=\"session-{mia_session}\"")));
    let out = v
        .post(&format!("/admin/tokens/{mia_session}/revoke"), &[])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.body);
    let gone = member.get("/").await;
    assert_eq!(
        gone.status,
        StatusCode::SEE_OTHER,
        "signed out: {}",
        gone.body
    );
    assert!(gone.location().starts_with("/signin"));
    // The admin is still in.
    assert_eq!(v.get("/admin/tokens").await.status, StatusCode::OK);
}

#[tokio::test]
async fn users_change_role_team_and_disabled_and_are_created() {
    let w = world().await;
    let mut v = visitor(&w, "admin").await;
    let list = v.get("/admin/users").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(list.body.contains("id=\"user-mia\""));
    let saved = v
        .post(
            "/admin/users/mia",
            &[("role", "lead"), ("team", "ads"), ("disabled", "yes")],
        )
        .await;
    assert_eq!(saved.status, StatusCode::SEE_OTHER, "{}", saved.body);
    let row: (String, String, bool) = sqlx::query_as(
        "SELECT u.role, t.name, u.disabled FROM users u JOIN teams t ON t.id = u.team_id
         WHERE u.name = 'mia'",
    )
    .fetch_one(&w.pool)
    .await
    .unwrap();
    assert_eq!(row, ("lead".into(), "ads".into(), true));
    // Finance with a team: refused beside the team; nothing changes.
    let bad = v
        .post("/admin/users/mia", &[("role", "finance"), ("team", "ads")])
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(element(&bad.body, "team-mia-error").contains("belongs to no team"));
    // The API's own refusal (an admin demoting themselves) shows beside
    // the role.
    let bad = v
        .post("/admin/users/root", &[("role", "finance"), ("team", "")])
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(
        element(&bad.body, "role-root-error").contains("may not demote"),
        "{}",
        bad.body
    );
    let made = v
        .post(
            "/admin/users",
            &[("name", "nora"), ("role", "viewer"), ("team", "search")],
        )
        .await;
    assert_eq!(made.status, StatusCode::SEE_OTHER, "{}", made.body);
    assert_eq!(
        count(
            &w,
            "SELECT count(*) FROM users WHERE name = 'nora' AND role = 'viewer'"
        )
        .await,
        1
    );
    let bad = v
        .post(
            "/admin/users",
            &[("name", "Nora"), ("role", "lead"), ("team", "")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(!element(&bad.body, "name-error").is_empty());
    assert!(element(&bad.body, "team-error").contains("needs a team"));
}

/// Ledger rows: (team's member token, model, tier, start, hours), each
/// charged at the built-in prices as the worker charges.
async fn charge(w: &World, holds: &[(&str, &str, &str, DateTime<Utc>, i64)]) {
    let prices = Prices::builtin();
    for (i, (token, model, tier, start, hours)) in holds.iter().enumerate() {
        let job = w.job(token).await;
        let end = *start + TimeDelta::hours(*hours);
        let hold = accounting::Hold {
            business_unit: String::new(),
            team: String::new(),
            project: String::new(),
            user: String::new(),
            model: model.to_string(),
            tier: tier.to_string(),
            class: "batch".into(),
            share: 7000,
            start: *start,
            end: Some(end),
        };
        let (share_ms, u) = accounting::charge(&hold, &prices).unwrap();
        sqlx::query(
            "INSERT INTO usage_ledger (hold_id, team_id, project_id, user_id, job_seq, task, node,
                gpu_index, gpu_model, gpu_share, capacity_tier, job_class, started_at, ended_at,
                share_ms, micro_gpu_hours, price_micros, cost_micros)
             SELECT $1, j.team_id, j.project_id, j.user_id, j.seq, 't0', 'node-1', 0, $3, 7000, $4,
                'batch', $5, $6, $7, $8, $9, $10
             FROM jobs j WHERE j.id = $2",
        )
        .bind(format!("hold-{i}"))
        .bind(&job)
        .bind(model)
        .bind(tier)
        .bind(*start)
        .bind(end)
        .bind(share_ms)
        .bind(u.micro_gpu_hours)
        .bind(prices.per_hour(model, tier))
        .bind(u.cost_micros)
        .execute(&w.pool)
        .await
        .unwrap();
    }
}

fn jan(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, day, 0, 0, 0).unwrap()
}

/// Usage of both teams in January and February 2026.
async fn usage(w: &World) {
    let (search, ads) = (w.token("member").unwrap().to_string(), w.ads_member.clone());
    charge(
        w,
        &[
            (&search, "H100-80GB", "on-demand", jan(3), 10),
            (&search, "A100-80GB", "spot", jan(10), 4),
            (&ads, "H100-80GB", "reserved", jan(20), 7),
            (&ads, "L4", "on-demand", jan(31) + TimeDelta::hours(20), 5),
            (
                &search,
                "H100-80GB",
                "on-demand",
                jan(31) + TimeDelta::days(3),
                2,
            ),
        ],
    )
    .await;
}

/// The API's answer as bytes, with its content type and disposition.
async fn api_bytes(w: &World, path: &str, token: &str) -> (StatusCode, String, String, Vec<u8>) {
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

fn header(p: &Page, name: &str) -> String {
    p.headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// The teams named in a chargeback page's table.
fn report_teams(body: &str) -> (bool, bool) {
    let table = between(body, "id=\"report\"", "</table>");
    (
        table.contains("<td>search</td>"),
        table.contains("<td>ads</td>"),
    )
}

#[tokio::test]
async fn finance_sees_every_team_and_a_lead_only_their_own() {
    let w = world().await;
    usage(&w).await;
    let q = "/chargeback?month=2026-01&group_by=team&group_by=model";
    let mut fin = visitor(&w, "finance").await;
    let page = fin.get(q).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(report_teams(&page.body), (true, true), "{}", page.body);
    let api = call(
        &w.app,
        "GET",
        "/api/v1/reports/chargeback?month=2026-01&group_by=team,model",
        w.token("finance"),
        None,
    )
    .await;
    assert_eq!(api.status, StatusCode::OK);
    assert_eq!(
        element(&page.body, "total-cost"),
        api.body["total"]["cost"].as_str().unwrap()
    );
    assert_eq!(api.body["rows"].as_array().unwrap().len(), 3);
    // The chart: one bar per row, drawn on the server.
    let chart = between(&page.body, "id=\"chart\"", "</svg>");
    assert_eq!(chart.matches("<rect x=").count(), 3, "{chart}");
    assert!(chart.contains("ads / H100-80GB"), "{chart}");
    // Finance may pick one team.
    let one = fin.get(&format!("{q}&team=ads")).await;
    assert_eq!(report_teams(&one.body), (false, true), "{}", one.body);

    let mut lead = visitor(&w, "lead").await;
    let page = lead.get(q).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(report_teams(&page.body), (true, false), "{}", page.body);
    assert!(!page.body.contains("ads / "), "{}", page.body);
    let other = lead.get(&format!("{q}&team=ads")).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "{}", other.body);
    assert!(!other.body.contains("<td>ads</td>"));
    let mut member = visitor(&w, "member").await;
    let page = member.get(q).await;
    assert_eq!(report_teams(&page.body), (true, false), "{}", page.body);
}

#[tokio::test]
async fn the_csv_download_is_the_apis_byte_for_byte() {
    let w = world().await;
    usage(&w).await;
    for caller in ["finance", "lead", "admin"] {
        let mut v = visitor(&w, caller).await;
        let page = v
            .get("/chargeback?month=2026-01&group_by=business_unit&group_by=team&group_by=project&group_by=tier")
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        // Follow the page's own link.
        let at = page.body.find("id=\"csv\"").unwrap();
        let start = page.body[..at].rfind("href=\"").unwrap() + 6;
        let href = page.body[start..start + page.body[start..].find('"').unwrap()]
            .replace("&#38;", "&")
            .replace("&amp;", "&");
        assert!(href.starts_with("/chargeback.csv?month=2026-01"), "{href}");
        let csv = v.get(&href).await;
        assert_eq!(csv.status, StatusCode::OK, "{}", csv.body);
        let api_path = format!(
            "/api/v1/reports/chargeback?{}&format=csv",
            href.trim_start_matches("/chargeback.csv?")
        );
        let (status, ct, cd, bytes) = api_bytes(&w, &api_path, w.token(caller).unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(csv.body.as_bytes(), bytes.as_slice(), "{caller}");
        assert_eq!(header(&csv, "content-type"), ct);
        assert_eq!(header(&csv, "content-disposition"), cd);
        assert!(cd.contains("2026-01-01T000000Z_2026-02-01T000000Z"), "{cd}");
        assert!(
            csv.body.contains("\r\nTOTAL,TOTAL,TOTAL,TOTAL,"),
            "{}",
            csv.body
        );
        // Scoped as the API scopes: a lead's CSV has no ads rows.
        assert_eq!(csv.body.contains(",ads,"), caller != "lead", "{}", csv.body);
    }
    // The default grouping and month, through the link without them.
    let mut fin = visitor(&w, "finance").await;
    let csv = fin.get("/chargeback.csv?month=2026-02").await;
    let (_, _, _, bytes) = api_bytes(
        &w,
        "/api/v1/reports/chargeback?month=2026-02&format=csv",
        w.token("finance").unwrap(),
    )
    .await;
    assert_eq!(csv.body.as_bytes(), bytes.as_slice());
}

#[tokio::test]
async fn the_month_picker_changes_the_period() {
    let w = world().await;
    usage(&w).await;
    let mut fin = visitor(&w, "finance").await;
    // The default month is the API's (the cluster's now).
    let default = fin.get("/chargeback").await;
    assert_eq!(default.status, StatusCode::OK, "{}", default.body);
    let api = call(
        &w.app,
        "GET",
        "/api/v1/reports/chargeback",
        w.token("finance"),
        None,
    )
    .await;
    let from: DateTime<Utc> = api.body["from"].as_str().unwrap().parse().unwrap();
    let month = from.format("%Y-%m").to_string();
    assert_eq!(input_value(&default.body, "month"), month);
    assert!(default.body.contains("id=\"g-business_unit\" checked"));

    let total = |body: &str| element(body, "total-cost");
    let jan_page = fin.get("/chargeback?month=2026-01").await;
    assert_eq!(input_value(&jan_page.body, "month"), "2026-01");
    assert_eq!(
        element(&jan_page.body, "period-span"),
        "2026-01-01T00:00:00Z – 2026-02-01T00:00:00Z"
    );
    let feb_page = fin.get("/chargeback?month=2026-02").await;
    assert_eq!(
        element(&feb_page.body, "period-span"),
        "2026-02-01T00:00:00Z – 2026-03-01T00:00:00Z"
    );
    let api_total = |m: &'static str| {
        let app = w.app.clone();
        let token = w.token("finance").unwrap().to_string();
        async move {
            call(
                &app,
                "GET",
                &format!("/api/v1/reports/chargeback?month={m}"),
                Some(&token),
                None,
            )
            .await
            .body["total"]["cost"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(total(&jan_page.body), api_total("2026-01").await);
    assert_eq!(total(&feb_page.body), api_total("2026-02").await);
    assert_ne!(total(&jan_page.body), total(&feb_page.body));
    // Previous and next month keep the grouping.
    let jan = fin.get("/chargeback?month=2026-02&group_by=team").await;
    let prev = between(&jan.body, "id=\"prev-month\"", ">").to_string();
    assert!(prev.contains("month=2026-01"), "{prev}");
    assert!(prev.contains("group_by=team"), "{prev}");
    // A month that is not one: said beside the picker.
    let bad = fin.get("/chargeback?month=2026-13").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(
        element(&bad.body, "month-error").contains("not a month"),
        "{}",
        bad.body
    );
}

#[tokio::test]
async fn a_price_applies_from_now_on_and_charged_rows_keep_theirs() {
    let w = world().await;
    usage(&w).await;
    let report = || async {
        call(
            &w.app,
            "GET",
            "/api/v1/reports/chargeback?month=2026-01",
            w.token("admin"),
            None,
        )
        .await
        .body["total"]["cost_micros"]
            .as_i64()
            .unwrap()
    };
    let charged = report().await;
    let mut v = visitor(&w, "admin").await;
    let page = v.get("/admin/prices").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("id=\"model-H100-80GB\""),
        "{}",
        page.body
    );
    // A bad price and a currency that is not one: both beside their fields.
    let bad = v
        .post(
            "/admin/prices",
            &[
                ("currency", "dollars"),
                ("model", "H100-80GB"),
                ("reserved", "2.5"),
                ("on_demand", "lots"),
                ("spot", "1.8"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(element(&bad.body, "currency-error").contains("three-letter"));
    assert!(element(&bad.body, "price-0-on-demand-error").contains("not a number"));
    assert_eq!(count(&w, "SELECT count(*) FROM prices").await, 0);

    let set = v
        .post(
            "/admin/prices",
            &[
                ("currency", "USD"),
                ("model", "H100-80GB"),
                ("reserved", "2.5"),
                ("on_demand", "4"),
                ("spot", "1.25"),
                ("model", "B200"),
                ("reserved", "6"),
                ("on_demand", ""),
                ("spot", ""),
            ],
        )
        .await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);
    assert_eq!(set.location(), "/admin/prices?saved=2");
    let prices = call(&w.app, "GET", "/api/v1/prices", w.token("member"), None).await;
    let price = |m: &str, t: &str| {
        prices.body["prices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["model"] == m && p["tier"] == t)
            .map(|p| p["price"].as_f64().unwrap())
    };
    assert_eq!(price("H100-80GB", "spot"), Some(1.25));
    assert_eq!(price("H100-80GB", "on-demand"), Some(4.0));
    assert_eq!(price("B200", "reserved"), Some(6.0));
    // Only what changed became a row; the charged ledger is as it was.
    assert_eq!(count(&w, "SELECT count(*) FROM prices").await, 2);
    assert_eq!(report().await, charged);
    assert_eq!(
        count(
            &w,
            "SELECT count(*) FROM audit_log WHERE action = 'prices.update'"
        )
        .await,
        1
    );
    let audit = v.get("/admin/audit").await;
    let row = between(&audit.body, "prices.update", "</tr>");
    assert!(row.contains("H100-80GB/spot: 1.8 → 1.25"), "{row}");
    assert!(row.contains("B200/reserved: none → 6"), "{row}");
    assert!(!row.contains("H100-80GB/reserved"), "{row}");
    // The API refuses another currency that would leave models behind.
    let a = call(
        &w.app,
        "PUT",
        "/api/v1/prices",
        w.token("admin"),
        Some(serde_json::json!({"currency": "EUR", "prices": [{"model": "L4", "tier": "spot", "price": 0.3}]})),
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{}", a.body);
    assert_eq!(a.body["field"], "currency");
    assert_eq!(count(&w, "SELECT count(*) FROM prices").await, 2);
}

#[tokio::test]
async fn put_prices_checks_each_row_and_names_the_field() {
    let w = world().await;
    for (body, field, words) in [
        (r#"{"currency": "USD", "prices": []}"#, "prices", "empty"),
        (
            r#"{"currency": "usd", "prices": [{"model": "L4", "tier": "spot", "price": 1}]}"#,
            "currency",
            "three-letter",
        ),
        (
            r#"{"currency": "USD", "prices": [{"model": "L4", "tier": "cheap", "price": 1}]}"#,
            "prices",
            "prices[0].tier",
        ),
        (
            r#"{"currency": "USD", "prices": [{"model": "L4", "tier": "spot", "price": -1}]}"#,
            "prices",
            "prices[0].price",
        ),
        (
            r#"{"currency": "USD", "prices": [{"model": "L4", "tier": "spot", "price": 1}, {"model": "L4", "tier": "spot", "price": 2}]}"#,
            "prices",
            "twice",
        ),
        (
            r#"{"currency": "USD", "prices": [{"model": "L 4", "tier": "spot", "price": 1}]}"#,
            "prices",
            "without spaces",
        ),
        (
            r#"{"currency": "USD", "prices": [{"model": "L4", "tier": "spot", "price": 1, "extra": 1}]}"#,
            "",
            "extra",
        ),
    ] {
        let a = support::api::call_raw(
            &w.app,
            "PUT",
            "/api/v1/prices",
            w.token("admin"),
            Some(body.as_bytes().to_vec()),
            &[("Content-Type", "application/json")],
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}: {}", a.body);
        if !field.is_empty() {
            assert_eq!(a.body["field"], field, "{body}: {}", a.body);
        }
        assert!(
            a.body["error"].as_str().unwrap().contains(words),
            "{body}: {}",
            a.body
        );
    }
    assert_eq!(count(&w, "SELECT count(*) FROM prices").await, 0);
    // A whole new currency, every model and tier given: accepted, and the
    // table is in it.
    let all = call(&w.app, "GET", "/api/v1/prices", w.token("admin"), None).await;
    let mut rows = all.body["prices"].as_array().unwrap().clone();
    for r in &mut rows {
        r["price"] = serde_json::json!(1.5);
    }
    let a = call(
        &w.app,
        "PUT",
        "/api/v1/prices",
        w.token("admin"),
        Some(serde_json::json!({"currency": "EUR", "prices": rows})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(a.body["currency"], "EUR");
    assert!(
        a.body["prices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["price"] == 1.5),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn the_audit_log_pages_newest_first() {
    let w = world().await;
    sqlx::query(
        "INSERT INTO audit_log (actor, action, target_kind, target)
         SELECT 'root', 'test.step', 'step', g::text FROM generate_series(1, 60) AS g",
    )
    .execute(&w.pool)
    .await
    .unwrap();
    // Two from the world (its teams), then these 60: 62 rows.
    let mut v = visitor(&w, "admin").await;
    let first = v.get("/admin/audit").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body.matches("<tr id=\"audit-").count(), 50);
    let seqs: Vec<i64> = first
        .body
        .split("<tr id=\"audit-")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|p| p[0] > p[1]),
        "newest first: {seqs:?}"
    );
    assert_eq!(seqs[0], 62);
    let older = between(&first.body, "id=\"older\"", ">").to_string();
    let at = first.body.find("id=\"older\"").unwrap();
    let start = first.body[..at].rfind("href=\"").unwrap() + 6;
    let href = first.body[start..start + first.body[start..].find('"').unwrap()].to_string();
    assert_eq!(href, "/admin/audit?after=13", "{older}");
    let second = v.get(&href).await;
    assert_eq!(second.body.matches("<tr id=\"audit-").count(), 12);
    assert!(second.body.contains("id=\"audit-1\""));
    assert!(!second.body.contains("id=\"older\""));
    assert!(second.body.contains("id=\"newest\""));
}

#[tokio::test]
async fn guarantees_are_checked_against_the_cluster_the_worker_published() {
    let w = world().await;
    // A worker published a cluster of 30 GPUs (the server's own shape
    // has 48).
    let view = partita::worker::views::ClusterView {
        cluster: partita::api::Cluster {
            clock: partita::api::Clock {
                now: Utc::now(),
                speed: 1.0,
            },
            gpus: 30,
            utilization: Default::default(),
            nodes: Vec::new(),
        },
        gauges: Default::default(),
    };
    sqlx::query(
        "INSERT INTO worker_views (kind, team, worker_id, cluster_time, speed, published_at, body)
         VALUES ('cluster', '', 'w1', now(), 1, now(), $1)",
    )
    .bind(serde_json::to_value(&view).unwrap())
    .execute(&w.pool)
    .await
    .unwrap();
    let mut v = visitor(&w, "admin").await;
    let list = v.get("/admin/teams").await;
    assert!(
        element(&list.body, "cluster-gpus").contains("30 GPUs"),
        "{}",
        list.body
    );
    let before = team_row(&w, "search").await;
    let bad = v
        .post(
            "/admin/teams/search",
            &[
                ("guaranteed_gpus", "24"),
                ("burst_gpus", "28"),
                ("weight", "1"),
                ("classes", "batch"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let g = element(&bad.body, "guaranteed_gpus-error");
    assert!(
        g.contains("add up to 32 GPUs, more than the cluster"),
        "{g}"
    );
    assert!(g.contains("30: the other teams guarantee 8"), "{g}");
    assert!(g.contains("at most 22"), "{g}");
    assert_eq!(team_row(&w, "search").await, before);
    let ok = v
        .post(
            "/admin/teams/search",
            &[
                ("guaranteed_gpus", "22"),
                ("burst_gpus", "28"),
                ("weight", "1"),
                ("classes", "batch"),
            ],
        )
        .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    assert_eq!(team_row(&w, "search").await.0, 22_000);
}
