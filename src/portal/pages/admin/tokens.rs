//! Tokens and sessions: every API token (never its secret), a new token
//! for a user (its secret shown once, on the page that answers the
//! form), and revoking one. A portal session is a token too (described
//! "portal session (token)" or "portal session (sso)"): those are shown
//! apart, as the browsers signed in, and revoking one signs that browser
//! out.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;

use super::{FieldErrors, require_admin};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Flash, Layout, PageError, html, html_with};
use crate::portal::session::{Posted, Viewer, encode};
use crate::server::AppState;
use crate::server::accounts::DEFAULT_TOKEN_DAYS;

/// A token as the page shows it.
pub struct Shown {
    pub token: api::Token,
    /// "active", "expired" or "revoked".
    pub state: &'static str,
    /// A session's way in ("token" or "sso"); "" for an API token.
    pub via: String,
    /// The viewer's own session.
    pub mine: bool,
}

impl Shown {
    fn of(token: api::Token, now: DateTime<Utc>, viewer: &Viewer) -> Shown {
        let state = if token.revoked_at.is_some() {
            "revoked"
        } else if token.expires_at.is_some_and(|e| e <= now) {
            "expired"
        } else {
            "active"
        };
        let via = token
            .description
            .strip_prefix("portal session (")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or("")
            .to_string();
        let mine = token.id == viewer.who.token_id.to_string();
        Shown {
            token,
            state,
            via,
            mine,
        }
    }

    pub fn active(&self) -> bool {
        self.state == "active"
    }

    pub fn expires(&self) -> String {
        Shown::when(&self.token.expires_at)
    }

    pub fn when(t: &Option<DateTime<Utc>>) -> String {
        t.map(|t| t.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_else(|| "never".into())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct IssueForm {
    pub user: String,
    pub description: String,
    pub days: String,
}

impl Default for IssueForm {
    fn default() -> IssueForm {
        IssueForm {
            user: String::new(),
            description: String::new(),
            days: DEFAULT_TOKEN_DAYS.to_string(),
        }
    }
}

#[derive(Template)]
#[template(path = "admin/tokens.html")]
struct TokensPage {
    layout: Layout,
    sessions: Vec<Shown>,
    tokens: Vec<Shown>,
    ended_sessions: usize,
    users: Vec<String>,
    form: IssueForm,
    errors: FieldErrors,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Done {
    revoked: String,
}

async fn page(
    state: &AppState,
    viewer: &Viewer,
    form: IssueForm,
    errors: FieldErrors,
    done: &Done,
) -> Result<TokensPage, PageError> {
    let all: Vec<api::Token> = apicall::get(state, viewer, "/api/v1/tokens").await?;
    let users: Vec<api::User> = apicall::get(state, viewer, "/api/v1/users").await?;
    let now = Utc::now();
    let (mut sessions, mut tokens) = (Vec::new(), Vec::new());
    let mut ended_sessions = 0;
    for t in all {
        let shown = Shown::of(t, now, viewer);
        match (shown.via.is_empty(), shown.active()) {
            (true, _) => tokens.push(shown),
            (false, true) => sessions.push(shown),
            (false, false) => ended_sessions += 1,
        }
    }
    // Newest first.
    sessions.sort_by_key(|s| std::cmp::Reverse(s.token.created_at));
    tokens.sort_by_key(|t| std::cmp::Reverse(t.token.created_at));
    let mut layout = Layout::new("Tokens and sessions", "admin", viewer);
    if !done.revoked.is_empty() {
        layout.flash = Some(Flash {
            error: false,
            text: format!(
                "Token {} revoked: it is refused from now on (a session of it is signed out).",
                done.revoked
            ),
        });
    }
    Ok(TokensPage {
        layout,
        sessions,
        tokens,
        ended_sessions,
        users: users
            .into_iter()
            .filter(|u| !u.disabled)
            .map(|u| u.name)
            .collect(),
        form,
        errors,
    })
}

/// GET /admin/tokens.
pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    require_admin(&viewer)?;
    Ok(html(
        page(
            &state,
            &viewer,
            IssueForm::default(),
            FieldErrors::default(),
            &done,
        )
        .await?,
    ))
}

#[derive(Template)]
#[template(path = "admin/token_new.html")]
struct IssuedPage {
    layout: Layout,
    token: api::Token,
    secret: String,
    expires: String,
}

/// POST /admin/tokens: issues a token and shows its secret, this once.
pub async fn issue(
    State(state): State<AppState>,
    posted: Posted<IssueForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, form } = posted;
    require_admin(&viewer)?;
    let mut errors = FieldErrors::default();
    if form.user.is_empty() {
        errors.add("user", "Choose the user the token is for.");
    }
    if form.description.chars().count() > 200 {
        errors.add("description", "At most 200 characters.");
    }
    let days = match form.days.trim().parse::<i64>() {
        Ok(d) if (1..=3650).contains(&d) => Some(d),
        _ => {
            errors.add(
                "days",
                format!(
                    "{:?} is not a whole number of days from 1 to 3650.",
                    form.days.trim()
                ),
            );
            None
        }
    };
    if let (true, Some(days)) = (errors.is_empty(), days) {
        let req = api::TokenRequest {
            description: form.description.clone(),
            expires_at: Some(Utc::now() + Duration::days(days)),
        };
        let path = format!("/api/v1/users/{}/tokens", encode(&form.user));
        match apicall::call::<_, api::NewToken>(&state, &viewer, Method::POST, &path, &req).await {
            Ok(new) => {
                let expires = Shown::when(&new.token.expires_at);
                let mut response = html_with(
                    StatusCode::CREATED,
                    IssuedPage {
                        layout: Layout::new("New token", "admin", &viewer),
                        token: new.token,
                        secret: new.secret,
                        expires,
                    },
                );
                // The secret must not stay in any cache.
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                return Ok(response);
            }
            Err(e) if e.status == StatusCode::NOT_FOUND => {
                errors.add("user", format!("There is no user {:?}.", form.user));
            }
            Err(e) if e.status.is_client_error() => {
                errors.api(&e, &["description", "user"]);
            }
            Err(e) => return Err(e.into()),
        }
    }
    let page = page(&state, &viewer, form, errors, &Done::default()).await?;
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}

/// POST /admin/tokens/{id}/revoke.
pub async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
    posted: Posted<crate::portal::session::CsrfOnly>,
) -> Result<Response, PageError> {
    let viewer = posted.viewer;
    require_admin(&viewer)?;
    let path = format!("/api/v1/tokens/{}", encode(&id));
    let answer = apicall::send(&state, &viewer, Method::DELETE, &path, None).await?;
    if !answer.status.is_success() {
        let e: api::Error = serde_json::from_slice(&answer.body).unwrap_or(api::Error {
            error: String::from_utf8_lossy(&answer.body).into_owned(),
            field: String::new(),
        });
        return Err(PageError {
            status: answer.status,
            message: if answer.status == StatusCode::NOT_FOUND {
                format!("There is no token {id}.")
            } else {
                e.error
            },
        });
    }
    if id == viewer.who.token_id.to_string() {
        // This browser's own session: it is signed out.
        return Ok(Redirect::to("/signin").into_response());
    }
    Ok(Redirect::to(&format!("/admin/tokens?revoked={}", encode(&id))).into_response())
}
