//! Queues (the Go portal's `queue.go`): each visible team's queued jobs
//! in the order the scheduler considers them, with position, estimated
//! start (cluster time, and the wall time it corresponds to) and why each
//! waits. Paged: a team's queue of thousands of jobs shows one page of
//! [`PAGE_SIZE`], and the live refresh re-sends only that page, only when
//! it changed.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

use super::clock::{ClusterClock, Estimate, when};
use super::parts::{self, Live, PAGE_SIZE, Pager};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html};
use crate::portal::session::{Viewer, encode};
use crate::server::AppState;

/// `?team=&page=` (and the live region's `since`).
#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub page: Option<String>,
    #[serde(default)]
    pub since: String,
}

impl QueueQuery {
    pub fn page(&self) -> usize {
        self.page
            .as_deref()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(1)
    }
}

/// One queued job as a row.
#[derive(Debug, Clone)]
pub struct Row {
    pub position: i64,
    pub job: String,
    pub name: String,
    pub project: String,
    pub class: String,
    pub gpus: String,
    /// Cluster time.
    pub submitted: String,
    pub estimate: Estimate,
    pub reason: String,
}

impl Row {
    pub fn new(e: &api::QueueEntry, clock: &ClusterClock) -> Row {
        Row {
            position: e.slot.position,
            job: e.job.clone(),
            name: e.name.clone(),
            project: e.project.clone(),
            class: e.class.clone(),
            gpus: parts::gpus(e.gpus),
            submitted: when(e.submitted_at),
            estimate: clock.estimate(e.slot.estimated_start, e.slot.wait_seconds),
            reason: e.slot.reason.clone(),
        }
    }
}

/// One team's page of its queue.
#[derive(Debug, Clone)]
pub struct Section {
    pub team: String,
    pub rows: Vec<Row>,
    pub pager: Pager,
}

#[derive(Template)]
#[template(path = "queue.html")]
struct QueuePage {
    layout: Layout,
    clock: ClusterClock,
    /// Admins and finance pick a team (every team's first page without).
    teams: Vec<String>,
    team: String,
    live: String,
}

#[derive(Template)]
#[template(path = "parts/queue_live.html")]
struct QueueLive {
    sections: Vec<Section>,
    team: String,
    all_teams: bool,
    my_team: String,
    as_of: String,
}

/// GET /queue.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<QueueQuery>,
) -> Result<Response, PageError> {
    let (live, clock) = live(&state, &viewer, &q).await?;
    let teams = if viewer.who.role == api::ROLE_ADMIN || viewer.who.role == api::ROLE_FINANCE {
        apicall::get::<Vec<api::Team>>(&state, &viewer, "/api/v1/teams")
            .await?
            .into_iter()
            .map(|t| t.name)
            .collect()
    } else {
        Vec::new()
    };
    Ok(html(QueuePage {
        layout: Layout::new("Queues", "queue", &viewer),
        clock,
        teams,
        team: q.team.clone(),
        live: live.html(),
    }))
}

/// GET /fragments/queue: the visible page, or 204 when unchanged.
pub async fn fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(q): Query<QueueQuery>,
) -> Result<Response, PageError> {
    let (live, _) = live(&state, &viewer, &q).await?;
    Ok(parts::live_answer(live, &q.since, &headers))
}

async fn live(
    state: &AppState,
    viewer: &Viewer,
    q: &QueueQuery,
) -> Result<(Live, ClusterClock), PageError> {
    let team = q.team.trim();
    let mut path = "/api/v1/queue".to_string();
    if !team.is_empty() {
        path.push_str("?team=");
        path.push_str(&encode(team));
    }
    let queue: api::Queue = apicall::get(state, viewer, &path).await?;
    let clock = ClusterClock::read(state).await.with_now(&queue.clock);
    let page = q.page();
    let sections = queue
        .teams
        .iter()
        .map(|tq| {
            // Without a team, every team shows its first page and links
            // to the others.
            let asked = if team.is_empty() { 1 } else { page };
            let pager = Pager::new(
                tq.jobs.len(),
                asked,
                format!("/queue?team={}&", encode(&tq.team)),
            );
            let rows = tq.jobs[pager.range()]
                .iter()
                .map(|e| Row::new(e, &clock))
                .collect();
            Section {
                team: tq.team.clone(),
                rows,
                pager,
            }
        })
        .collect();
    let d = QueueLive {
        sections,
        team: team.to_string(),
        all_teams: viewer.who.role == api::ROLE_ADMIN || viewer.who.role == api::ROLE_FINANCE,
        my_team: viewer.who.team.clone(),
        as_of: when(queue.clock.now),
    };
    let inner = d.render().map_err(|e| PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("The queue could not be drawn: {e}."),
    })?;
    let mut url = "/fragments/queue?".to_string();
    if !team.is_empty() {
        url.push_str(&format!("team={}&", encode(team)));
    }
    url.push_str(&format!("page={page}"));
    Ok((Live::new("queues", url, inner), clock))
}

/// Jobs per page, for the page's hint.
pub const fn page_size() -> usize {
    PAGE_SIZE
}
