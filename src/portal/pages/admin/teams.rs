//! Teams and quotas: every team's guarantee, burst, weight, classes and
//! business unit, each editable, with what is wrong shown beside each
//! field, all together; a new team; a team's projects.
//!
//! The checks are the API's (`server::accounts::apply_team`), done here
//! first so that every problem shows at once (the API stops at the
//! first): the guarantees of all teams add up to at most the cluster's
//! GPUs (as the worker last published them, else the cluster the server
//! checks against), burst at least the guarantee, a weight above 0, at
//! least one class. The API checks again, and its answer, naming its
//! field, is shown beside that field.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{FieldErrors, name_problem, num, number, require_admin};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Flash, Layout, PageError, html, html_with};
use crate::portal::session::{Posted, Viewer, encode};
use crate::server::AppState;

/// The priority classes a team may be allowed.
pub const CLASSES: [&str; 3] = ["production", "batch", "best-effort"];

/// The fields of a team's form, as typed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TeamForm {
    pub name: String,
    pub guaranteed_gpus: String,
    pub burst_gpus: String,
    pub weight: String,
    pub classes: Vec<String>,
    pub business_unit: String,
}

impl TeamForm {
    fn of(t: &api::Team) -> TeamForm {
        TeamForm {
            name: t.name.clone(),
            guaranteed_gpus: num(t.guaranteed_gpus),
            burst_gpus: num(t.burst_gpus),
            weight: num(t.weight),
            classes: t.classes.clone(),
            business_unit: t.business_unit.clone(),
        }
    }

    /// A new team's form: the API's defaults.
    fn new_team(gpus: i64) -> TeamForm {
        TeamForm {
            guaranteed_gpus: "0".into(),
            burst_gpus: gpus.to_string(),
            weight: "1".into(),
            classes: CLASSES.iter().map(|c| c.to_string()).collect(),
            ..TeamForm::default()
        }
    }

    pub fn has_class(&self, class: &str) -> bool {
        self.classes.iter().any(|c| c == class)
    }
}

/// The cluster that guarantees must fit in.
#[derive(Debug, Clone)]
pub struct ClusterLimit {
    pub gpus: i64,
    /// Whether `gpus` is what the worker last published (else: the
    /// cluster the server checks quotas against).
    pub published: bool,
}

impl ClusterLimit {
    async fn get(state: &AppState, viewer: &Viewer) -> ClusterLimit {
        match apicall::get::<api::Cluster>(state, viewer, "/api/v1/cluster").await {
            Ok(c) => ClusterLimit {
                gpus: c.gpus,
                published: true,
            },
            Err(_) => ClusterLimit {
                gpus: state.cluster.gpus,
                published: false,
            },
        }
    }
}

/// The checks of a team's form, all together; the API's request when
/// there is nothing wrong. `others` is what the other teams guarantee.
pub fn check(
    form: &TeamForm,
    creating: bool,
    limit: &ClusterLimit,
    others: f64,
) -> Result<api::TeamRequest, FieldErrors> {
    let mut errors = FieldErrors::default();
    let gpus = limit.gpus as f64;
    if creating && let Some(p) = name_problem(form.name.trim()) {
        errors.add("name", p);
    }
    let mut quota = |field: &str, text: &str| match number(text) {
        Ok(v) if v < 0.0 => {
            errors.add(field, format!("{} is below 0.", num(v)));
            None
        }
        Ok(v) if v > gpus => {
            errors.add(
                field,
                format!("{} is more than the cluster's {} GPUs.", num(v), limit.gpus),
            );
            None
        }
        Ok(v) => Some(v),
        Err(e) => {
            errors.add(field, e);
            None
        }
    };
    let guarantee = quota("guaranteed_gpus", &form.guaranteed_gpus);
    let burst = quota("burst_gpus", &form.burst_gpus);
    if let Some(g) = guarantee
        && others + g > gpus + 1e-9
    {
        errors.add(
            "guaranteed_gpus",
            format!(
                "The teams' guarantees would add up to {} GPUs, more than the cluster's {}: the other teams guarantee {}, so this team can have at most {}.",
                num(others + g),
                limit.gpus,
                num(others),
                num((gpus - others).max(0.0))
            ),
        );
    }
    if let (Some(g), Some(b)) = (guarantee, burst)
        && b < g
    {
        errors.add(
            "burst_gpus",
            format!(
                "Burst {} is below the guarantee {}: it must be at least the guarantee.",
                num(b),
                num(g)
            ),
        );
    }
    let weight = match number(&form.weight) {
        Ok(w) if w <= 0.0 => {
            errors.add(
                "weight",
                format!("{} is not above 0: give a weight above 0.", num(w)),
            );
            None
        }
        Ok(w) if w > 1000.0 => {
            errors.add("weight", format!("{} is above the most, 1000.", num(w)));
            None
        }
        Ok(w) => Some(w),
        Err(e) => {
            errors.add("weight", e);
            None
        }
    };
    if form.classes.is_empty() {
        errors.add(
            "classes",
            "Allow at least one class: production, batch or best-effort.",
        );
    } else if let Some(c) = form.classes.iter().find(|c| !CLASSES.contains(&c.as_str())) {
        errors.add("classes", format!("{c:?} is not a class."));
    }
    let bu = form.business_unit.trim();
    if !bu.is_empty()
        && let Some(p) = name_problem(bu)
    {
        errors.add("business_unit", p);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(api::TeamRequest {
        name: if creating {
            form.name.trim().to_string()
        } else {
            String::new()
        },
        guaranteed_gpus: guarantee,
        burst_gpus: burst,
        weight,
        classes: Some(form.classes.clone()),
        business_unit: Some(bu.to_string()),
    })
}

/// The fields an API error may name on a team's form.
const FIELDS: [&str; 6] = [
    "name",
    "guaranteed_gpus",
    "burst_gpus",
    "weight",
    "classes",
    "business_unit",
];

#[derive(Template)]
#[template(path = "admin/teams.html")]
struct TeamsPage {
    layout: Layout,
    teams: Vec<api::Team>,
    limit: ClusterLimit,
    guaranteed: String,
    form: TeamForm,
    errors: FieldErrors,
    classes: [&'static str; 3],
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Done {
    saved: String,
    created: String,
    project: String,
}

fn flash(done: &Done) -> Option<Flash> {
    let text = if !done.saved.is_empty() {
        format!(
            "Team {} saved. The worker applies it at its next scheduling cycle.",
            done.saved
        )
    } else if !done.created.is_empty() {
        format!(
            "Team {} created, with a project \"default\". The worker takes it up at its next scheduling cycle.",
            done.created
        )
    } else if !done.project.is_empty() {
        format!("Project {} added.", done.project)
    } else {
        return None;
    };
    Some(Flash { error: false, text })
}

async fn teams_page(
    state: &AppState,
    viewer: &Viewer,
    form: Option<TeamForm>,
    errors: FieldErrors,
    done: &Done,
) -> Result<TeamsPage, PageError> {
    let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
    let limit = ClusterLimit::get(state, viewer).await;
    let guaranteed: f64 = teams.iter().map(|t| t.guaranteed_gpus).sum();
    let mut layout = Layout::new("Teams and quotas", "admin", viewer);
    layout.flash = flash(done);
    Ok(TeamsPage {
        layout,
        teams,
        guaranteed: num(guaranteed),
        form: form.unwrap_or_else(|| TeamForm::new_team(limit.gpus)),
        limit,
        errors,
        classes: CLASSES,
    })
}

/// GET /admin/teams.
pub async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    require_admin(&viewer)?;
    Ok(html(
        teams_page(&state, &viewer, None, FieldErrors::default(), &done).await?,
    ))
}

/// POST /admin/teams: a new team.
pub async fn create(
    State(state): State<AppState>,
    posted: Posted<TeamForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, form } = posted;
    require_admin(&viewer)?;
    let teams: Vec<api::Team> = apicall::get(&state, &viewer, "/api/v1/teams").await?;
    let limit = ClusterLimit::get(&state, &viewer).await;
    let others: f64 = teams.iter().map(|t| t.guaranteed_gpus).sum();
    let errors = match check(&form, true, &limit, others) {
        Ok(req) => {
            match apicall::call::<_, api::Team>(
                &state,
                &viewer,
                Method::POST,
                "/api/v1/teams",
                &req,
            )
            .await
            {
                Ok(t) => {
                    return Ok(
                        Redirect::to(&format!("/admin/teams?created={}", encode(&t.name)))
                            .into_response(),
                    );
                }
                Err(e) if e.status.is_client_error() => {
                    let mut errors = FieldErrors::default();
                    errors.api(&e, &FIELDS);
                    errors
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(errors) => errors,
    };
    let page = teams_page(&state, &viewer, Some(form), errors, &Done::default()).await?;
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}

#[derive(Template)]
#[template(path = "admin/team.html")]
struct TeamPage {
    layout: Layout,
    team: api::Team,
    form: TeamForm,
    errors: FieldErrors,
    limit: ClusterLimit,
    others: String,
    project: String,
    project_error: String,
    classes: [&'static str; 3],
}

#[allow(clippy::too_many_arguments)]
async fn team_page(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
    form: Option<TeamForm>,
    errors: FieldErrors,
    project: String,
    project_error: String,
    done: &Done,
) -> Result<TeamPage, PageError> {
    let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
    let Some(team) = teams.iter().find(|t| t.name == name).cloned() else {
        return Err(PageError::not_found(format!("There is no team {name:?}.")));
    };
    let others: f64 = teams
        .iter()
        .filter(|t| t.name != name)
        .map(|t| t.guaranteed_gpus)
        .sum();
    let mut layout = Layout::new(format!("Team {name}"), "admin", viewer);
    layout.flash = flash(done);
    Ok(TeamPage {
        layout,
        form: form.unwrap_or_else(|| TeamForm::of(&team)),
        team,
        errors,
        limit: ClusterLimit::get(state, viewer).await,
        others: num(others),
        project,
        project_error,
        classes: CLASSES,
    })
}

/// GET /admin/teams/{team}: the team's form and its projects.
pub async fn edit(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(name): Path<String>,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    require_admin(&viewer)?;
    let page = team_page(
        &state,
        &viewer,
        &name,
        None,
        FieldErrors::default(),
        String::new(),
        String::new(),
        &done,
    )
    .await?;
    Ok(html(page))
}

/// POST /admin/teams/{team}: saves the team, or shows what is wrong.
pub async fn save(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<TeamForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, form } = posted;
    require_admin(&viewer)?;
    let teams: Vec<api::Team> = apicall::get(&state, &viewer, "/api/v1/teams").await?;
    if !teams.iter().any(|t| t.name == name) {
        return Err(PageError::not_found(format!("There is no team {name:?}.")));
    }
    let limit = ClusterLimit::get(&state, &viewer).await;
    let others: f64 = teams
        .iter()
        .filter(|t| t.name != name)
        .map(|t| t.guaranteed_gpus)
        .sum();
    let errors = match check(&form, false, &limit, others) {
        Ok(req) => {
            let path = format!("/api/v1/teams/{}", encode(&name));
            match apicall::call::<_, api::Team>(&state, &viewer, Method::PATCH, &path, &req).await {
                Ok(_) => {
                    return Ok(
                        Redirect::to(&format!("/admin/teams?saved={}", encode(&name)))
                            .into_response(),
                    );
                }
                Err(e) if e.status.is_client_error() => {
                    let mut errors = FieldErrors::default();
                    errors.api(&e, &FIELDS);
                    errors
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(errors) => errors,
    };
    let page = team_page(
        &state,
        &viewer,
        &name,
        Some(form),
        errors,
        String::new(),
        String::new(),
        &Done::default(),
    )
    .await?;
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProjectForm {
    project: String,
}

/// POST /admin/teams/{team}/projects: adds a project.
pub async fn add_project(
    State(state): State<AppState>,
    Path(name): Path<String>,
    posted: Posted<ProjectForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, form } = posted;
    require_admin(&viewer)?;
    let project = form.project.trim().to_string();
    let problem = match name_problem(&project) {
        Some(p) => p,
        None => {
            let path = format!("/api/v1/teams/{}/projects", encode(&name));
            let req = api::ProjectRequest {
                name: project.clone(),
            };
            match apicall::call::<_, api::Project>(&state, &viewer, Method::POST, &path, &req).await
            {
                Ok(p) => {
                    return Ok(Redirect::to(&format!(
                        "/admin/teams/{}?project={}",
                        encode(&name),
                        encode(&p.name)
                    ))
                    .into_response());
                }
                Err(e) if e.status == StatusCode::CONFLICT => {
                    format!("Team {name} already has a project {project}.")
                }
                Err(e) if e.status.is_client_error() && e.status != StatusCode::NOT_FOUND => {
                    super::people(&e)
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let page = team_page(
        &state,
        &viewer,
        &name,
        None,
        FieldErrors::default(),
        project,
        problem,
        &Done::default(),
    )
    .await?;
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}
