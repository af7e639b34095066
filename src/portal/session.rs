//! Portal sessions and CSRF.
//!
//! Signing in (with SSO, or by pasting an API token where there is none)
//! starts a session: a row in `sessions` and an API token of its own,
//! both found by the SHA-256 of one random secret that only the browser
//! holds, in an HttpOnly, SameSite=Lax cookie (Secure over TLS). The
//! portal calls the API with that secret (`apicall.rs`). Sessions are in
//! PostgreSQL: a restart signs nobody out. A session ends after
//! [`SESSION_HOURS`], or [`IDLE_MINUTES`] unused, or at sign-out.
//!
//! CSRF: each session has a random token; every form carries it in a
//! hidden field and every htmx request in the `X-CSRF-Token` header, and
//! a POST without the session's token is refused. The sign-in form,
//! which comes before any session, is protected the same way by a
//! short-lived cookie of its own (double submit).

use axum::extract::{FromRequest, FromRequestParts, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use chrono::{Duration, Utc};
use rand::distr::{Alphanumeric, SampleString};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::render::{Layout, PageError, html_with};
use crate::db::bootstrap::{new_token, token_hash};
use crate::server::AppState;
use crate::server::auth::{Principal, usable};
use crate::store::accounts;

/// The session cookie's name.
pub const COOKIE: &str = "partita_session";
/// The sign-in form's CSRF cookie.
const SIGNIN_COOKIE: &str = "partita_signin";
/// How long a session lasts at most.
pub const SESSION_HOURS: i64 = 12;
/// How long an unused session lasts.
pub const IDLE_MINUTES: i64 = 120;

/// The signed-in user of a portal request.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub who: Principal,
    /// The session's secret: the cookie's value and its API token's.
    pub secret: String,
    /// The session's CSRF token.
    pub csrf: String,
    pub session_id: i64,
}

/// Why a request has no viewer: not signed in (or the session ended), or
/// the database failed.
pub enum NoViewer {
    SignIn { next: String, htmx: bool },
    Failed(PageError),
}

impl IntoResponse for NoViewer {
    fn into_response(self) -> Response {
        match self {
            // htmx follows HX-Redirect with a full page load.
            NoViewer::SignIn { htmx: true, .. } => {
                (StatusCode::UNAUTHORIZED, [("HX-Redirect", "/signin")]).into_response()
            }
            NoViewer::SignIn { next, .. } => {
                Redirect::to(&format!("/signin?next={}", encode(&next))).into_response()
            }
            NoViewer::Failed(e) => e.into_response(),
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = NoViewer;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, NoViewer> {
        let next = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let sign_in = NoViewer::SignIn {
            next,
            htmx: parts.headers.contains_key("HX-Request"),
        };
        let jar = CookieJar::from_headers(&parts.headers);
        let Some(secret) = jar.get(COOKIE).map(|c| c.value().to_string()) else {
            return Err(sign_in);
        };
        match find(state, &secret).await {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(sign_in),
            Err(e) => Err(NoViewer::Failed(e)),
        }
    }
}

/// The session of a cookie's secret, if it is live and its user may
/// still sign in.
async fn find(state: &AppState, secret: &str) -> Result<Option<Viewer>, PageError> {
    let hash = token_hash(secret);
    let row = sqlx::query!(
        r#"SELECT id, csrf_token,
                  (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute') AS "stale!"
           FROM sessions
           WHERE session_sha256 = $1 AND revoked_at IS NULL AND expires_at > now()
             AND COALESCE(last_seen_at, created_at) > now() - make_interval(mins => $2)"#,
        &hash,
        IDLE_MINUTES as i32,
    )
    .fetch_optional(&state.pool)
    .await
    .map_err(internal)?;
    let Some(row) = row else {
        return Ok(None);
    };
    // The user and the session's token, checked as the API checks them:
    // a disabled user or a revoked token ends the session.
    let owner = accounts::token_owner(&state.pool, &hash)
        .await
        .map_err(internal)?;
    let Ok(who) = usable(owner) else {
        return Ok(None);
    };
    if row.stale {
        sqlx::query!(
            "UPDATE sessions SET last_seen_at = now() WHERE id = $1",
            row.id
        )
        .execute(&state.pool)
        .await
        .map_err(internal)?;
    }
    Ok(Some(Viewer {
        who,
        secret: secret.to_string(),
        csrf: row.csrf_token,
        session_id: row.id,
    }))
}

fn internal(e: sqlx::Error) -> PageError {
    tracing::error!(error = %e, "portal: sessions");
    PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: "The server could not read its database; see its log.".into(),
    }
}

/// Starts a session for a user who just signed in (`via` "token" or
/// "sso"): its API token and its row in one transaction. Returns the
/// cookie to set.
pub async fn start(
    state: &AppState,
    user_id: i64,
    via: &str,
    user_agent: &str,
) -> Result<Cookie<'static>, PageError> {
    let secret = new_token();
    let hash = token_hash(&secret);
    let expires = Utc::now() + Duration::hours(SESSION_HOURS);
    let mut tx = state.pool.begin().await.map_err(internal)?;
    let token_id = accounts::insert_token(
        &mut *tx,
        user_id,
        &hash,
        &format!("portal session ({via})"),
        Some(expires),
    )
    .await
    .map_err(internal)?;
    let agent: String = user_agent.chars().take(300).collect();
    sqlx::query!(
        r#"INSERT INTO sessions (user_id, session_sha256, expires_at, token_id, csrf_token, via, user_agent)
           VALUES ($1, $2, $3, $4, $5, $6, $7)"#,
        user_id,
        &hash,
        expires,
        token_id,
        random_secret(),
        via,
        agent,
    )
    .execute(&mut *tx)
    .await
    .map_err(internal)?;
    tx.commit().await.map_err(internal)?;
    Ok(session_cookie(state, secret))
}

fn session_cookie(state: &AppState, secret: String) -> Cookie<'static> {
    Cookie::build((COOKIE, secret))
        .path("/")
        .http_only(true)
        .secure(state.portal.secure_cookies)
        .same_site(SameSite::Lax)
        .max_age(time_hours(SESSION_HOURS))
        .build()
}

fn time_hours(h: i64) -> cookie::time::Duration {
    cookie::time::Duration::hours(h)
}

/// Ends a session: the row and its token revoked together, so the
/// secret is refused by the portal and the API alike.
pub async fn end(state: &AppState, viewer: &Viewer) -> Result<(), PageError> {
    let mut tx = state.pool.begin().await.map_err(internal)?;
    let token = sqlx::query_scalar!(
        "UPDATE sessions SET revoked_at = now() WHERE id = $1 RETURNING token_id",
        viewer.session_id
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(internal)?;
    if let Some(token) = token {
        accounts::revoke_token(&mut *tx, token)
            .await
            .map_err(internal)?;
    }
    tx.commit().await.map_err(internal)?;
    // The token's owner may be in the accounts cache: forget it.
    state.accounts.forget();
    Ok(())
}

/// 32 random letters and digits: CSRF tokens and the sign-in cookie.
pub fn random_secret() -> String {
    Alphanumeric.sample_string(&mut rand::rng(), 32)
}

/// Percent-encodes a value for a query string.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where to go after signing in: a path on this site only (an absolute
/// URL or `//host` would send the user elsewhere).
pub fn safe_next(next: &str) -> String {
    if next.starts_with('/') && !next.starts_with("//") && !next.starts_with("/\\") {
        next.to_string()
    } else {
        "/".to_string()
    }
}

/// A form posted by a signed-in user, its CSRF token checked: the form's
/// `csrf` field or the `X-CSRF-Token` header must be the session's.
/// Repeated fields (checkboxes) decode into `Vec`s.
pub struct Posted<T> {
    pub viewer: Viewer,
    pub form: T,
}

#[derive(Deserialize)]
struct CsrfField {
    #[serde(default)]
    csrf: String,
}

impl<T: DeserializeOwned + Send> FromRequest<AppState> for Posted<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let viewer = Viewer::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let bytes = axum::body::to_bytes(body, 1 << 20)
            .await
            .map_err(|_| bad_form("The form is too large."))?;
        let header = csrf_header(&parts.headers);
        let field = serde_html_form::from_bytes::<CsrfField>(&bytes)
            .map(|f| f.csrf)
            .unwrap_or_default();
        let sent = if header.is_empty() { field } else { header };
        if sent.is_empty() || !constant_time_eq(sent.as_bytes(), viewer.csrf.as_bytes()) {
            return Err(PageError::forbidden(
                "This form has expired or did not come from this site. Reload the page and send it again.",
            )
            .into_response());
        }
        // U+0000 cannot be stored (PostgreSQL's text), and some forms
        // write to the database directly: refused for every form here.
        if bytes.windows(3).any(|w| w == b"%00") {
            return Err(bad_form(
                "A field holds the character U+0000, which cannot be stored. Remove it and send the form again.",
            ));
        }
        let form = serde_html_form::from_bytes::<T>(&bytes)
            .map_err(|e| bad_form(&format!("The form could not be read: {e}.")))?;
        Ok(Posted { viewer, form })
    }
}

fn bad_form(message: &str) -> Response {
    PageError {
        status: StatusCode::BAD_REQUEST,
        message: message.to_string(),
    }
    .into_response()
}

fn csrf_header(headers: &HeaderMap) -> String {
    headers
        .get("X-CSRF-Token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// Compares two secrets in time that does not depend on where they
/// first differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ---- Sign-in with an API token, and sign-out ----

#[derive(askama::Template)]
#[template(path = "signin.html")]
struct SigninPage {
    layout: Layout,
    next: String,
    error: String,
    token_csrf: String,
    sso: bool,
    data_dir: String,
}

#[derive(Deserialize, Default)]
pub struct NextQuery {
    #[serde(default)]
    next: String,
    #[serde(default)]
    error: String,
}

/// GET /signin: single sign-on when it is set up, and the API token form.
pub async fn signin_form(
    State(state): State<AppState>,
    jar: CookieJar,
    Query(q): Query<NextQuery>,
) -> Response {
    signin_page(&state, jar, &safe_next(&q.next), &q.error, StatusCode::OK)
}

fn signin_page(
    state: &AppState,
    jar: CookieJar,
    next: &str,
    error: &str,
    status: StatusCode,
) -> Response {
    let token = random_secret();
    let cookie = Cookie::build((SIGNIN_COOKIE, token.clone()))
        .path("/signin")
        .http_only(true)
        .secure(state.portal.secure_cookies)
        .same_site(SameSite::Strict)
        .max_age(time_hours(1))
        .build();
    let page = SigninPage {
        layout: Layout::anonymous("Sign in"),
        next: next.to_string(),
        error: error.to_string(),
        token_csrf: token,
        sso: state.portal.sso_enabled(),
        data_dir: state.portal.data_dir.clone(),
    };
    (jar.add(cookie), html_with(status, page)).into_response()
}

#[derive(Deserialize)]
pub struct SigninForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
    #[serde(default)]
    csrf: String,
}

/// POST /signin: an API token's owner gets a session of their own (the
/// pasted token is not kept).
pub async fn signin(
    State(state): State<AppState>,
    jar: CookieJar,
    headers: HeaderMap,
    axum::Form(form): axum::Form<SigninForm>,
) -> Response {
    let next = safe_next(&form.next);
    let expected = jar.get(SIGNIN_COOKIE).map(|c| c.value().to_string());
    if expected.is_none_or(|e| !constant_time_eq(e.as_bytes(), form.csrf.as_bytes())) {
        return signin_page(
            &state,
            jar,
            &next,
            "The sign-in form expired. Please try again.",
            StatusCode::FORBIDDEN,
        );
    }
    let secret = form.token.trim();
    if secret.is_empty() {
        return signin_page(
            &state,
            jar,
            &next,
            "Paste your API token to sign in.",
            StatusCode::BAD_REQUEST,
        );
    }
    let owner = match accounts::token_owner(&state.pool, &token_hash(secret)).await {
        Ok(o) => o,
        Err(e) => return internal(e).into_response(),
    };
    let who = match usable(owner) {
        Ok(w) => w,
        Err(e) => {
            let why = if e.message.contains("expired") {
                "That token has expired. Ask an administrator for a new one."
            } else if e.message.contains("disabled") {
                "Your account is disabled. Ask an administrator."
            } else {
                "That token is not valid (or was revoked). Check that you pasted all of it."
            };
            return signin_page(&state, jar, &next, why, StatusCode::UNAUTHORIZED);
        }
    };
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match start(&state, who.user_id, "token", agent).await {
        Ok(cookie) => (
            jar.remove(Cookie::build(SIGNIN_COOKIE).path("/signin"))
                .add(cookie),
            Redirect::to(&next),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// POST /signout: ends the session and forgets the cookie; a session
/// that came from single sign-on then goes on to sign out at the provider
/// (`sso::signout_redirect`), the others to the sign-in page.
pub async fn signout(
    State(state): State<AppState>,
    jar: CookieJar,
    posted: Posted<CsrfOnly>,
) -> Response {
    if let Err(e) = end(&state, &posted.viewer).await {
        return e.into_response();
    }
    let to = super::sso::signout_redirect(&state, posted.viewer.session_id).await;
    let jar = jar.remove(Cookie::build(COOKIE).path("/"));
    (jar, Redirect::to(&to)).into_response()
}

/// A form with nothing but its CSRF token (buttons).
#[derive(Deserialize)]
pub struct CsrfOnly {}
