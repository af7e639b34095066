//! The cluster overview: what the worker last published of the cluster.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html};
use crate::portal::session::Viewer;
use crate::server::AppState;

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    layout: Layout,
    /// None until a worker has published the cluster.
    cluster: Option<api::Cluster>,
    notice: String,
}

/// GET /.
pub async fn page(State(state): State<AppState>, viewer: Viewer) -> Result<Response, PageError> {
    let (cluster, notice) = match apicall::get(&state, &viewer, "/api/v1/cluster").await {
        Ok(c) => (Some(c), String::new()),
        // No worker has published the cluster yet (or none runs): say so.
        Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => (None, e.message),
        Err(e) => return Err(e.into()),
    };
    Ok(html(Overview {
        layout: Layout::new("Cluster", "overview", &viewer),
        cluster,
        notice,
    }))
}
