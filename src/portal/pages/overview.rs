//! The cluster overview (the Go portal's `overview.go`): utilization
//! tiles and chart, GPUs by state, and every node's GPUs and MIG slices,
//! as the worker last published the cluster. The live part refreshes
//! every 5 s through htmx and is re-sent only when it changed.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::clock::ClusterClock;
use super::parts::{self, Live, Since};
use super::svg::{self, NodeGroup, StateCount};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html};
use crate::portal::session::Viewer;
use crate::server::AppState;

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    layout: Layout,
    clock: ClusterClock,
    live: String,
}

#[derive(Template)]
#[template(path = "parts/overview_live.html")]
struct OverviewLive {
    /// None until a worker has published the cluster.
    cluster: Option<api::Cluster>,
    notice: String,
    chart: String,
    samples: usize,
    states: Vec<StateCount>,
    groups: Vec<NodeGroup>,
    /// The legend: (team, colour class).
    teams: Vec<(String, String)>,
}

impl OverviewLive {
    fn pct(&self, f: &f64) -> String {
        parts::pct(*f)
    }

    fn gpus(&self, f: &f64) -> String {
        parts::gpus(*f)
    }

    fn u(&self) -> api::Utilization {
        self.cluster
            .as_ref()
            .map(|c| c.utilization.clone())
            .unwrap_or_default()
    }
}

/// GET /.
pub async fn page(State(state): State<AppState>, viewer: Viewer) -> Result<Response, PageError> {
    let live = live(&state, &viewer).await?;
    let clock = ClusterClock::read(&state).await;
    Ok(html(Overview {
        layout: Layout::new("Cluster", "overview", &viewer),
        clock,
        live: live.html(),
    }))
}

/// GET /fragments/overview: the live part, or 204 when unchanged.
pub async fn fragment(
    State(state): State<AppState>,
    viewer: Viewer,
    headers: HeaderMap,
    Query(q): Query<Since>,
) -> Result<Response, PageError> {
    let live = live(&state, &viewer).await?;
    Ok(parts::live_answer(live, &q.since, &headers))
}

async fn live(state: &AppState, viewer: &Viewer) -> Result<Live, PageError> {
    let (cluster, notice) =
        match apicall::get::<api::Cluster>(state, viewer, "/api/v1/cluster").await {
            Ok(c) => (Some(c), String::new()),
            // No worker has published the cluster yet (or none runs): say so.
            Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => {
                (None, parts::words(&e.message, ""))
            }
            Err(e) => return Err(e.into()),
        };
    let mut d = OverviewLive {
        cluster: None,
        notice,
        chart: String::new(),
        samples: 0,
        states: Vec::new(),
        groups: Vec::new(),
        teams: Vec::new(),
    };
    if let Some(c) = cluster {
        state.portal.samples.record(&c);
        let samples = state.portal.samples.all();
        let teams: Vec<api::Team> = apicall::get(state, viewer, "/api/v1/teams").await?;
        let names: Vec<String> = teams.into_iter().map(|t| t.name).collect();
        let colors = svg::team_colors(&names);
        d.teams = colors.iter().map(|(t, c)| (t.clone(), c.clone())).collect();
        d.chart = svg::utilization_chart(&samples, c.clock.now);
        d.samples = samples.len();
        d.states = svg::gpu_states(&c);
        d.groups = svg::draw_nodes(&c, &colors);
        d.cluster = Some(c);
    }
    let inner = d.render().map_err(|e| PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("The page could not be drawn: {e}."),
    })?;
    Ok(Live::new("overview", "/fragments/overview".into(), inner))
}
