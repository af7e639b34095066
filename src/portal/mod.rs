//! The portal: server-rendered pages (askama templates in `templates/`,
//! htmx for the live parts) that `partita serve` serves at `/`.
//!
//! Every page is built from the API: the portal calls the `/api/v1`
//! routes in-process with the signed-in user's session token
//! (`apicall.rs`), so roles and team scoping are exactly the API's and
//! the portal holds no rules of its own about who may do what. Sessions
//! and CSRF are in `session.rs`; static files (the CSS, the one script,
//! the vendored htmx) in `assets.rs`; single sign-on with OpenID Connect
//! in `sso.rs`.

pub mod apicall;
pub mod assets;
pub mod pages;
pub mod render;
pub mod session;
pub mod sso;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use std::sync::Arc;

use crate::server::AppState;

/// How the portal is set up, beyond the API's state.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Cookies get `Secure` (set when the portal is served over TLS,
    /// directly or behind a proxy: `--public-url https://…`).
    pub secure_cookies: bool,
    /// The data directory the server uses, named in the sign-in hint.
    pub data_dir: String,
    /// Where users reach the portal (`--public-url`, no trailing slash):
    /// the base of the SSO redirect URLs. "" when not known.
    pub public_url: String,
    /// Single sign-on, when set up (`--oidc-issuer` and the rest).
    pub sso: Option<Arc<sso::Sso>>,
    /// The cluster's recent utilization, for the overview's chart.
    pub samples: std::sync::Arc<pages::svg::Samples>,
}

/// The portal's routes. Pages need a session; without one they redirect
/// to the sign-in page.
pub fn routes() -> Router<AppState> {
    Router::new()
        // The cluster, queues, submit, team and job pages.
        .route("/", get(pages::overview::page))
        .route("/fragments/overview", get(pages::overview::fragment))
        .route("/queue", get(pages::queue::page))
        .route("/fragments/queue", get(pages::queue::fragment))
        .route(
            "/submit",
            get(pages::submit::form).post(pages::submit::submit),
        )
        .route("/submit/preview", post(pages::submit::preview))
        .route("/team", get(pages::team::page))
        .route("/fragments/team", get(pages::team::fragment))
        .route("/jobs/{id}", get(pages::job::page))
        .route("/jobs/{id}/move", post(pages::team::move_job))
        .route("/jobs/{id}/class", post(pages::team::set_class))
        .route("/jobs/{id}/requeue", post(pages::team::requeue))
        .route("/jobs/{id}/cancel", post(pages::team::cancel))
        .route("/signin", get(session::signin_form).post(session::signin))
        .route("/signout", post(session::signout))
        .route("/auth/login", get(sso::login))
        .route("/auth/callback", get(sso::callback))
        .route("/admin/sso", get(pages::sso_admin::page))
        .route("/admin/sso/rules", post(pages::sso_admin::add))
        .route(
            "/admin/sso/rules/{id}/delete",
            post(pages::sso_admin::delete),
        )
        .route(
            "/admin/sso/rules/{id}/move",
            post(pages::sso_admin::move_rule),
        )
        .route("/static/{file}", get(assets::serve))
        // Admin pages (role admin) and chargeback (issue 47 items 4 and 5).
        .route("/admin", get(pages::admin::index))
        .route(
            "/admin/teams",
            get(pages::admin::teams::list).post(pages::admin::teams::create),
        )
        .route(
            "/admin/teams/{team}",
            get(pages::admin::teams::edit).post(pages::admin::teams::save),
        )
        .route(
            "/admin/teams/{team}/projects",
            post(pages::admin::teams::add_project),
        )
        .route(
            "/admin/users",
            get(pages::admin::users::list).post(pages::admin::users::create),
        )
        .route("/admin/users/{user}", post(pages::admin::users::save))
        .route(
            "/admin/tokens",
            get(pages::admin::tokens::list).post(pages::admin::tokens::issue),
        )
        .route(
            "/admin/tokens/{id}/revoke",
            post(pages::admin::tokens::revoke),
        )
        .route(
            "/admin/prices",
            get(pages::admin::prices::page).post(pages::admin::prices::save),
        )
        .route("/admin/audit", get(pages::admin::audit::page))
        .route("/chargeback", get(pages::chargeback::page))
        .route("/chargeback.csv", get(pages::chargeback::csv))
        .layer(middleware::from_fn(security_headers))
}

/// What every portal answer carries: a Content-Security-Policy without
/// inline script (the pages have none; htmx and portal.js are files),
/// and no framing, sniffing or referrers to other sites.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// The portal's Content-Security-Policy: scripts, styles and images from
/// this origin only, and no inline script or style attribute. htmx's own
/// indicator style is turned off in base.html (`htmx.config`, as a meta
/// tag) so that it injects none.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; object-src 'none'";

impl Config {
    /// Whether single sign-on is set up (the sign-in page offers it).
    pub fn sso_enabled(&self) -> bool {
        self.sso.is_some()
    }
}
