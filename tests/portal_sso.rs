//! Single sign-on without a browser: the portal in-process (the Visitor of
//! tests/support/portal.rs) against the real OpenID provider of
//! tests/oidc (npm `oidc-provider`), whose redirects the test follows over
//! HTTP with the provider's own cookies (op_*), as a browser would. The
//! same flow in Chromium is in tests/browser.rs.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use partita::portal::Config;
use partita::portal::sso::{Secret, Settings, Sso};
use partita::server::AppState;
use serde_json::Value;
use sqlx::PgPool;
use support::api::world;
use support::oidc::{self, Provider};
use support::portal::{Page, Visitor};
use url::Url;

/// Where the provider sends the browser back. Nothing listens there: the
/// test takes the URL and hands its path to the in-process app.
const PUBLIC: &str = "http://127.0.0.1:9";

fn callback() -> String {
    format!("{PUBLIC}/auth/callback")
}

/// The users the provider knows, with their groups.
const USERS: &str = r#"{
    "lena": ["team:search", "role:lead"],
    "leo": ["team:ads"],
    "nora": ["role:member"],
    "ghost": ["team:nowhere", "role:lead"],
    "fay": ["role:finance", "team:search"]
}"#;

/// The browser's side at the provider: its cookies (op_*), kept across
/// requests.
#[derive(Default)]
struct OpAgent {
    cookies: BTreeMap<String, String>,
}

impl OpAgent {
    async fn get(&mut self, url: &str) -> (u16, String, String) {
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let mut req = hyper::Request::builder().method("GET").uri(url);
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header("cookie", jar.join("; "));
        }
        let resp = tokio::time::timeout(
            Duration::from_secs(30),
            client.request(req.body(Full::new(Bytes::new())).unwrap()),
        )
        .await
        .expect("the provider answers in 30 s")
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        for set in resp.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || set.contains("1970") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.into(), value.into());
            }
        }
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            location,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    /// Follows the provider's redirects from `url` until one leaves it:
    /// that URL.
    async fn follow(&mut self, issuer: &str, url: &str) -> String {
        let mut url = url.to_string();
        for _ in 0..20 {
            if !url.starts_with(issuer) {
                return url;
            }
            let (status, location, body) = self.get(&url).await;
            assert!(
                (300..400).contains(&status),
                "the provider answered {status} at {url}: {body}"
            );
            url = Url::parse(&url)
                .unwrap()
                .join(&location)
                .unwrap()
                .to_string();
        }
        panic!("more than 20 redirects at the provider");
    }
}

/// Starts a sign-in at the portal as `hint` and goes through the
/// provider: the callback URL it sends the browser back to.
async fn to_callback(v: &mut Visitor, op: &Provider, agent: &mut OpAgent, hint: &str) -> String {
    let start = v
        .get(&format!("/auth/login?login_hint={hint}&next=/%3Fwelcome"))
        .await;
    assert_eq!(start.status, StatusCode::SEE_OTHER, "{}", start.body);
    assert!(
        start.location().starts_with(&op.issuer()),
        "to the provider: {}",
        start.location()
    );
    let to = Url::parse(start.location()).unwrap();
    let q: BTreeMap<String, String> = to.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["login_hint"], hint);
    assert_eq!(q["client_id"], oidc::CLIENT_ID);
    assert_eq!(q["redirect_uri"], callback());
    assert!(!q["state"].is_empty() && !q["nonce"].is_empty());
    assert!(v.cookies.contains_key("partita_sso"), "{:?}", v.cookies);
    let back = agent.follow(&op.issuer(), start.location()).await;
    assert!(back.starts_with(&callback()), "back to the portal: {back}");
    back
}

/// A whole sign-in: the portal's answer to the callback.
async fn sso_login(v: &mut Visitor, op: &Provider, agent: &mut OpAgent, hint: &str) -> Page {
    let back = to_callback(v, op, agent, hint).await;
    v.get(&back[PUBLIC.len()..]).await
}

async fn user(pool: &PgPool, name: &str) -> Option<(String, Option<String>, Option<String>)> {
    sqlx::query_as(
        "SELECT u.role, t.name, u.external_subject FROM users u
         LEFT JOIN teams t ON t.id = u.team_id WHERE u.name = $1",
    )
    .bind(name)
    .fetch_optional(pool)
    .await
    .unwrap()
}

async fn audit(pool: &PgPool, action: &str) -> Vec<(String, Option<Value>, Option<Value>)> {
    sqlx::query_as("SELECT target, before, after FROM audit_log WHERE action = $1 ORDER BY seq")
        .bind(action)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_first_sso_login_creates_the_user_and_later_ones_follow_the_claims() {
    if !oidc::node_available() {
        return;
    }
    let w = world().await;
    let op = Provider::start(&[callback()], USERS);
    let app = support::portal::sso_app(&w.pool, PUBLIC, &op.issuer());

    // The sign-in page offers SSO.
    let mut v = Visitor::new(app.clone());
    let signin = v.get("/signin?next=/queue").await;
    assert!(signin.body.contains("id=\"sso\""), "{}", signin.body);
    assert!(signin.body.contains("/auth/login?next="), "{}", signin.body);

    let mut agent = OpAgent::default();
    let page = sso_login(&mut v, &op, &mut agent, "lena").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(page.location(), "/?welcome");
    assert!(
        !v.cookies.contains_key("partita_sso"),
        "the sign-in's cookie is spent"
    );
    let set: Vec<String> = page
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().to_string())
        .collect();
    let session = set
        .iter()
        .find(|c| c.starts_with("partita_session="))
        .expect("a session cookie");
    assert!(
        session.contains("HttpOnly") && session.contains("SameSite=Lax"),
        "{session}"
    );

    let home = v.get("/").await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    assert!(home.body.contains("id=\"whoami\">lena<"), "{}", home.body);
    assert!(home.body.contains("lead · search"), "{}", home.body);
    assert_eq!(
        user(&w.pool, "lena").await,
        Some(("lead".into(), Some("search".into()), Some("lena".into())))
    );
    let issuer: String =
        sqlx::query_scalar("SELECT external_issuer FROM users WHERE name = 'lena'")
            .fetch_one(&w.pool)
            .await
            .unwrap();
    assert_eq!(issuer, op.issuer());
    let via: Vec<(String, bool)> = sqlx::query_as(
        "SELECT s.via, s.sso_id_token IS NOT NULL FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE u.name = 'lena'",
    )
    .fetch_all(&w.pool)
    .await
    .unwrap();
    assert_eq!(via, vec![("sso".to_string(), true)]);
    let created = audit(&w.pool, "user.sso_create").await;
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].0, "lena");
    assert_eq!(created[0].2.as_ref().unwrap()["role"], "lead");
    assert_eq!(created[0].2.as_ref().unwrap()["team"], "search");

    // A name taken by a user who is not this identity: made unique.
    let mut v2 = Visitor::new(app.clone());
    let page = sso_login(&mut v2, &op, &mut OpAgent::default(), "leo").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(
        user(&w.pool, "leo-2").await,
        Some(("member".into(), Some("ads".into()), Some("leo".into())))
    );
    assert_eq!(
        user(&w.pool, "leo").await.unwrap().0,
        "lead",
        "the other leo is untouched"
    );

    // Admin and finance have no team, whatever the claim says.
    let page = sso_login(
        &mut Visitor::new(app.clone()),
        &op,
        &mut OpAgent::default(),
        "fay",
    )
    .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(user(&w.pool, "fay").await.unwrap().0, "finance");
    assert_eq!(user(&w.pool, "fay").await.unwrap().1, None);

    // An admin adds a rule: `team:search` now makes a viewer of `ads`. At
    // lena's next sign-in her role and team follow, in the audit log.
    let mut root = Visitor::new(app.clone());
    root.sign_in(w.token("admin").unwrap()).await;
    root.get("/admin/sso").await;
    let added = root
        .post(
            "/admin/sso/rules",
            &[
                ("claim_value", "team:search"),
                ("team", "ads"),
                ("role", "viewer"),
            ],
        )
        .await;
    assert_eq!(added.status, StatusCode::SEE_OTHER, "{}", added.body);

    let mut v3 = Visitor::new(app.clone());
    let page = sso_login(&mut v3, &op, &mut agent, "lena").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(
        user(&w.pool, "lena").await,
        Some(("viewer".into(), Some("ads".into()), Some("lena".into())))
    );
    let updated = audit(&w.pool, "user.sso_update").await;
    assert_eq!(updated.len(), 1, "{updated:?}");
    assert_eq!(updated[0].0, "lena");
    assert_eq!(updated[0].1.as_ref().unwrap()["role"], "lead");
    assert_eq!(updated[0].1.as_ref().unwrap()["team"], "search");
    assert_eq!(updated[0].2.as_ref().unwrap()["role"], "viewer");
    assert_eq!(updated[0].2.as_ref().unwrap()["team"], "ads");
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM users WHERE external_subject = 'lena'")
            .fetch_one(&w.pool)
            .await
            .unwrap();
    assert_eq!(count, 1, "the same user, not a new one");
    // The same sign-in again changes nothing: no second update.
    sso_login(&mut Visitor::new(app.clone()), &op, &mut agent, "lena").await;
    assert_eq!(audit(&w.pool, "user.sso_update").await.len(), 1);
}

#[tokio::test]
async fn a_tampered_or_replayed_callback_is_refused() {
    if !oidc::node_available() {
        return;
    }
    let w = world().await;
    let op = Provider::start(&[callback()], USERS);
    let app = support::portal::sso_app(&w.pool, PUBLIC, &op.issuer());
    let mut v = Visitor::new(app.clone());
    let mut agent = OpAgent::default();

    // The state changed on the way back: refused, no session, and the
    // sign-in is spent (the right state does not work after that either).
    let back = to_callback(&mut v, &op, &mut agent, "lena").await;
    let mut tampered = Url::parse(&back).unwrap();
    let pairs: Vec<(String, String)> = tampered.query_pairs().into_owned().collect();
    tampered.query_pairs_mut().clear();
    for (k, val) in &pairs {
        let val = if k == "state" {
            format!("{val}x")
        } else {
            val.clone()
        };
        tampered.query_pairs_mut().append_pair(k, &val);
    }
    let page = v.get(&tampered.as_str()[PUBLIC.len()..]).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.body);
    assert!(
        page.body.contains("does not belong to the sign-in"),
        "{}",
        page.body
    );
    assert!(!v.cookies.contains_key("partita_session"));
    let replay = v.get(&back[PUBLIC.len()..]).await;
    assert_eq!(replay.status, StatusCode::BAD_REQUEST, "{}", replay.body);
    assert!(!v.cookies.contains_key("partita_session"));

    // A callback in a browser that did not start the sign-in (no cookie,
    // or another one): refused.
    let back = to_callback(&mut v, &op, &mut agent, "lena").await;
    let mut stranger = Visitor::new(app.clone());
    let page = stranger.get(&back[PUBLIC.len()..]).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.body);
    assert!(
        page.body.contains("did not start in this browser"),
        "{}",
        page.body
    );
    stranger
        .cookies
        .insert("partita_sso".into(), "not-the-one".into());
    let page = stranger.get(&back[PUBLIC.len()..]).await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST, "{}", page.body);
    assert!(!stranger.cookies.contains_key("partita_session"));
    // The browser that started it gets in with it still.
    let page = v.get(&back[PUBLIC.len()..]).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert!(v.cookies.contains_key("partita_session"));

    // An error from the provider is shown in words.
    let start = v.get("/auth/login?login_hint=lena").await;
    let state = Url::parse(start.location())
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned();
    let page = v
        .get(&format!(
            "/auth/callback?error=access_denied&error_description=no&state={state}"
        ))
        .await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED, "{}", page.body);
    assert!(
        page.body
            .contains("did not sign you in (access_denied: no)"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn who_has_no_team_or_is_disabled_is_refused_in_words() {
    if !oidc::node_available() {
        return;
    }
    let w = world().await;
    let op = Provider::start(&[callback()], USERS);
    let app = support::portal::sso_app(&w.pool, PUBLIC, &op.issuer());

    // A member's role without a team: refused, told whom to ask, not created.
    let mut v = Visitor::new(app.clone());
    let page = sso_login(&mut v, &op, &mut OpAgent::default(), "nora").await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(
        page.body.contains("the role member but no team"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("Ask a Partita administrator (root)"),
        "{}",
        page.body
    );
    assert!(!v.cookies.contains_key("partita_session"));
    assert_eq!(user(&w.pool, "nora").await, None);

    // No value that maps at all.
    let page = sso_login(
        &mut Visitor::new(app.clone()),
        &op,
        &mut OpAgent::default(),
        "zed",
    )
    .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(
        page.body.contains("not mapped to a team or a role"),
        "{}",
        page.body
    );
    assert!(page.body.contains("your groups: none"), "{}", page.body);

    // A team Partita does not have.
    let page = sso_login(
        &mut Visitor::new(app.clone()),
        &op,
        &mut OpAgent::default(),
        "ghost",
    )
    .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(
        page.body
            .contains("the team nowhere, which Partita does not have"),
        "{}",
        page.body
    );

    // A disabled user: refused at the next sign-in, and the session ends.
    let mut v = Visitor::new(app.clone());
    let page = sso_login(&mut v, &op, &mut OpAgent::default(), "lena").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(v.get("/").await.status, StatusCode::OK);
    sqlx::query("UPDATE users SET disabled = true WHERE name = 'lena'")
        .execute(&w.pool)
        .await
        .unwrap();
    let page = sso_login(
        &mut Visitor::new(app.clone()),
        &op,
        &mut OpAgent::default(),
        "lena",
    )
    .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(
        page.body.contains("Your Partita account is disabled"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn signing_out_of_an_sso_session_signs_out_at_the_provider() {
    if !oidc::node_available() {
        return;
    }
    let w = world().await;
    let op = Provider::start(&[callback()], USERS);
    let app = support::portal::sso_app(&w.pool, PUBLIC, &op.issuer());
    let config = op.discovery().await;
    let mut v = Visitor::new(app.clone());
    let mut agent = OpAgent::default();
    sso_login(&mut v, &op, &mut agent, "lena").await;
    let home = v.get("/").await;
    assert_eq!(home.status, StatusCode::OK);

    let out = v.post("/signout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.body);
    let to = Url::parse(out.location()).unwrap();
    let end = config["end_session_endpoint"].as_str().unwrap();
    assert!(out.location().starts_with(end), "{}", out.location());
    let q: BTreeMap<String, String> = to.query_pairs().into_owned().collect();
    assert_eq!(q["post_logout_redirect_uri"], format!("{PUBLIC}/"));
    assert_eq!(q["client_id"], oidc::CLIENT_ID);
    let hint = oidc::jwt_payload(&q["id_token_hint"]);
    assert_eq!(hint["sub"], "lena");
    assert_eq!(hint["aud"], oidc::CLIENT_ID);
    // The provider takes it: its confirmation form, not an error.
    let (status, _, body) = agent.get(out.location()).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("op-error"), "{body}");
    assert!(body.contains("<form"), "{body}");

    // The portal's session is over.
    assert!(!v.cookies.contains_key("partita_session"));
    let revoked: bool = sqlx::query_scalar(
        "SELECT s.revoked_at IS NOT NULL FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE u.name = 'lena'",
    )
    .fetch_one(&w.pool)
    .await
    .unwrap();
    assert!(revoked);

    // A session signed in with a token signs out to the sign-in page.
    let mut t = Visitor::new(app.clone());
    t.sign_in(w.token("lead").unwrap()).await;
    t.get("/").await;
    let out = t.post("/signout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location(), "/signin");
}

#[tokio::test]
async fn sso_is_off_without_an_issuer_and_discovered_at_first_use() {
    if !oidc::node_available() {
        return;
    }
    let w = world().await;
    // Off: no button, no route.
    let mut v = Visitor::new(w.app.clone());
    let signin = v.get("/signin").await;
    assert!(!signin.body.contains("id=\"sso\""), "{}", signin.body);
    let login = v.get("/auth/login").await;
    assert_eq!(login.status, StatusCode::NOT_FOUND, "{}", login.body);
    assert!(login.body.contains("not set up"), "{}", login.body);

    // A provider nobody discovered yet (down at the start): the first
    // sign-in discovers it. A provider that does not answer: said in words.
    let op = Provider::start(&[callback()], USERS);
    let app = support::portal::sso_app(&w.pool, PUBLIC, &op.issuer());
    let page = sso_login(&mut Visitor::new(app), &op, &mut OpAgent::default(), "lena").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let settings = Settings {
        issuer: dead.clone(),
        client_id: "partita".into(),
        client_secret: Secret("x".into()),
        redirect_url: callback(),
        post_logout_redirect_url: format!("{PUBLIC}/"),
        claim: "groups".into(),
        scopes: vec!["openid".into()],
    };
    let sso = Sso::new(settings).unwrap();
    assert!(sso.discover().await.is_err());
    let mut state = AppState::new(w.pool.clone());
    state.portal = Arc::new(Config {
        sso: Some(Arc::new(sso)),
        ..Config::default()
    });
    let mut v = Visitor::new(partita::server::app(state));
    let page = v.get("/auth/login").await;
    assert_eq!(
        page.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        page.body
    );
    assert!(
        page.body.contains("cannot be reached just now"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn admins_edit_the_claim_rules_and_others_may_not() {
    let w = world().await;
    let mut lead = Visitor::new(w.app.clone());
    lead.sign_in(w.token("lead").unwrap()).await;
    let page = lead.get("/admin/sso").await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    lead.get("/").await;
    let page = lead
        .post(
            "/admin/sso/rules",
            &[("claim_value", "x"), ("role", "admin")],
        )
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);

    let mut root = Visitor::new(w.app.clone());
    root.sign_in(w.token("admin").unwrap()).await;
    let page = root.get("/admin/sso").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("id=\"sso-off\""), "{}", page.body);
    assert!(page.body.contains("id=\"no-rules\""), "{}", page.body);
    for field in ["claim_value", "team", "role"] {
        assert!(
            page.body.contains(&format!("<label for=\"{field}\">")),
            "{field}"
        );
    }

    // Errors together, beside their fields.
    let bad = root
        .post(
            "/admin/sso/rules",
            &[("claim_value", " "), ("team", ""), ("role", "")],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(
        bad.body.contains("id=\"claim_value-error\""),
        "{}",
        bad.body
    );
    assert!(
        bad.body.contains("Choose a team, a role, or both."),
        "{}",
        bad.body
    );
    let bad = root
        .post(
            "/admin/sso/rules",
            &[
                ("claim_value", "money"),
                ("team", "search"),
                ("role", "finance"),
            ],
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("belong to no team"), "{}", bad.body);
    assert!(
        bad.body.contains("value=\"money\""),
        "the form keeps what was typed"
    );
    let bad = root
        .post(
            "/admin/sso/rules",
            &[("claim_value", "x"), ("team", "nope")],
        )
        .await;
    assert!(
        bad.body.contains("There is no team named nope."),
        "{}",
        bad.body
    );

    for (value, team, role) in [
        ("ml", "search", ""),
        ("ml-leads", "", "lead"),
        ("ads", "ads", "member"),
    ] {
        let ok = root
            .post(
                "/admin/sso/rules",
                &[("claim_value", value), ("team", team), ("role", role)],
            )
            .await;
        assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
        assert_eq!(ok.location(), "/admin/sso?done=added");
    }
    let order = || async {
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT id, claim_value FROM sso_claim_rules ORDER BY position, id")
                .fetch_all(&w.pool)
                .await
                .unwrap();
        rows
    };
    let rows = order().await;
    assert_eq!(
        rows.iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["ml", "ml-leads", "ads"]
    );
    let page = root.get("/admin/sso?done=added").await;
    assert!(page.body.contains("The rule was added"), "{}", page.body);
    assert!(page.body.contains(&format!("id=\"rule-{}\"", rows[2].0)));

    let moved = root
        .post(
            &format!("/admin/sso/rules/{}/move", rows[2].0),
            &[("dir", "up")],
        )
        .await;
    assert_eq!(moved.status, StatusCode::SEE_OTHER, "{}", moved.body);
    assert_eq!(
        order()
            .await
            .iter()
            .map(|r| r.1.as_str())
            .collect::<Vec<_>>(),
        ["ml", "ads", "ml-leads"]
    );
    root.get("/admin/sso").await;
    let gone = root
        .post(&format!("/admin/sso/rules/{}/delete", rows[0].0), &[])
        .await;
    assert_eq!(gone.status, StatusCode::SEE_OTHER, "{}", gone.body);
    assert_eq!(
        order()
            .await
            .iter()
            .map(|r| r.1.as_str())
            .collect::<Vec<_>>(),
        ["ads", "ml-leads"]
    );
    // Without the CSRF token: refused.
    let forged = root
        .post_raw(&format!("/admin/sso/rules/{}/delete", rows[1].0), &[])
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(order().await.len(), 2);

    for action in ["sso_rule.create", "sso_rule.move", "sso_rule.delete"] {
        assert!(!audit(&w.pool, action).await.is_empty(), "{action} audited");
    }
    let deleted = audit(&w.pool, "sso_rule.delete").await;
    assert_eq!(deleted[0].1.as_ref().unwrap()["claim_value"], "ml");
    assert_eq!(deleted[0].1.as_ref().unwrap()["team"], "search");
}

#[tokio::test]
async fn partita_serve_takes_the_sso_settings_from_flags_and_the_environment() {
    if !oidc::node_available() {
        return;
    }
    let (_pool, db) = support::fresh_db().await;
    let url = support::url(&db);
    let data = tempfile::tempdir().unwrap();
    let op = Provider::start(&[callback()], USERS);
    let issuer = op.issuer();
    let args = [
        "--no-worker",
        "--data-dir",
        data.path().to_str().unwrap(),
        "--database-url",
        &url,
        "--public-url",
        PUBLIC,
    ];

    // The issuer without a secret: refused at start, in words.
    let err = support::Serve::start(&args, &[("PARTITA_OIDC_ISSUER", &issuer)])
        .err()
        .expect("no start without a client secret");
    assert!(err.contains("--oidc-client-secret"), "{err}");

    let serve = support::Serve::start(
        &args,
        &[
            ("PARTITA_OIDC_ISSUER", &issuer),
            ("PARTITA_OIDC_CLIENT_SECRET", oidc::CLIENT_SECRET),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let addr = serve.addr.clone();
    let (status, body) = tokio::task::spawn_blocking({
        let addr = addr.clone();
        move || support::http_get(&addr, "/signin")
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("id=\"sso\""), "{body}");
    let (status, body) = tokio::task::spawn_blocking(move || {
        support::http_get(&addr, "/auth/login?login_hint=lena")
    })
    .await
    .unwrap();
    assert_eq!(status, 303, "{body}");
    let (_, log) = serve.terminate();
    assert!(log.contains("single sign-on: provider discovered"), "{log}");
    assert!(log.contains(&format!("{PUBLIC}/auth/callback")), "{log}");
    assert!(
        !log.contains(oidc::CLIENT_SECRET),
        "the secret is never logged: {log}"
    );
}
