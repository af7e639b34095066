//! The portal's calls to the API: in-process requests to the same
//! `/api/v1` routes the CLI uses, with the signed-in user's session token,
//! so a page may do exactly what the API lets its user do.

use std::sync::OnceLock;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tower::ServiceExt;

use super::session::Viewer;
use crate::api;
use crate::server::AppState;
use crate::server::error::ApiError;

/// The API's routes without state, built once.
fn api_routes() -> &'static Router<AppState> {
    static ROUTES: OnceLock<Router<AppState>> = OnceLock::new();
    ROUTES.get_or_init(|| crate::server::openapi::api_routes().0)
}

/// An answer of the API, whatever its status.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The API's error of a failed answer (status, message and field).
    fn error(&self) -> ApiError {
        match serde_json::from_slice::<api::Error>(&self.body) {
            Ok(e) => ApiError::new(self.status, &e.field, e.error),
            Err(_) => ApiError::new(
                self.status,
                "",
                String::from_utf8_lossy(&self.body).into_owned(),
            ),
        }
    }
}

/// Sends one request to the API as the viewer and returns its answer.
pub async fn send(
    state: &AppState,
    viewer: &Viewer,
    method: Method,
    path_and_query: &str,
    body: Option<Vec<u8>>,
) -> Result<Answer, ApiError> {
    // The API's own routes are called here without the app's layers:
    // refuse U+0000 in the URL as the app does (a form's user name with
    // it would reach the database).
    if crate::server::url_has_nul(path_and_query) {
        return Err(ApiError::bad_request("", crate::server::URL_NUL));
    }
    let mut request = Request::builder()
        .method(method)
        .uri(path_and_query)
        .header(header::AUTHORIZATION, format!("Bearer {}", viewer.secret));
    if body.is_some() {
        request = request.header(header::CONTENT_TYPE, "application/json");
    }
    let request = request
        .body(body.map(Body::from).unwrap_or_else(Body::empty))
        .map_err(|e| ApiError::internal(&e))?;
    let response = api_routes()
        .clone()
        .with_state(state.clone())
        .oneshot(request)
        .await
        .map_err(|e| ApiError::internal(&e))?;
    let (parts, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| ApiError::internal(&e))?
        .to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// GET `path` as the viewer, decoded; the API's error otherwise.
pub async fn get<T: DeserializeOwned>(
    state: &AppState,
    viewer: &Viewer,
    path_and_query: &str,
) -> Result<T, ApiError> {
    decode(send(state, viewer, Method::GET, path_and_query, None).await?)
}

/// Sends `body` as JSON with `method` to `path` as the viewer, decoded.
pub async fn call<B: Serialize, T: DeserializeOwned>(
    state: &AppState,
    viewer: &Viewer,
    method: Method,
    path: &str,
    body: &B,
) -> Result<T, ApiError> {
    let json = serde_json::to_vec(body).map_err(|e| ApiError::internal(&e))?;
    decode(send(state, viewer, method, path, Some(json)).await?)
}

fn decode<T: DeserializeOwned>(answer: Answer) -> Result<T, ApiError> {
    if !answer.status.is_success() {
        return Err(answer.error());
    }
    serde_json::from_slice(&answer.body).map_err(|e| ApiError::internal(&e))
}
