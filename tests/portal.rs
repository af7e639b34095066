//! The portal without a browser: sessions, sign-in with a token, CSRF,
//! the security headers and the static files, against a real PostgreSQL.
//! What needs a browser (SSO, htmx) is in tests/browser.rs.

mod support;

use axum::http::StatusCode;
use sha2::{Digest, Sha256};
use support::api::world;
use support::portal::Visitor;

#[tokio::test]
async fn pages_need_a_session_and_a_token_signs_in() {
    let w = world().await;
    let mut v = Visitor::new(w.app.clone());
    let page = v.get("/?team=search").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert_eq!(page.location(), "/signin?next=/%3Fteam%3Dsearch");

    // A wrong token: an error in words, no session.
    let form = v.get("/signin").await;
    assert_eq!(form.status, StatusCode::OK);
    let bad = v
        .post("/signin", &[("token", "pt_nope"), ("next", "/")])
        .await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert!(bad.body.contains("That token is not valid"), "{}", bad.body);
    assert!(!v.cookies.contains_key("partita_session"));

    let ok = v.sign_in(w.token("lead").unwrap()).await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    assert_eq!(ok.location(), "/");
    let cookie = ok
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().to_string())
        .find(|c| c.starts_with("partita_session="))
        .expect("a session cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain HTTP here: {cookie}");
    // The pasted token is not the session's: the cookie holds a new secret.
    assert_ne!(v.cookies["partita_session"], w.token("lead").unwrap());

    let home = v.get("/").await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    assert!(home.body.contains("id=\"whoami\">leo<"), "{}", home.body);
    // The session survives a new server on the same database (a restart).
    let mut again = Visitor::new(partita::server::app(partita::server::AppState::new(
        w.pool.clone(),
    )));
    again.cookies = v.cookies.clone();
    assert_eq!(again.get("/").await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_sign_in_form_and_every_post_need_their_csrf_token() {
    let w = world().await;
    let mut v = Visitor::new(w.app.clone());
    v.get("/signin").await;
    let forged = v
        .post_raw(
            "/signin",
            &[("token", w.token("lead").unwrap()), ("csrf", "forged")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    assert!(!v.cookies.contains_key("partita_session"));

    v.sign_in(w.token("lead").unwrap()).await;
    v.get("/").await;
    let no_token = v.post_raw("/signout", &[]).await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN, "{}", no_token.body);
    assert!(
        no_token.body.contains("Reload the page"),
        "{}",
        no_token.body
    );
    let wrong = v.post_raw("/signout", &[("csrf", "x")]).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    // Still signed in.
    assert_eq!(v.get("/").await.status, StatusCode::OK);
    // The header htmx sends works as the field does.
    let csrf = v.csrf.clone();
    let out = v
        .send(
            "POST",
            "/signout",
            Some(String::new()),
            &[("X-CSRF-Token", &csrf)],
        )
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.body);
}

#[tokio::test]
async fn signing_out_ends_the_session_and_its_token() {
    let w = world().await;
    let mut v = Visitor::new(w.app.clone());
    v.sign_in(w.token("member").unwrap()).await;
    let secret = v.cookies["partita_session"].clone();
    v.get("/").await;
    // The session's secret is an API token while the session lasts.
    let a = support::api::call(&w.app, "GET", "/api/v1/whoami", Some(&secret), None).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let out = v.post("/signout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(out.location(), "/signin");
    assert!(!v.cookies.contains_key("partita_session"));
    let a = support::api::call(&w.app, "GET", "/api/v1/whoami", Some(&secret), None).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{}", a.body);
    // The old cookie, replayed, is refused.
    let mut thief = Visitor::new(w.app.clone());
    thief.cookies.insert("partita_session".into(), secret);
    assert_eq!(thief.get("/").await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_disabled_user_is_signed_out() {
    let w = world().await;
    let mut v = Visitor::new(w.app.clone());
    v.sign_in(w.token("member").unwrap()).await;
    assert_eq!(v.get("/").await.status, StatusCode::OK);
    let a = support::api::call(
        &w.app,
        "PATCH",
        "/api/v1/users/mia",
        w.token("admin"),
        Some(serde_json::json!({"disabled": true})),
    )
    .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert_eq!(v.get("/").await.status, StatusCode::SEE_OTHER);
    // And may not sign in again.
    let mut v = Visitor::new(w.app.clone());
    let page = v.sign_in(w.token("member").unwrap()).await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    assert!(page.body.contains("disabled"), "{}", page.body);
}

#[tokio::test]
async fn only_paths_on_this_site_are_followed_after_sign_in() {
    let w = world().await;
    for (next, to) in [
        ("/queue", "/queue"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
    ] {
        let mut v = Visitor::new(w.app.clone());
        v.get("/signin").await;
        let page = v
            .post(
                "/signin",
                &[("token", w.token("lead").unwrap()), ("next", next)],
            )
            .await;
        assert_eq!(page.location(), to, "next={next}");
    }
}

#[tokio::test]
async fn pages_carry_a_policy_without_inline_script_and_static_files_are_pinned() {
    let w = world().await;
    let mut v = Visitor::new(w.app.clone());
    let page = v.get("/signin").await;
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(!page.body.contains("<script>"), "inline script in the page");
    assert!(!page.body.contains(" style=\""), "inline style in the page");
    assert_eq!(page.headers["x-frame-options"], "DENY");

    // htmx is the vendored 2.0.11 from npm, byte for byte.
    let js = v.get("/static/htmx-2.0.11.min.js").await;
    assert_eq!(js.status, StatusCode::OK);
    let sum = Sha256::digest(js.body.as_bytes());
    let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"
    );
    assert!(
        js.headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    assert_eq!(v.get("/static/nope.js").await.status, StatusCode::NOT_FOUND);

    // A page that does not exist is a page, not JSON; the API's stays JSON.
    let missing = v.get("/nowhere").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(
        missing.body.contains("There is no page at /nowhere."),
        "{}",
        missing.body
    );
    let api = v.get("/api/v1/nowhere").await;
    assert!(api.body.starts_with('{'), "{}", api.body);
}
