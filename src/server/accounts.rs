//! Accounts: who am I, teams and their quotas, projects, users, tokens,
//! the profile catalog and the audit log (the Go build's `admin.go` and
//! `auth.go`). Every change by an admin or a lead writes an audit row in
//! the same transaction.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{Duration, Utc};
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;

use super::AppState;
use super::auth::{ADMINS, LEADS, Principal};
use super::decode::RawJson;
use super::error::{ApiError, ApiResult};
use crate::api::{self, ROLE_ADMIN, ROLE_FINANCE, ROLES};
use crate::db::bootstrap::{new_token, token_hash};
use crate::store::accounts::{self, TeamFields, TeamRow, TokenRow, UserRow};
use crate::store::audit::{self, Actor, Change};

/// How long a token lives when the request does not say.
pub const DEFAULT_TOKEN_DAYS: i64 = 90;

/// What team, project and user names look like: lower-case letters,
/// digits and '-', starting with a letter, at most 40 long (they appear in
/// job IDs, labels and reports).
pub fn check_name(field: &str, name: &str) -> ApiResult<()> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 40
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !name.ends_with('-');
    if ok {
        return Ok(());
    }
    Err(ApiError::bad_request(
        field,
        format!(
            "{field}: {name:?} must be lower-case letters, digits and '-', start with a letter, at most 40 long"
        ),
    ))
}

pub(super) fn actor(who: &Principal) -> Actor<'_> {
    Actor {
        user_id: who.user_id,
        name: &who.user,
    }
}

#[utoipa::path(get, path = "/api/v1/whoami", tag = "accounts",
    summary = "The caller's user, role and team",
    description = "Roles: every role.",
    responses((status = 200, body = api::Whoami), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn whoami(who: Principal) -> Json<api::Whoami> {
    Json(api::Whoami {
        user: who.user,
        role: who.role,
        team: who.team,
        token_id: who.token_id.to_string(),
    })
}

fn team_view(t: &TeamRow) -> api::Team {
    api::Team {
        name: t.name.clone(),
        guaranteed_gpus: t.guarantee_milli as f64 / 1000.0,
        burst_gpus: t.burst_milli as f64 / 1000.0,
        weight: t.weight,
        classes: t.classes.clone(),
        business_unit: t.business_unit.clone().unwrap_or_default(),
        projects: t.projects.clone(),
    }
}

/// The team named `name` if the caller may see it; any other is not found.
pub(super) async fn visible_team(
    state: &AppState,
    who: &Principal,
    name: &str,
) -> ApiResult<TeamRow> {
    match accounts::team(&state.pool, name).await? {
        Some(t) if who.sees(&t.name) => Ok(t),
        _ => Err(ApiError::not_found("team", name)),
    }
}

#[utoipa::path(get, path = "/api/v1/teams", tag = "accounts",
    summary = "Teams (lead, member, viewer: their own)",
    description = "Roles: every role; admin and finance see every team.",
    responses((status = 200, body = Vec<api::Team>), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_teams(
    State(state): State<AppState>,
    who: Principal,
) -> ApiResult<Json<Vec<api::Team>>> {
    let teams = accounts::teams(&state.pool, None).await?;
    Ok(Json(
        teams
            .iter()
            .filter(|t| who.sees(&t.name))
            .map(team_view)
            .collect(),
    ))
}

#[utoipa::path(get, path = "/api/v1/teams/{team}", tag = "accounts",
    summary = "A team",
    description = "Roles: every role (another team's: 404).",
    params(("team" = String, Path, description = "team name")),
    responses((status = 200, body = api::Team), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn get_team(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<api::Team>> {
    Ok(Json(team_view(&visible_team(&state, &who, &name).await?)))
}

#[utoipa::path(post, path = "/api/v1/teams", tag = "accounts",
    summary = "Create a team",
    description = "Roles: admin. Defaults: no guarantee, the whole cluster as burst, weight 1, every class.",
    request_body = api::TeamRequest,
    responses((status = 201, body = api::Team), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn create_team(
    State(state): State<AppState>,
    who: Principal,
    body: RawJson,
) -> ApiResult<(StatusCode, Json<api::Team>)> {
    who.require(ADMINS, "create teams")?;
    let req: api::TeamRequest = body.decode()?;
    check_name("name", &req.name)?;
    let mut tx = state.pool.begin().await?;
    let mut fields = TeamFields {
        guarantee_milli: 0,
        burst_milli: state.cluster.gpus * 1000,
        weight: 1.0,
        classes: vec!["production".into(), "batch".into(), "best-effort".into()],
        business_unit_id: None,
    };
    apply_team(&state, &mut tx, &req.name, &req, &mut fields).await?;
    let Some(team_id) = accounts::insert_team(&mut *tx, &req.name, &fields).await? else {
        return Err(ApiError::conflict(format!("team {:?} exists", req.name)));
    };
    // Every team starts with the project submissions default to, as in
    // the Go build.
    accounts::insert_project(&mut *tx, team_id, "default").await?;
    let team = accounts::team(&mut *tx, &req.name)
        .await?
        .ok_or_else(|| ApiError::internal(&"the new team vanished"))?;
    let view = team_view(&team);
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "team.create",
            target_kind: "team",
            target: &team.name,
            before: None,
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(patch, path = "/api/v1/teams/{team}", tag = "accounts",
    summary = "Change a team's quota, weight, classes or business unit",
    description = "Roles: admin.",
    params(("team" = String, Path, description = "team name")),
    request_body = api::TeamRequest,
    responses((status = 200, body = api::Team), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn patch_team(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    body: RawJson,
) -> ApiResult<Json<api::Team>> {
    who.require(ADMINS, "change teams")?;
    let before = visible_team(&state, &who, &name).await?;
    let req: api::TeamRequest = body.decode()?;
    if !req.name.is_empty() && req.name != before.name {
        return Err(ApiError::bad_request(
            "name",
            "name: a team cannot be renamed",
        ));
    }
    let mut tx = state.pool.begin().await?;
    let mut fields = TeamFields {
        guarantee_milli: before.guarantee_milli,
        burst_milli: before.burst_milli,
        weight: before.weight,
        classes: before.classes.clone(),
        business_unit_id: accounts::team_business_unit(&mut *tx, before.id).await?,
    };
    apply_team(&state, &mut tx, &before.name, &req, &mut fields).await?;
    accounts::update_team(&mut *tx, before.id, &fields).await?;
    let after = accounts::team(&mut *tx, &name)
        .await?
        .ok_or_else(|| ApiError::internal(&"the team vanished"))?;
    let view = team_view(&after);
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "team.update",
            target_kind: "team",
            target: &name,
            before: Some(json!(team_view(&before))),
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok(Json(view))
}

/// Checks a team request's fields and sets them: quotas within the
/// cluster, burst at least the guarantee, the teams' guarantees adding up
/// to at most the cluster, a weight above 0, known classes.
async fn apply_team(
    state: &AppState,
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    team: &str,
    req: &api::TeamRequest,
    f: &mut TeamFields,
) -> ApiResult<()> {
    let gpus = state.cluster.gpus as f64;
    for (field, value, out) in [
        (
            "guaranteed_gpus",
            req.guaranteed_gpus,
            &mut f.guarantee_milli,
        ),
        ("burst_gpus", req.burst_gpus, &mut f.burst_milli),
    ] {
        let Some(v) = value else { continue };
        if !(v >= 0.0 && v <= gpus) {
            return Err(ApiError::bad_request(
                field,
                format!("{field}: {v} must be from 0 to the cluster's {gpus} GPUs"),
            ));
        }
        *out = (v * 1000.0).round() as i64;
    }
    if f.burst_milli < f.guarantee_milli {
        return Err(ApiError::bad_request(
            "burst_gpus",
            format!(
                "burst_gpus: {} is below guaranteed_gpus {}",
                f.burst_milli as f64 / 1000.0,
                f.guarantee_milli as f64 / 1000.0
            ),
        ));
    }
    if let Some(w) = req.weight {
        if !(w > 0.0 && w <= 1000.0) {
            return Err(ApiError::bad_request(
                "weight",
                format!("weight: {w} must be above 0 and at most 1000"),
            ));
        }
        f.weight = w;
    }
    if let Some(classes) = &req.classes {
        if classes.is_empty() {
            return Err(ApiError::bad_request(
                "classes",
                "classes: empty; give at least one of production, batch, best-effort",
            ));
        }
        for (i, c) in classes.iter().enumerate() {
            if let Err(e) = partita_engine::workload::parse_class(c) {
                return Err(ApiError::bad_request(
                    "classes",
                    format!("classes[{i}]: {e}"),
                ));
            }
            if classes[..i].contains(c) {
                return Err(ApiError::bad_request(
                    "classes",
                    format!("classes[{i}]: {c} is given twice"),
                ));
            }
        }
        f.classes = classes.clone();
    }
    if let Some(bu) = &req.business_unit {
        f.business_unit_id = if bu.is_empty() {
            None
        } else {
            check_name("business_unit", bu)?;
            Some(accounts::business_unit(&mut **tx, bu).await?)
        };
    }
    let total = accounts::other_guarantees(&mut **tx, team).await? + f.guarantee_milli;
    if total as f64 > gpus * 1000.0 {
        return Err(ApiError::bad_request(
            "guaranteed_gpus",
            format!(
                "guaranteed_gpus: the teams' guarantees would add up to {} GPUs, more than the cluster's {gpus}",
                total as f64 / 1000.0
            ),
        ));
    }
    Ok(())
}

#[utoipa::path(get, path = "/api/v1/teams/{team}/projects", tag = "accounts",
    summary = "A team's projects",
    description = "Roles: every role (another team's: 404).",
    params(("team" = String, Path, description = "team name")),
    responses((status = 200, body = Vec<api::Project>), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_projects(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<api::Project>>> {
    let team = visible_team(&state, &who, &name).await?;
    let rows = accounts::projects(&state.pool, team.id).await?;
    Ok(Json(
        rows.into_iter()
            .map(|p| api::Project {
                team: p.team,
                name: p.name,
                created_at: p.created_at,
            })
            .collect(),
    ))
}

#[utoipa::path(post, path = "/api/v1/teams/{team}/projects", tag = "accounts",
    summary = "Create a project (admins, the team's leads)",
    description = "Roles: admin, lead (own team).",
    params(("team" = String, Path, description = "team name")),
    request_body = api::ProjectRequest,
    responses((status = 201, body = api::Project), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn create_project(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    body: RawJson,
) -> ApiResult<(StatusCode, Json<api::Project>)> {
    who.require(LEADS, "create projects")?;
    let team = visible_team(&state, &who, &name).await?;
    let req: api::ProjectRequest = body.decode()?;
    check_name("name", &req.name)?;
    let mut tx = state.pool.begin().await?;
    let Some(created_at) = accounts::insert_project(&mut *tx, team.id, &req.name).await? else {
        return Err(ApiError::conflict(format!(
            "project {:?} of team {:?} exists",
            req.name, team.name
        )));
    };
    let view = api::Project {
        team: team.name.clone(),
        name: req.name.clone(),
        created_at,
    };
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "project.create",
            target_kind: "project",
            target: &format!("{}/{}", team.name, req.name),
            before: None,
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

fn user_view(u: &UserRow) -> api::User {
    api::User {
        name: u.name.clone(),
        role: u.role.clone(),
        team: u.team.clone().unwrap_or_default(),
        disabled: u.disabled,
        created_at: u.created_at,
    }
}

#[utoipa::path(get, path = "/api/v1/users", tag = "accounts",
    summary = "Users",
    description = "Roles: admin.",
    responses((status = 200, body = Vec<api::User>), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_users(
    State(state): State<AppState>,
    who: Principal,
) -> ApiResult<Json<Vec<api::User>>> {
    who.require(ADMINS, "list users")?;
    let users = accounts::users(&state.pool, None).await?;
    Ok(Json(users.iter().map(user_view).collect()))
}

/// Checks a role and its team: admin and finance have none, every other
/// role exactly one that exists. Gives the team's id.
async fn role_team(state: &AppState, role: &str, team: &str) -> ApiResult<Option<i64>> {
    if !ROLES.contains(&role) {
        return Err(ApiError::bad_request(
            "role",
            format!("role: {role:?} is not one of {}", ROLES.join(", ")),
        ));
    }
    let teamless = role == ROLE_ADMIN || role == ROLE_FINANCE;
    if teamless && !team.is_empty() {
        return Err(ApiError::bad_request(
            "team",
            format!("team: role {role} belongs to no team"),
        ));
    }
    if teamless {
        return Ok(None);
    }
    if team.is_empty() {
        return Err(ApiError::bad_request(
            "team",
            format!("team: required for role {role}"),
        ));
    }
    match accounts::team(&state.pool, team).await? {
        Some(t) => Ok(Some(t.id)),
        None => Err(ApiError::bad_request(
            "team",
            format!("team: {team:?} does not exist"),
        )),
    }
}

#[utoipa::path(post, path = "/api/v1/users", tag = "accounts",
    summary = "Create a user",
    description = "Roles: admin. Roles admin and finance have no team; the others need one.",
    request_body = api::UserRequest,
    responses((status = 201, body = api::User), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn create_user(
    State(state): State<AppState>,
    who: Principal,
    body: RawJson,
) -> ApiResult<(StatusCode, Json<api::User>)> {
    who.require(ADMINS, "create users")?;
    let req: api::UserRequest = body.decode()?;
    check_name("name", &req.name)?;
    let team_id = role_team(&state, &req.role, &req.team).await?;
    let mut tx = state.pool.begin().await?;
    if accounts::insert_user(&mut *tx, &req.name, &req.role, team_id)
        .await?
        .is_none()
    {
        return Err(ApiError::conflict(format!("user {:?} exists", req.name)));
    }
    let user = accounts::user(&mut *tx, &req.name)
        .await?
        .ok_or_else(|| ApiError::internal(&"the new user vanished"))?;
    let view = user_view(&user);
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "user.create",
            target_kind: "user",
            target: &user.name,
            before: None,
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(patch, path = "/api/v1/users/{user}", tag = "accounts",
    summary = "Change a user's role or team, or disable (enable) them",
    description = "Roles: admin. An admin may not demote or disable themselves. A disabled user's tokens are refused.",
    params(("user" = String, Path, description = "user name")),
    request_body = api::UserPatch,
    responses((status = 200, body = api::User), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn patch_user(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    body: RawJson,
) -> ApiResult<Json<api::User>> {
    who.require(ADMINS, "change users")?;
    let Some(before) = accounts::user(&state.pool, &name).await? else {
        return Err(ApiError::not_found("user", &name));
    };
    let req: api::UserPatch = body.decode()?;
    let role = req.role.clone().unwrap_or_else(|| before.role.clone());
    let teamless = role == ROLE_ADMIN || role == ROLE_FINANCE;
    // A role without a team drops the old one unless a team is named.
    let team = match &req.team {
        Some(t) => t.clone(),
        None if teamless => String::new(),
        None => before.team.clone().unwrap_or_default(),
    };
    let disabled = req.disabled.unwrap_or(before.disabled);
    if before.id == who.user_id && (role != ROLE_ADMIN || disabled) {
        return Err(ApiError::bad_request(
            if disabled { "disabled" } else { "role" },
            "an admin may not demote or disable themselves (ask another admin)",
        ));
    }
    let team_id = role_team(&state, &role, &team).await?;
    let mut tx = state.pool.begin().await?;
    accounts::update_user(&mut *tx, before.id, &role, team_id, disabled).await?;
    let after = accounts::user(&mut *tx, &name)
        .await?
        .ok_or_else(|| ApiError::internal(&"the user vanished"))?;
    let view = user_view(&after);
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "user.update",
            target_kind: "user",
            target: &name,
            before: Some(json!(user_view(&before))),
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok(Json(view))
}

fn token_view(t: &TokenRow) -> api::Token {
    api::Token {
        id: t.id.to_string(),
        user: t.user.clone(),
        description: t.description.clone(),
        created_at: t.created_at,
        expires_at: t.expires_at,
        revoked_at: t.revoked_at,
    }
}

#[utoipa::path(post, path = "/api/v1/users/{user}/tokens", tag = "accounts",
    summary = "Issue a token for a user; the secret is shown once",
    description = "Roles: admin. Only the secret's SHA-256 is stored. Default expiry: 90 days.",
    params(("user" = String, Path, description = "user name")),
    request_body = api::TokenRequest,
    responses((status = 201, body = api::NewToken), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn create_token(
    State(state): State<AppState>,
    who: Principal,
    Path(name): Path<String>,
    body: RawJson,
) -> ApiResult<(StatusCode, Json<api::NewToken>)> {
    who.require(ADMINS, "issue tokens")?;
    let req: api::TokenRequest = body.decode()?;
    if req.description.len() > 200 {
        return Err(ApiError::bad_request(
            "description",
            format!(
                "description: {} characters; at most 200",
                req.description.len()
            ),
        ));
    }
    let now = Utc::now();
    let expires_at = req
        .expires_at
        .unwrap_or(now + Duration::days(DEFAULT_TOKEN_DAYS));
    if expires_at <= now {
        return Err(ApiError::bad_request(
            "expires_at",
            format!(
                "expires_at: {} is not in the future",
                expires_at.to_rfc3339()
            ),
        ));
    }
    let Some(user) = accounts::user(&state.pool, &name).await? else {
        return Err(ApiError::not_found("user", &name));
    };
    if user.disabled {
        return Err(ApiError::conflict(format!(
            "user {name:?} is disabled: enable them first"
        )));
    }
    let secret = new_token();
    let mut tx = state.pool.begin().await?;
    let id = accounts::insert_token(
        &mut *tx,
        user.id,
        &token_hash(&secret),
        &req.description,
        Some(expires_at),
    )
    .await?;
    let row = accounts::tokens(&mut *tx, Some(id))
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal(&"the new token vanished"))?;
    let view = token_view(&row);
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "token.create",
            target_kind: "token",
            target: &view.id,
            before: None,
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok((
        StatusCode::CREATED,
        Json(api::NewToken {
            token: view,
            secret,
        }),
    ))
}

#[utoipa::path(get, path = "/api/v1/tokens", tag = "accounts",
    summary = "Tokens, without secrets",
    description = "Roles: admin.",
    responses((status = 200, body = Vec<api::Token>), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_tokens(
    State(state): State<AppState>,
    who: Principal,
) -> ApiResult<Json<Vec<api::Token>>> {
    who.require(ADMINS, "list tokens")?;
    let rows = accounts::tokens(&state.pool, None).await?;
    Ok(Json(rows.iter().map(token_view).collect()))
}

#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "accounts",
    summary = "Revoke a token",
    description = "Roles: admin. It is refused from the next request on.",
    params(("id" = String, Path, description = "token id")),
    responses((status = 200, body = api::Token), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn revoke_token(
    State(state): State<AppState>,
    who: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<api::Token>> {
    who.require(ADMINS, "revoke tokens")?;
    let Ok(num) = id.parse::<i64>() else {
        return Err(ApiError::not_found("token", &id));
    };
    let mut tx = state.pool.begin().await?;
    let Some(before) = accounts::tokens(&mut *tx, Some(num)).await?.pop() else {
        return Err(ApiError::not_found("token", &id));
    };
    accounts::revoke_token(&mut *tx, num).await?;
    let after = accounts::tokens(&mut *tx, Some(num))
        .await?
        .pop()
        .ok_or_else(|| ApiError::internal(&"the token vanished"))?;
    let view = token_view(&after);
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "token.revoke",
            target_kind: "token",
            target: &id,
            before: Some(json!(token_view(&before))),
            after: Some(json!(view)),
        },
    )
    .await?;
    commit_change(&state, tx).await?;
    Ok(Json(view))
}

#[utoipa::path(get, path = "/api/v1/profiles", tag = "accounts",
    summary = "The workload profile catalog",
    description = "Roles: every role.",
    responses((status = 200, body = Vec<api::Profile>), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_profiles(_who: Principal) -> Json<Vec<api::Profile>> {
    Json(
        partita_engine::profiles::all()
            .into_iter()
            .map(|p| api::Profile {
                kind: p.kind.as_str().to_string(),
                peak_memory_mib: p.peak_memory_mib,
                compute: p.compute,
                gpus: p.gpus,
                cpu_milli: p.cpu_milli,
                host_memory_mib: p.host_memory_mib,
                basis: p.derivation.basis.clone(),
                name: p.name,
            })
            .collect(),
    )
}

/// The query of GET /audit.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// page size, 1 to 1000 (default 100)
    pub limit: Option<String>,
    /// the cursor `next` of the previous page
    pub after: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/audit", tag = "accounts",
    summary = "The audit log, newest first",
    description = "Roles: admin. Every change by an admin or a lead: who, when (wall time), the object before and after.",
    params(AuditQuery),
    responses((status = 200, body = api::AuditList), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_audit(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<AuditQuery>,
) -> ApiResult<Json<api::AuditList>> {
    who.require(ADMINS, "read the audit log")?;
    let limit = query_int("limit", q.limit.as_deref(), 100, 1, 1000)?;
    let after = q
        .after
        .as_deref()
        .filter(|a| !a.is_empty())
        .map(|a| query_int("after", Some(a), 0, 0, i64::MAX))
        .transpose()?;
    let rows = audit::list(&state.pool, after, limit).await?;
    let next = if rows.len() as i64 == limit {
        rows.last().map(|r| r.seq.to_string()).unwrap_or_default()
    } else {
        String::new()
    };
    let entries = rows
        .into_iter()
        .map(|r| api::AuditEntry {
            seq: r.seq,
            at: r.at,
            actor: r.actor,
            action: r.action,
            target_kind: r.target_kind,
            target: r.target,
            before: r.before,
            after: r.after,
        })
        .collect();
    Ok(Json(api::AuditList { entries, next }))
}

/// An optional whole number query parameter within [lo, hi].
pub fn query_int(
    name: &str,
    value: Option<&str>,
    default: i64,
    lo: i64,
    hi: i64,
) -> ApiResult<i64> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    match v.parse::<i64>() {
        Ok(n) if n >= lo && n <= hi && n.to_string() == v => Ok(n),
        _ => Err(ApiError::bad_request(
            name,
            format!("{name}: {v:?} must be a whole number from {lo} to {hi}"),
        )),
    }
}

/// Commits an account change and forgets at once the accounts this
/// process holds in memory, so that the change holds from the next
/// request on (other processes hear of it through PostgreSQL's notice).
async fn commit_change(
    state: &AppState,
    tx: sqlx::Transaction<'_, sqlx::Postgres>,
) -> Result<(), ApiError> {
    tx.commit().await?;
    state.accounts.forget();
    Ok(())
}
