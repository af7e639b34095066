//! Rendering: every page is an askama template (in `templates/`) that
//! extends `base.html` and carries a [`Layout`] for it; an error is a
//! page too ([`PageError`]).

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::assets;
use super::session::Viewer;
use crate::server::auth::Principal;
use crate::server::error::ApiError;

/// What base.html needs: the title, the navigation's current entry, who
/// is signed in (none on the sign-in page), the session's CSRF token for
/// the forms, a message to show once, and the static files' version.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub title: String,
    pub nav: &'static str,
    pub who: Option<Principal>,
    pub csrf: String,
    pub flash: Option<Flash>,
    pub asset: &'static str,
}

/// A message shown at the top of a page after a form was sent.
#[derive(Debug, Clone)]
pub struct Flash {
    pub error: bool,
    pub text: String,
}

impl Layout {
    /// A signed-in page's layout.
    pub fn new(title: impl Into<String>, nav: &'static str, viewer: &Viewer) -> Layout {
        Layout {
            title: title.into(),
            nav,
            who: Some(viewer.who.clone()),
            csrf: viewer.csrf.clone(),
            flash: None,
            asset: assets::version(),
        }
    }

    /// A page for someone not signed in.
    pub fn anonymous(title: impl Into<String>) -> Layout {
        Layout {
            title: title.into(),
            asset: assets::version(),
            ..Layout::default()
        }
    }

    /// Whether the signed-in user may submit jobs (the navigation's
    /// Submit entry).
    pub fn submitter(&self) -> bool {
        self.who
            .as_ref()
            .is_some_and(|w| crate::server::auth::SUBMITTERS.contains(&w.role.as_str()))
    }

    pub fn role_is(&self, role: &str) -> bool {
        self.who.as_ref().is_some_and(|w| w.role == role)
    }
}

/// Renders a template into a 200 HTML answer.
pub fn html<T: Template>(page: T) -> Response {
    html_with(StatusCode::OK, page)
}

/// Renders a template into an HTML answer with `status`.
pub fn html_with<T: Template>(status: StatusCode, page: T) -> Response {
    match page.render() {
        Ok(body) => (status, Html(body)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "portal: rendering a page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not render the page\n",
            )
                .into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    layout: Layout,
    status: u16,
    message: String,
}

/// A page that could not be shown: its status and a sentence for people.
#[derive(Debug, Clone)]
pub struct PageError {
    pub status: StatusCode,
    pub message: String,
}

impl PageError {
    pub fn not_found(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> PageError {
        PageError {
            status: StatusCode::FORBIDDEN,
            message: message.into(),
        }
    }
}

impl From<ApiError> for PageError {
    /// The API's message names the field and the value in words; it is
    /// shown as it is, without the API's path.
    fn from(e: ApiError) -> PageError {
        PageError {
            status: e.status,
            message: e.message,
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = self
            .status
            .canonical_reason()
            .unwrap_or("Error")
            .to_string();
        html_with(
            self.status,
            ErrorPage {
                layout: Layout::anonymous(title),
                status: self.status.as_u16(),
                message: self.message,
            },
        )
    }
}
