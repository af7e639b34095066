//! The portal in a real browser: headless Chromium (tests/support/browser.rs)
//! against `partita`'s app on a real port and the real OpenID provider
//! (tests/support/oidc.rs). Skipped when Chromium or chromedriver is
//! missing, unless CI is set (then they must be there).
//!
//! Screenshots go to docs/screenshots/ when env PARTITA_SCREENSHOTS is set:
//! `PARTITA_SCREENSHOTS=1 cargo test --test browser`.

mod support;

use std::time::Duration;

use fantoccini::Locator;
use support::api::world;
use support::browser::{self, Browser};
use support::oidc::Provider;
use url::Url;

async fn text(b: &Browser, id: &str) -> String {
    b.find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"))
        .text()
        .await
        .unwrap()
}

async fn exists(b: &Browser, css: &str) -> bool {
    !b.find_all(Locator::Css(css)).await.unwrap().is_empty()
}

/// Forgets the provider's cookies (op_*), so its next login is a new one.
async fn forget_provider(b: &Browser) {
    for c in b.get_all_cookies().await.unwrap() {
        if c.name().starts_with("op_") {
            b.delete_cookie(c.name()).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sso_sign_in_restart_sign_out_and_refusals_in_chromium() {
    if !browser::available() {
        return;
    }
    let w = world().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let op = Provider::start(
        &[format!("{base}/auth/callback")],
        r#"{"lena":["team:search","role:lead"],"nora":["role:member"]}"#,
    );
    support::portal::serve_sso_app(&w.pool, listener, &base, &op.issuer());
    let b = Browser::start().await;

    // The sign-in page offers single sign-on.
    b.goto(&format!("{base}/")).await;
    b.wait_for_url(Duration::from_secs(10), |u| u.path() == "/signin")
        .await;
    assert!(exists(&b, "a#sso").await, "{}", b.source().await);
    b.screenshot_to(browser::screenshot_path("signin.png"))
        .await;

    // A lead signs in with SSO (the test picks the provider's user with
    // login_hint) and lands on the portal as that user, team and role.
    b.goto(&format!("{base}/auth/login?login_hint=lena&next=/"))
        .await;
    let landed = b
        .wait_for_url(Duration::from_secs(15), |u| {
            u.as_str().starts_with(&base) && u.path() == "/"
        })
        .await;
    assert_eq!(landed.path(), "/");
    assert_eq!(text(&b, "whoami").await, "lena", "{}", b.source().await);
    let role = b
        .find(Locator::Css(".me .role"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(role, "lead · search");
    let cookie = b.get_named_cookie("partita_session").await.unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    assert!(b.get_named_cookie("partita_sso").await.is_err(), "spent");

    // A restart: a new app on the same database keeps the session.
    let listener2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base2 = format!("http://{}", listener2.local_addr().unwrap());
    support::portal::serve_sso_app(&w.pool, listener2, &base2, &op.issuer());
    b.goto(&format!("{base2}/")).await;
    assert_eq!(b.current_url().await.path(), "/");
    assert_eq!(text(&b, "whoami").await, "lena", "{}", b.source().await);

    // Signing out ends the session here and at the provider, then comes
    // back to the portal, which asks to sign in.
    b.goto(&format!("{base}/")).await;
    b.find(Locator::Id("signout"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let back = b
        .wait_for_url(Duration::from_secs(15), |u| {
            u.as_str().starts_with(&base) && u.path() == "/signin"
        })
        .await;
    assert_eq!(back.path(), "/signin");
    assert!(b.get_named_cookie("partita_session").await.is_err());
    let live: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE u.name = 'lena' AND s.revoked_at IS NULL",
    )
    .fetch_one(&w.pool)
    .await
    .unwrap();
    assert_eq!(live, 0, "the session ended");
    b.goto(&format!("{base}/")).await;
    assert_eq!(b.current_url().await.path(), "/signin");

    // A tampered state: the portal starts a sign-in (its cookie set in
    // this browser), the browser goes to the provider with the state
    // changed, and the answer is refused.
    let (status, location, cookie) = start_login(&base, "lena").await;
    assert_eq!(status, 303);
    // (WebDriver's add-cookie refuses a domain that is an IP address; a
    // script may set it, as the cookie the portal sets would be.)
    b.execute(
        "document.cookie = 'partita_sso=' + arguments[0] + '; path=/auth; SameSite=Lax'",
        vec![serde_json::json!(cookie)],
    )
    .await
    .unwrap();
    let mut auth = Url::parse(&location).unwrap();
    let pairs: Vec<(String, String)> = auth.query_pairs().into_owned().collect();
    auth.query_pairs_mut().clear();
    for (k, v) in &pairs {
        let v = if k == "state" {
            format!("{v}-changed")
        } else {
            v.clone()
        };
        auth.query_pairs_mut().append_pair(k, &v);
    }
    b.goto(auth.as_str()).await;
    b.wait_for_url(Duration::from_secs(15), |u| {
        u.as_str().starts_with(&format!("{base}/auth/callback"))
    })
    .await;
    let message = text(&b, "error-message").await;
    assert!(
        message.contains("does not belong to the sign-in"),
        "{message}"
    );
    assert!(!exists(&b, "#whoami").await);
    assert!(b.get_named_cookie("partita_session").await.is_err());

    // Someone whose groups give a role but no team: a page in words that
    // says whom to ask.
    forget_provider(&b).await;
    b.goto(&format!("{base}/auth/login?login_hint=nora&next=/"))
        .await;
    b.wait_for_url(Duration::from_secs(15), |u| {
        u.as_str().starts_with(&format!("{base}/auth/callback"))
    })
    .await;
    let message = text(&b, "error-message").await;
    assert!(message.contains("the role member but no team"), "{message}");
    assert!(
        message.contains("Ask a Partita administrator (root)"),
        "{message}"
    );
    assert!(b.get_named_cookie("partita_session").await.is_err());
    b.screenshot_to(browser::screenshot_path("sso-refused.png"))
        .await;

    // An admin (signed in with a token, the form behind "instead") maps a
    // group on the single sign-on page, without JavaScript's help.
    b.goto(&format!("{base}/signin")).await;
    b.find(Locator::Css("details summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(w.token("admin").unwrap())
        .await
        .unwrap();
    b.find(Locator::Id("signin"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for_url(Duration::from_secs(10), |u| u.path() == "/")
        .await;
    b.goto(&format!("{base}/admin/sso")).await;
    b.find(Locator::Id("claim_value"))
        .await
        .unwrap()
        .send_keys("ml-leads")
        .await
        .unwrap();
    b.find(Locator::Css("#team option[value='search']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.find(Locator::Css("#role option[value='lead']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.find(Locator::Id("add"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for_url(Duration::from_secs(10), |u| u.query() == Some("done=added"))
        .await;
    assert!(text(&b, "rules").await.contains("ml-leads"));
    assert!(text(&b, "flash").await.contains("The rule was added"));
    b.screenshot_to(browser::screenshot_path("admin-sso.png"))
        .await;

    b.close().await;
}

/// GET /auth/login as a browser would begin it, without following the
/// redirect: the status, where it points and the sign-in cookie's value.
async fn start_login(base: &str, hint: &str) -> (u16, String, String) {
    use bytes::Bytes;
    use http_body_util::Full;
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let req = hyper::Request::get(format!("{base}/auth/login?login_hint={hint}&next=/"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    let cookie = resp
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap())
        .find_map(|c| c.strip_prefix("partita_sso="))
        .and_then(|c| c.split(';').next())
        .expect("the sign-in's cookie")
        .to_string();
    (resp.status().as_u16(), location, cookie)
}
