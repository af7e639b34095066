//! My team (the Go portal's `team.go`): the team's quota and what it
//! holds, its queued jobs in queue order (paged) and its running and
//! recently finished jobs, and for leads and admins the actions on each:
//! move up or down within its class, change class, requeue, cancel
//! (members cancel their own). Admins and finance pick a team.
//!
//! The actions are small forms that work without JavaScript (303 back
//! to the page with the outcome); with htmx they answer the team's live
//! region alone, with the outcome in it.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::clock::{ClusterClock, Estimate, when, when_opt};
use super::parts::{self, FlashQuery, Live, Pager};
use super::svg::QuotaBar;
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Flash, Layout, PageError, html};
use crate::portal::session::{Posted, Viewer, encode};
use crate::server::AppState;

/// `?team=&page=` and the flash of an action.
#[derive(Debug, Default, Deserialize)]
pub struct TeamQuery {
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub page: Option<String>,
    #[serde(default)]
    pub since: String,
    #[serde(flatten)]
    pub flash: FlashQuery,
}

impl TeamQuery {
    fn page(&self) -> usize {
        self.page
            .as_deref()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(1)
    }
}

/// A job as a row of the team's tables, with what the viewer may do.
#[derive(Debug, Clone, Default)]
pub struct JobLine {
    pub id: String,
    pub name: String,
    pub project: String,
    pub user: String,
    pub class: String,
    pub state: String,
    /// In its team's queue; 0 when not queued.
    pub position: i64,
    pub reason: String,
    pub gpus: String,
    /// Cluster time.
    pub submitted: String,
    /// Cluster time: started (running) or finished.
    pub since: String,
    pub estimate: Estimate,
    pub can_cancel: bool,
}

impl JobLine {
    pub fn queued(&self) -> bool {
        self.state == api::STATE_QUEUED
    }

    pub fn terminal(&self) -> bool {
        api::terminal(&self.state)
    }

    fn of_job(j: &api::Job, can_cancel: bool) -> JobLine {
        JobLine {
            id: j.id.clone(),
            name: j.name.clone(),
            project: j.project.clone(),
            user: j.user.clone(),
            class: j.class.clone(),
            state: j.state.clone(),
            position: 0,
            reason: j.reason.clone(),
            gpus: parts::gpus(j.gpus),
            submitted: when(j.submitted_at),
            since: if api::terminal(&j.state) {
                when_opt(j.finished_at)
            } else {
                when_opt(j.started_at)
            },
            estimate: Estimate::default(),
            can_cancel: can_cancel && !api::terminal(&j.state),
        }
    }
}

#[derive(Template)]
#[template(path = "team.html")]
struct TeamPage {
    layout: Layout,
    clock: ClusterClock,
    title: String,
    /// For admins and finance: every team, to pick one.
    teams: Vec<String>,
    team: String,
    live: String,
}

#[derive(Template)]
#[template(path = "parts/team_live.html")]
pub struct TeamLive {
    team: api::Team,
    held: String,
    guaranteed: String,
    burst: String,
    over: String,
    bar: QuotaBar,
    queued: Vec<JobLine>,
    pager: Pager,
    running: Vec<JobLine>,
    finished: Vec<JobLine>,
    can_lead: bool,
    member: bool,
    /// Where the actions come back to.
    back: String,
    csrf: String,
    flash: Option<Flash>,
}

fn can_lead(v: &Viewer) -> bool {
    v.who.role == api::ROLE_ADMIN || v.who.role == api::ROLE_LEAD
}

fn sees_all(v: &Viewer) -> bool {
    v.who.role == api::ROLE_ADMIN || v.who.role == api::ROLE_FINANCE
}

/// GET /team.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<TeamQuery>,
) -> Result<Response, PageError> {
    let mut teams = Vec::new();
    let mut name = viewer.who.team.clone();
    if sees_all(&viewer) {
        teams = apicall::get::<Vec<api::Team>>(&state, &viewer, "/api/v1/teams")
            .await?
            .into_iter()
            .map(|t| t.name)
            .collect();
        name = if q.team.is_empty() {
            teams.first().cloned().unwrap_or_default()
        } else {
            q.team.clone()
        };
    }
    let clock = ClusterClock::read(&state).await;
    let mut layout = Layout::new(
        if name.is_empty() {
            "My team".to_string()
        } else {
            format!("Team {name}")
        },
        "team",
        &viewer,
    );
    layout.flash = q.flash.flash(&viewer);
    let live = if name.is_empty() {
        String::new()
    } else {
        live(&state, &viewer, &name, q.page(), None, &clock)
            .await?
            .html()
    };
    Ok(html(TeamPage {
        title: layout.title.clone(),
        layout,
        clock,
        teams,
        team: name,
        live,
    }))
}

/// GET /fragments/team?team=&page=: the live region, or 204 unchanged.
pub async fn fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(q): Query<TeamQuery>,
) -> Result<Response, PageError> {
    let name = if sees_all(&viewer) {
        q.team.clone()
    } else {
        viewer.who.team.clone()
    };
    if name.is_empty() {
        return Err(PageError::not_found("Name a team."));
    }
    let clock = ClusterClock::read(&state).await;
    let live = live(&state, &viewer, &name, q.page(), None, &clock).await?;
    Ok(parts::live_answer(live, &q.since, &headers))
}

/// The team's live region.
async fn live(
    state: &AppState,
    viewer: &Viewer,
    name: &str,
    page: usize,
    flash: Option<Flash>,
    clock: &ClusterClock,
) -> Result<Live, PageError> {
    let t = encode(name);
    let team: api::Team = apicall::get(state, viewer, &format!("/api/v1/teams/{t}")).await?;
    let queue: api::Queue = apicall::get(state, viewer, &format!("/api/v1/queue?team={t}")).await?;
    let clock = clock.clone().with_now(&queue.clock);
    let entries: Vec<api::QueueEntry> = queue
        .teams
        .into_iter()
        .filter(|q| q.team == team.name)
        .flat_map(|q| q.jobs)
        .collect();
    let running: api::JobList = apicall::get(
        state,
        viewer,
        &format!("/api/v1/jobs?team={t}&state=admitted,running,preempted&limit=200"),
    )
    .await?;
    let finished: api::JobList = apicall::get(
        state,
        viewer,
        &format!("/api/v1/jobs?team={t}&state=succeeded,failed,cancelled&limit=10"),
    )
    .await?;
    let lead = can_lead(viewer);
    let member = viewer.who.role == api::ROLE_MEMBER;
    // A member cancels their own jobs: which queued ones are theirs.
    let mine: std::collections::HashSet<String> = if member {
        apicall::get::<api::JobList>(
            state,
            viewer,
            &format!(
                "/api/v1/jobs?team={t}&state=queued&user={}&limit=1000",
                encode(&viewer.who.user)
            ),
        )
        .await?
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect()
    } else {
        Default::default()
    };
    let pager = Pager::new(entries.len(), page, format!("/team?team={t}&"));
    let queued = entries[pager.range()]
        .iter()
        .map(|e| JobLine {
            id: e.job.clone(),
            name: e.name.clone(),
            project: e.project.clone(),
            user: String::new(),
            class: e.class.clone(),
            state: api::STATE_QUEUED.into(),
            position: e.slot.position,
            reason: e.slot.reason.clone(),
            gpus: parts::gpus(e.gpus),
            submitted: when(e.submitted_at),
            since: String::new(),
            estimate: clock.estimate(e.slot.estimated_start, e.slot.wait_seconds),
            can_cancel: lead || mine.contains(&e.job),
        })
        .collect();
    let can_cancel = |j: &api::Job| lead || (member && j.user == viewer.who.user);
    let running: Vec<JobLine> = running
        .jobs
        .iter()
        .map(|j| JobLine::of_job(j, can_cancel(j)))
        .collect();
    let finished = finished
        .jobs
        .iter()
        .map(|j| JobLine::of_job(j, false))
        .collect();
    let held = crate::store::views::gauges(&state.pool)
        .await
        .ok()
        .flatten()
        .and_then(|g| g.held.into_iter().find(|(n, _)| *n == team.name))
        .map(|(_, h)| h)
        .unwrap_or(0.0);
    let d = TeamLive {
        held: parts::gpus(held),
        guaranteed: parts::gpus(team.guaranteed_gpus),
        burst: parts::gpus(team.burst_gpus),
        over: parts::gpus((held - team.guaranteed_gpus).max(0.0)),
        bar: QuotaBar::new(held, team.guaranteed_gpus, team.burst_gpus),
        back: format!("/team?team={t}&page={}", pager.page),
        team,
        queued,
        pager,
        running,
        finished,
        can_lead: lead,
        member,
        csrf: viewer.csrf.clone(),
        flash,
    };
    let inner = d.render().map_err(|e| PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("The team could not be drawn: {e}."),
    })?;
    Ok(Live::new(
        "team",
        format!("/fragments/team?team={t}&page={page}"),
        inner,
    ))
}

/// An action's form: where to come back to, and its value.
#[derive(Debug, Default, Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    pub back: String,
    #[serde(default)]
    pub direction: String,
    #[serde(default)]
    pub class: String,
}

/// POST /jobs/{id}/move: up or down within its class in its team's
/// queue.
pub async fn move_job(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    posted: Posted<ActionForm>,
) -> Response {
    let dir = posted.form.direction.clone();
    let done = format!("Job {id} moved {dir} in its team's queue.");
    act(
        &state,
        &id,
        &headers,
        posted,
        Method::POST,
        "move",
        json!({ "direction": dir }),
        done,
    )
    .await
}

/// POST /jobs/{id}/class: a new priority class.
pub async fn set_class(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    posted: Posted<ActionForm>,
) -> Response {
    let class = posted.form.class.clone();
    let done = format!("Job {id} is now {class}.");
    act(
        &state,
        &id,
        &headers,
        posted,
        Method::PATCH,
        "",
        json!({ "class": class }),
        done,
    )
    .await
}

/// POST /jobs/{id}/requeue.
pub async fn requeue(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    posted: Posted<ActionForm>,
) -> Response {
    let done = format!("Requeue asked for job {id}: the worker puts it back in its queue.");
    act(
        &state,
        &id,
        &headers,
        posted,
        Method::POST,
        "requeue",
        json!({}),
        done,
    )
    .await
}

/// POST /jobs/{id}/cancel.
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    posted: Posted<ActionForm>,
) -> Response {
    let done = format!("Cancel asked for job {id}: the worker stops it at its next cycle.");
    act(
        &state,
        &id,
        &headers,
        posted,
        Method::POST,
        "cancel",
        json!({}),
        done,
    )
    .await
}

/// Calls the API for an action as the user, and answers: with htmx the
/// team's live region with the outcome in it; without, a 303 back to the
/// page the form came from, with the outcome; a refusal (the user may
/// not, the job is gone) as a page in words.
#[allow(clippy::too_many_arguments)]
async fn act(
    state: &AppState,
    id: &str,
    headers: &HeaderMap,
    posted: Posted<ActionForm>,
    method: Method,
    verb: &str,
    body: serde_json::Value,
    done: String,
) -> Response {
    let Posted { viewer, form } = posted;
    let mut path = format!("/api/v1/jobs/{}", encode(id));
    if !verb.is_empty() {
        path.push('/');
        path.push_str(verb);
    }
    let json = serde_json::to_vec(&body).unwrap_or_default();
    let outcome = match apicall::send(state, &viewer, method, &path, Some(json)).await {
        Ok(a) if a.status.is_success() => Ok(done),
        Ok(a) => Err(answer_error(&a)),
        Err(e) => Err(e),
    };
    let htmx = headers.contains_key("HX-Request");
    let job_page = format!("/jobs/{}", encode(id));
    if htmx && form.back.starts_with("/team") {
        let flash = match &outcome {
            Ok(text) => Flash {
                error: false,
                text: text.clone(),
            },
            Err(e) => Flash {
                error: true,
                text: parts::words(&e.message, &e.field),
            },
        };
        let q = back_query(&form.back);
        let name = if sees_all(&viewer) {
            q.team.clone()
        } else {
            viewer.who.team.clone()
        };
        let clock = ClusterClock::read(state).await;
        return match live(state, &viewer, &name, q.page(), Some(flash), &clock).await {
            Ok(l) => Html(l.html()).into_response(),
            Err(e) => e.into_response(),
        };
    }
    match outcome {
        Ok(text) => parts::back_with(&viewer, &form.back, &job_page, "done", &text),
        Err(e) => match parts::refusal_page(&e) {
            Some(page) => page.into_response(),
            None => parts::back_with(
                &viewer,
                &form.back,
                &job_page,
                "refused",
                &parts::words(&e.message, &e.field),
            ),
        },
    }
}

/// The API's error of a failed answer.
fn answer_error(a: &apicall::Answer) -> crate::server::error::ApiError {
    match serde_json::from_slice::<api::Error>(&a.body) {
        Ok(e) => crate::server::error::ApiError::new(a.status, &e.field, e.error),
        Err(_) => crate::server::error::ApiError::new(
            a.status,
            "",
            if a.status == StatusCode::NOT_FOUND {
                "This action is not available on this server.".to_string()
            } else {
                String::from_utf8_lossy(&a.body).into_owned()
            },
        ),
    }
}

/// The team and page of a `back` path such as `/team?team=x&page=2`.
fn back_query(back: &str) -> TeamQuery {
    let query = back.split_once('?').map(|(_, q)| q).unwrap_or("");
    serde_html_form::from_str(query).unwrap_or_default()
}
