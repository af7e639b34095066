//! The browser tests' harness, end to end, without the portal: a headless
//! Chromium (tests/support/browser.rs) goes through the test OpenID
//! provider's code flow (tests/support/oidc.rs, tests/oidc/op.mjs) to a
//! tiny app in this test, which then exchanges the code as the portal
//! will: PKCE S256, state, nonce, the `groups` claim, and RP-initiated
//! logout.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::response::Html;
use axum::routing::get;
use serde_json::{Value, json};
use support::browser::{self, Browser};
use support::oidc::{self, Provider};
use url::Url;

/// The requests the app saw: path and raw query.
type Hits = Arc<Mutex<Vec<(String, String)>>>;

/// A stand-in for the app under test: records the query of every request
/// to `/callback` and `/` (the post-logout page), in order.
struct App {
    base: String,
    hits: Hits,
}

impl App {
    async fn start() -> App {
        let hits: Hits = Arc::default();
        let record = |path: &'static str| {
            move |State(hits): State<Hits>, RawQuery(q): RawQuery| async move {
                hits.lock()
                    .unwrap()
                    .push((path.to_owned(), q.unwrap_or_default()));
                Html(format!(
                    "<!DOCTYPE html><title>app</title><p id=where>{path}</p>"
                ))
            }
        };
        let router = Router::new()
            .route("/callback", get(record("/callback")))
            .route("/", get(record("/")))
            .with_state(hits.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        App { base, hits }
    }

    fn callback(&self) -> String {
        format!("{}/callback", self.base)
    }

    /// The query of the last request to `path`, as pairs.
    fn last(&self, path: &str) -> Vec<(String, String)> {
        let hits = self.hits.lock().unwrap();
        let (_, q) = hits
            .iter()
            .rev()
            .find(|(p, _)| p == path)
            .unwrap_or_else(|| panic!("the app saw no request to {path}: {hits:?}"));
        url::form_urlencoded::parse(q.as_bytes())
            .into_owned()
            .collect()
    }
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// One login through the browser as `login_hint`: the authorization
/// request, the redirect back to the app's /callback (same state, a code),
/// the code exchanged with the verifier. Returns the token response and
/// the ID token's payload, whose nonce it checks.
async fn login(
    browser: &Browser,
    op: &Provider,
    config: &Value,
    app: &App,
    login_hint: &str,
) -> (Value, Value) {
    let (verifier, challenge) = oidc::pkce();
    let state = oidc::random_string(24);
    let nonce = oidc::random_string(24);
    let mut auth = Url::parse(config["authorization_endpoint"].as_str().unwrap()).unwrap();
    auth.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", oidc::CLIENT_ID)
        .append_pair("redirect_uri", &app.callback())
        .append_pair("scope", "openid email profile groups")
        .append_pair("state", &state)
        .append_pair("nonce", &nonce)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("login_hint", login_hint);

    browser.goto(auth.as_str()).await;
    let landed = browser
        .wait_for_url(Duration::from_secs(10), |u| {
            u.as_str().starts_with(&app.callback())
        })
        .await;
    let in_browser: Vec<(String, String)> = landed.query_pairs().into_owned().collect();
    let seen = app.last("/callback");
    assert_eq!(in_browser, seen, "the browser's URL and the app's request");
    assert_eq!(param(&seen, "error"), None, "callback: {seen:?}");
    assert_eq!(
        param(&seen, "state"),
        Some(state.as_str()),
        "state: {seen:?}"
    );
    assert_eq!(param(&seen, "iss"), Some(op.issuer().as_str()));
    let code = param(&seen, "code").expect("a code");
    assert!(!code.is_empty());

    // Not without the verifier, nor with another one.
    let (status, body) = op
        .token_request(code, &app.callback(), &oidc::pkce().0)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("invalid_grant"), "{body}");
    // The code was burnt by that try: a new login for the real exchange.
    browser.goto(auth.as_str()).await;
    browser
        .wait_for_url(Duration::from_secs(10), |u| {
            u.as_str().starts_with(&app.callback())
        })
        .await;
    let seen = app.last("/callback");
    assert_eq!(param(&seen, "state"), Some(state.as_str()));
    let code = param(&seen, "code").expect("a code");

    let tokens = op.exchange_code(code, &app.callback(), &verifier).await;
    let id_token = tokens["id_token"].as_str().expect("an id_token");
    let claims = oidc::jwt_payload(id_token);
    assert_eq!(claims["nonce"], json!(nonce));
    assert_eq!(claims["iss"], json!(op.issuer()));
    assert_eq!(claims["aud"], json!(oidc::CLIENT_ID));
    (tokens, claims)
}

#[tokio::test]
async fn code_flow_with_pkce_groups_and_logout_in_chromium() {
    if !browser::available() {
        return;
    }
    let t0 = Instant::now();
    let app = App::start().await;
    let op = Provider::start(
        &[app.callback()],
        r#"{"lena":["team:vision","role:lead"],"ada":["role:admin"]}"#,
    );
    let t_op = t0.elapsed();
    let config = op.discovery().await;
    assert_eq!(config["issuer"], json!(op.issuer()));
    assert_eq!(config["code_challenge_methods_supported"], json!(["S256"]));
    for scope in ["openid", "email", "profile", "groups"] {
        assert!(
            config["scopes_supported"]
                .as_array()
                .unwrap()
                .contains(&json!(scope)),
            "scope {scope}: {config}"
        );
    }
    let browser = Browser::start().await;
    let t_browser = t0.elapsed();

    // lena, with her groups.
    let (tokens, claims) = login(&browser, &op, &config, &app, "lena").await;
    assert_eq!(claims["sub"], json!("lena"));
    assert_eq!(claims["email"], json!("lena@example.test"));
    assert_eq!(claims["name"], json!("Lena"));
    assert_eq!(claims["groups"], json!(["team:vision", "role:lead"]));
    assert_eq!(tokens["scope"], json!("openid email profile groups"));

    // The browser can be looked at.
    let shot = tempfile::tempdir().unwrap();
    let png = shot.path().join("callback.png");
    browser.screenshot_to(&png).await;
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert_eq!(
        browser
            .find(fantoccini::Locator::Id("where"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "/callback"
    );

    // RP-initiated logout, no confirmation page: back to the app's `/`
    // with the state.
    let mut end = Url::parse(config["end_session_endpoint"].as_str().unwrap()).unwrap();
    end.query_pairs_mut()
        .append_pair("id_token_hint", tokens["id_token"].as_str().unwrap())
        .append_pair("post_logout_redirect_uri", &format!("{}/", app.base))
        .append_pair("state", "bye");
    browser.goto(end.as_str()).await;
    browser
        .wait_for_url(Duration::from_secs(10), |u| {
            u.path() == "/" && u.as_str().starts_with(&app.base)
        })
        .await;
    assert_eq!(param(&app.last("/"), "state"), Some("bye"));

    // The session ended: the next login is a new one, as someone the
    // users' map does not name (no groups).
    let (_, claims) = login(&browser, &op, &config, &app, "bob").await;
    assert_eq!(claims["sub"], json!("bob"));
    assert_eq!(claims["groups"], json!([]));

    // No PKCE, no code.
    let mut no_pkce = Url::parse(config["authorization_endpoint"].as_str().unwrap()).unwrap();
    no_pkce
        .query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", oidc::CLIENT_ID)
        .append_pair("redirect_uri", &app.callback())
        .append_pair("scope", "openid")
        .append_pair("state", "s");
    browser.goto(no_pkce.as_str()).await;
    let seen = app.last("/callback");
    assert_eq!(param(&seen, "error"), Some("invalid_request"), "{seen:?}");
    assert_eq!(param(&seen, "code"), None);

    browser.close().await;
    eprintln!(
        "harness: OP ready after {t_op:?}, browser after {t_browser:?}, all in {:?}",
        t0.elapsed()
    );
}
