//! Users: every user with their role, team and whether they are
//! disabled, each changeable in its row; a new user.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{FieldErrors, name_problem, require_admin};
use crate::api::{self, ROLE_ADMIN, ROLE_FINANCE, ROLES};
use crate::portal::apicall;
use crate::portal::render::{Flash, Layout, PageError, html, html_with};
use crate::portal::session::{Posted, Viewer, encode};
use crate::server::AppState;

/// A user's form, as sent: a row's (role, team, disabled) or a new
/// user's (name, role, team).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UserForm {
    pub name: String,
    pub role: String,
    pub team: String,
    /// The checkbox: present when ticked.
    pub disabled: Option<String>,
}

/// One row of the table: the user, the form as shown and its errors.
pub struct Row {
    pub user: api::User,
    pub form: UserForm,
    pub errors: FieldErrors,
}

#[derive(Template)]
#[template(path = "admin/users.html")]
struct UsersPage {
    layout: Layout,
    rows: Vec<Row>,
    teams: Vec<String>,
    roles: [&'static str; 5],
    form: UserForm,
    errors: FieldErrors,
    me: String,
}

const FIELDS: [&str; 4] = ["name", "role", "team", "disabled"];

/// Checks a role and its team as the API does, in words.
fn check(form: &UserForm, teams: &[String], errors: &mut FieldErrors) {
    if !ROLES.contains(&form.role.as_str()) {
        errors.add("role", format!("Choose a role: {}.", ROLES.join(", ")));
        return;
    }
    let teamless = form.role == ROLE_ADMIN || form.role == ROLE_FINANCE;
    if teamless && !form.team.is_empty() {
        errors.add(
            "team",
            format!("Role {} belongs to no team: choose \"no team\".", form.role),
        );
    } else if !teamless && form.team.is_empty() {
        errors.add("team", format!("Role {} needs a team.", form.role));
    } else if !teamless && !teams.contains(&form.team) {
        errors.add("team", format!("There is no team {:?}.", form.team));
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Done {
    saved: String,
    created: String,
}

async fn page(
    state: &AppState,
    viewer: &Viewer,
    edited: Option<(String, UserForm, FieldErrors)>,
    new: Option<(UserForm, FieldErrors)>,
    done: &Done,
) -> Result<UsersPage, PageError> {
    let users: Vec<api::User> = apicall::get(state, viewer, "/api/v1/users").await?;
    let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
    let mut edited = edited;
    let rows = users
        .into_iter()
        .map(|u| {
            let (form, errors) = match edited.take_if(|(name, _, _)| *name == u.name) {
                Some((_, f, e)) => (f, e),
                None => (
                    UserForm {
                        name: u.name.clone(),
                        role: u.role.clone(),
                        team: u.team.clone(),
                        disabled: u.disabled.then(String::new),
                    },
                    FieldErrors::default(),
                ),
            };
            Row {
                user: u,
                form,
                errors,
            }
        })
        .collect();
    let (form, errors) = new.unwrap_or_else(|| {
        (
            UserForm {
                role: api::ROLE_MEMBER.into(),
                ..UserForm::default()
            },
            FieldErrors::default(),
        )
    });
    let mut layout = Layout::new("Users", "admin", viewer);
    layout.flash = if !done.saved.is_empty() {
        Some(Flash {
            error: false,
            text: format!("User {} saved.", done.saved),
        })
    } else if !done.created.is_empty() {
        Some(Flash {
            error: false,
            text: format!(
                "User {} created. Issue them a token on the tokens page, or let them sign in with single sign-on.",
                done.created
            ),
        })
    } else {
        None
    };
    Ok(UsersPage {
        layout,
        rows,
        teams: teams.into_iter().map(|t| t.name).collect(),
        roles: ROLES,
        form,
        errors,
        me: viewer.who.user.clone(),
    })
}

/// GET /admin/users.
pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    require_admin(&viewer)?;
    Ok(html(page(&state, &viewer, None, None, &done).await?))
}

async fn team_names(state: &AppState, viewer: &Viewer) -> Result<Vec<String>, PageError> {
    let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
    Ok(teams.into_iter().map(|t| t.name).collect())
}

/// POST /admin/users/{user}: a new role, team or disabled flag.
pub async fn save(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<UserForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, form } = posted;
    require_admin(&viewer)?;
    let mut errors = FieldErrors::default();
    check(&form, &team_names(&state, &viewer).await?, &mut errors);
    if errors.is_empty() {
        let patch = api::UserPatch {
            role: Some(form.role.clone()),
            team: Some(form.team.clone()),
            disabled: Some(form.disabled.is_some()),
        };
        let path = format!("/api/v1/users/{}", encode(&name));
        match apicall::call::<_, api::User>(&state, &viewer, Method::PATCH, &path, &patch).await {
            Ok(_) => {
                return Ok(
                    Redirect::to(&format!("/admin/users?saved={}", encode(&name))).into_response(),
                );
            }
            Err(e) if e.status.is_client_error() && e.status != StatusCode::NOT_FOUND => {
                errors.api(&e, &FIELDS)
            }
            Err(e) => return Err(e.into()),
        }
    }
    let page = page(
        &state,
        &viewer,
        Some((name, form, errors)),
        None,
        &Done::default(),
    )
    .await?;
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}

/// POST /admin/users: a new user.
pub async fn create(
    State(state): State<AppState>,
    posted: Posted<UserForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, mut form } = posted;
    require_admin(&viewer)?;
    form.name = form.name.trim().to_string();
    let mut errors = FieldErrors::default();
    if let Some(p) = name_problem(&form.name) {
        errors.add("name", p);
    }
    check(&form, &team_names(&state, &viewer).await?, &mut errors);
    if errors.is_empty() {
        let req = api::UserRequest {
            name: form.name.clone(),
            role: form.role.clone(),
            team: form.team.clone(),
        };
        match apicall::call::<_, api::User>(&state, &viewer, Method::POST, "/api/v1/users", &req)
            .await
        {
            Ok(u) => {
                return Ok(
                    Redirect::to(&format!("/admin/users?created={}", encode(&u.name)))
                        .into_response(),
                );
            }
            Err(e) if e.status == StatusCode::CONFLICT => {
                errors.add("name", format!("There is already a user {}.", form.name));
            }
            Err(e) if e.status.is_client_error() => errors.api(&e, &FIELDS),
            Err(e) => return Err(e.into()),
        }
    }
    let page = page(
        &state,
        &viewer,
        None,
        Some((form, errors)),
        &Done::default(),
    )
    .await?;
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}
