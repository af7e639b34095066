//! /admin/sso: how single sign-on is set up, and the rules that map the
//! configured claim's values to a team and a role (admins only). The
//! rules are read at each SSO sign-in (`portal::sso`); every change is in
//! the audit log.
//!
//! The API has no routes for these rules (they concern the portal's
//! sign-in only), so this page reads and writes them itself, after the
//! same check the API makes of an admin-only route.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;

use crate::api::{ROLE_ADMIN, ROLE_FINANCE, ROLES};
use crate::portal::render::{Flash, Layout, PageError, html_with};
use crate::portal::session::{Posted, Viewer};
use crate::server::AppState;
use crate::server::auth::ADMINS;
use crate::store::accounts;
use crate::store::audit::{self, Actor, Change};

/// A rule as the page shows it.
pub struct RuleRow {
    pub id: i64,
    pub claim_value: String,
    pub team: String,
    pub role: String,
}

/// How SSO is set up, for the page.
pub struct Setup {
    pub issuer: String,
    pub client_id: String,
    pub redirect_url: String,
    pub post_logout_url: String,
    pub claim: String,
    pub scopes: String,
    pub discovered: bool,
}

#[derive(Template)]
#[template(path = "admin_sso.html")]
struct SsoAdmin {
    layout: Layout,
    setup: Option<Setup>,
    claim: String,
    rules: Vec<RuleRow>,
    teams: Vec<String>,
    roles: Vec<&'static str>,
    form: AddForm,
    errors: FormErrors,
}

/// The new rule's fields.
#[derive(Deserialize, Default, Clone)]
pub struct AddForm {
    #[serde(default)]
    pub claim_value: String,
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub role: String,
}

/// What is wrong with the new rule, by field, in words.
#[derive(Default)]
struct FormErrors {
    claim_value: String,
    team: String,
    role: String,
}

impl FormErrors {
    fn any(&self) -> bool {
        !(self.claim_value.is_empty() && self.team.is_empty() && self.role.is_empty())
    }
}

#[derive(Deserialize, Default)]
pub struct DoneQuery {
    #[serde(default)]
    done: String,
}

fn internal(e: sqlx::Error) -> PageError {
    tracing::error!(error = %e, "portal: the SSO rules");
    PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: "The server could not read its database; see its log.".into(),
    }
}

fn admin_only(viewer: &Viewer) -> Result<(), PageError> {
    viewer
        .who
        .require(ADMINS, "edit the single sign-on mapping")
        .map_err(|_| {
            PageError::forbidden(
                "Only administrators may see and change how single sign-on maps accounts.",
            )
        })
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    form: AddForm,
    errors: FormErrors,
    flash: Option<Flash>,
) -> Result<Response, PageError> {
    let rules = sqlx::query_as!(
        RuleRow,
        r#"SELECT r.id, r.claim_value, COALESCE(t.name, '') AS "team!", COALESCE(r.role, '') AS "role!"
           FROM sso_claim_rules r LEFT JOIN teams t ON t.id = r.team_id
           ORDER BY r.position, r.id"#
    )
    .fetch_all(&state.pool)
    .await
    .map_err(internal)?;
    let teams = accounts::teams(&state.pool, None)
        .await
        .map_err(internal)?
        .into_iter()
        .map(|t| t.name)
        .collect();
    let (setup, claim) = match state.portal.sso.as_ref() {
        Some(sso) => {
            let s = &sso.settings;
            (
                Some(Setup {
                    issuer: s.issuer.clone(),
                    client_id: s.client_id.clone(),
                    redirect_url: s.redirect_url.clone(),
                    post_logout_url: s.post_logout_redirect_url.clone(),
                    claim: s.claim.clone(),
                    scopes: s.scopes.join(" "),
                    discovered: sso.discovered().await,
                }),
                s.claim.clone(),
            )
        }
        None => (None, "groups".to_string()),
    };
    let mut layout = Layout::new("Single sign-on", "admin", viewer);
    layout.flash = flash;
    let status = if errors.any() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    Ok(html_with(
        status,
        SsoAdmin {
            layout,
            setup,
            claim,
            rules,
            teams,
            roles: ROLES.to_vec(),
            form,
            errors,
        },
    ))
}

/// GET /admin/sso.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<DoneQuery>,
) -> Result<Response, PageError> {
    admin_only(&viewer)?;
    let flash = match q.done.as_str() {
        "added" => Some("The rule was added; it applies from the next sign-in."),
        "deleted" => Some("The rule was deleted; it applies from the next sign-in."),
        "moved" => Some("The rule was moved; the order applies from the next sign-in."),
        _ => None,
    }
    .map(|text| Flash {
        error: false,
        text: text.to_string(),
    });
    render(
        &state,
        &viewer,
        AddForm::default(),
        FormErrors::default(),
        flash,
    )
    .await
}

fn actor(viewer: &Viewer) -> Actor<'_> {
    Actor {
        user_id: viewer.who.user_id,
        name: &viewer.who.user,
    }
}

/// POST /admin/sso/rules: a new rule at the end of the list.
pub async fn add(
    State(state): State<AppState>,
    posted: Posted<AddForm>,
) -> Result<Response, PageError> {
    let viewer = posted.viewer;
    admin_only(&viewer)?;
    let mut form = posted.form;
    form.claim_value = form.claim_value.trim().to_string();
    let mut errors = FormErrors::default();
    if form.claim_value.is_empty() {
        errors.claim_value =
            "Give the value of the claim that this rule matches, for example ml-leads.".into();
    } else if form.claim_value.chars().count() > 200 {
        errors.claim_value = "A claim value of at most 200 characters, please.".into();
    }
    if !form.role.is_empty() && !ROLES.contains(&form.role.as_str()) {
        errors.role = format!(
            "There is no role {:?}; choose one from the list.",
            form.role
        );
    }
    if form.team.is_empty() && form.role.is_empty() {
        errors.team = "Choose a team, a role, or both.".into();
    } else if !form.team.is_empty() && (form.role == ROLE_ADMIN || form.role == ROLE_FINANCE) {
        errors.team = format!(
            "Administrators and finance belong to no team: leave the team empty for the role {}.",
            form.role
        );
    }
    let mut tx = state.pool.begin().await.map_err(internal)?;
    let team_id = if form.team.is_empty() {
        None
    } else {
        match accounts::team(&mut *tx, &form.team)
            .await
            .map_err(internal)?
        {
            Some(t) => Some(t.id),
            None => {
                errors.team = format!("There is no team named {}.", form.team);
                None
            }
        }
    };
    if errors.any() {
        drop(tx);
        let flash = Some(Flash {
            error: true,
            text: "The rule was not added: see below.".into(),
        });
        return render(&state, &viewer, form, errors, flash).await;
    }
    let role = (!form.role.is_empty()).then(|| form.role.clone());
    let id = sqlx::query_scalar!(
        "INSERT INTO sso_claim_rules (position, claim_value, team_id, role)
         VALUES ((SELECT COALESCE(max(position), 0) + 1 FROM sso_claim_rules), $1, $2, $3)
         RETURNING id",
        form.claim_value,
        team_id,
        role,
    )
    .fetch_one(&mut *tx)
    .await
    .map_err(internal)?;
    audit::record(
        &mut *tx,
        actor(&viewer),
        Change {
            action: "sso_rule.create",
            target_kind: "sso_rule",
            target: &id.to_string(),
            before: None,
            after: Some(
                json!({"claim_value": form.claim_value, "team": form.team, "role": form.role}),
            ),
        },
    )
    .await
    .map_err(internal)?;
    tx.commit().await.map_err(internal)?;
    Ok(Redirect::to("/admin/sso?done=added").into_response())
}

/// POST /admin/sso/rules/{id}/delete.
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    posted: Posted<crate::portal::session::CsrfOnly>,
) -> Result<Response, PageError> {
    let viewer = posted.viewer;
    admin_only(&viewer)?;
    let mut tx = state.pool.begin().await.map_err(internal)?;
    let gone = sqlx::query!(
        r#"DELETE FROM sso_claim_rules r WHERE r.id = $1
           RETURNING r.claim_value, r.role, (SELECT name FROM teams WHERE id = r.team_id) AS "team?""#,
        id
    )
    .fetch_optional(&mut *tx)
    .await
    .map_err(internal)?;
    let Some(gone) = gone else {
        return Err(PageError::not_found(
            "That rule does not exist (any more); reload the page.",
        ));
    };
    audit::record(
        &mut *tx,
        actor(&viewer),
        Change {
            action: "sso_rule.delete",
            target_kind: "sso_rule",
            target: &id.to_string(),
            before: Some(json!({
                "claim_value": gone.claim_value,
                "team": gone.team.unwrap_or_default(),
                "role": gone.role.unwrap_or_default(),
            })),
            after: None,
        },
    )
    .await
    .map_err(internal)?;
    tx.commit().await.map_err(internal)?;
    Ok(Redirect::to("/admin/sso?done=deleted").into_response())
}

#[derive(Deserialize)]
pub struct MoveForm {
    #[serde(default)]
    dir: String,
}

/// POST /admin/sso/rules/{id}/move with `dir` up or down: swaps the rule
/// with its neighbour (the rules are numbered 1.. again).
pub async fn move_rule(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    posted: Posted<MoveForm>,
) -> Result<Response, PageError> {
    let viewer = posted.viewer;
    admin_only(&viewer)?;
    let mut tx = state.pool.begin().await.map_err(internal)?;
    let mut ids =
        sqlx::query_scalar!("SELECT id FROM sso_claim_rules ORDER BY position, id FOR UPDATE")
            .fetch_all(&mut *tx)
            .await
            .map_err(internal)?;
    let Some(at) = ids.iter().position(|r| *r == id) else {
        return Err(PageError::not_found(
            "That rule does not exist (any more); reload the page.",
        ));
    };
    let to = match posted.form.dir.as_str() {
        "up" if at > 0 => at - 1,
        "down" if at + 1 < ids.len() => at + 1,
        "up" | "down" => at,
        _ => {
            return Err(PageError {
                status: StatusCode::BAD_REQUEST,
                message: "A rule moves up or down.".into(),
            });
        }
    };
    if to != at {
        ids.swap(at, to);
        let positions: Vec<i32> = (1..=ids.len() as i32).collect();
        sqlx::query!(
            "UPDATE sso_claim_rules r SET position = x.position
             FROM unnest($1::bigint[], $2::int[]) AS x(id, position) WHERE r.id = x.id",
            &ids,
            &positions,
        )
        .execute(&mut *tx)
        .await
        .map_err(internal)?;
        audit::record(
            &mut *tx,
            actor(&viewer),
            Change {
                action: "sso_rule.move",
                target_kind: "sso_rule",
                target: &id.to_string(),
                before: Some(json!({"position": at + 1})),
                after: Some(json!({"position": to + 1})),
            },
        )
        .await
        .map_err(internal)?;
    }
    tx.commit().await.map_err(internal)?;
    Ok(Redirect::to("/admin/sso?done=moved").into_response())
}
