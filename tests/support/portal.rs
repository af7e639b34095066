//! A browser without a browser, for the portal's tests: requests to the
//! app in-process (`oneshot`) that keep cookies as a browser would and
//! send back the CSRF token of the last page, so a test reads like a
//! user's visit. The browser tests (Chromium) check what needs one.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use tower::ServiceExt;

use std::sync::Arc;

use partita::portal::Config;
use partita::portal::sso::{Secret, Settings, Sso};
use partita::server::AppState;
use sqlx::PgPool;

use super::oidc;

/// One visitor: their cookies and the last page they saw.
pub struct Visitor {
    pub app: Router,
    pub cookies: BTreeMap<String, String>,
    /// The CSRF token of the last page with a form.
    pub csrf: String,
}

/// A page as the visitor got it.
pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    /// Where a redirect points, or "".
    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl Visitor {
    pub fn new(app: Router) -> Visitor {
        Visitor {
            app,
            cookies: BTreeMap::new(),
            csrf: String::new(),
        }
    }

    /// Sends a request with the visitor's cookies; keeps what it sets.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        form: Option<String>,
        headers: &[(&str, &str)],
    ) -> Page {
        let mut req = Request::builder().method(method).uri(path);
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header(header::COOKIE, jar.join("; "));
        }
        if form.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(form.map(Body::from).unwrap_or_else(Body::empty))
            .unwrap();
        let response = self.app.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        for set in headers.get_all(header::SET_COOKIE) {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            let removed = set.contains("Max-Age=0") || value.is_empty();
            if removed {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 26)
            .await
            .unwrap();
        let body = String::from_utf8_lossy(&bytes).into_owned();
        if let Some(token) = field_value(&body, "csrf") {
            self.csrf = token;
        }
        Page {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        self.send("GET", path, None, &[]).await
    }

    /// Posts a form with the last page's CSRF token added.
    pub async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let mut all: Vec<(&str, &str)> = vec![("csrf", &self.csrf)];
        all.extend_from_slice(fields);
        let csrf = self.csrf.clone();
        let _ = csrf;
        let body = encode_form(&all);
        self.send("POST", path, Some(body), &[]).await
    }

    /// Posts a form exactly as given (no CSRF token added).
    pub async fn post_raw(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body = encode_form(fields);
        self.send("POST", path, Some(body), &[]).await
    }

    /// Signs in with an API token through the sign-in form.
    pub async fn sign_in(&mut self, token: &str) -> Page {
        let form = self.get("/signin").await;
        assert_eq!(form.status, StatusCode::OK, "{}", form.body);
        self.post("/signin", &[("token", token), ("next", "/")])
            .await
    }
}

/// The `value` of the first input named `name` in a page.
pub fn field_value(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\" value=\""))?;
    let rest = &html[at + name.len() + 15..];
    Some(rest[..rest.find('"')?].to_string())
}

pub fn encode_form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The portal with single sign-on against the test provider at `issuer`
/// (tests/support/oidc.rs), for users who reach it at `base`.
pub fn sso_app(pool: &PgPool, base: &str, issuer: &str) -> Router {
    let settings = Settings {
        issuer: issuer.to_string(),
        client_id: oidc::CLIENT_ID.into(),
        client_secret: Secret(oidc::CLIENT_SECRET.into()),
        redirect_url: format!("{base}/auth/callback"),
        post_logout_redirect_url: format!("{base}/"),
        claim: "groups".into(),
        scopes: ["openid", "email", "profile", "groups"]
            .map(String::from)
            .to_vec(),
    };
    let mut state = AppState::new(pool.clone());
    state.portal = Arc::new(Config {
        public_url: base.to_string(),
        sso: Some(Arc::new(Sso::new(settings).unwrap())),
        ..Config::default()
    });
    partita::server::app(state)
}

/// [`sso_app`] served on `listener` (whose base URL is `base`) until the
/// test ends.
pub fn serve_sso_app(pool: &PgPool, listener: tokio::net::TcpListener, base: &str, issuer: &str) {
    let app = sso_app(pool, base, issuer);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
}
