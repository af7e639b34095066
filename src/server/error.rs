//! The API's error answer: a status and `{"error": "...", "field": "..."}`,
//! as the Go build's `httpError`. Database errors are internal: logged,
//! and answered without detail.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::api;

/// An answer other than success.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The request field at fault, or "".
    pub field: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            field: field.to_string(),
        }
    }

    /// 400, naming the field.
    pub fn bad_request(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, field, message)
    }

    /// 404: the answer for anything the caller may not see too, so that
    /// it tells nothing about what exists.
    pub fn not_found(what: &str, id: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "",
            format!("{what} {id:?} not found"),
        )
    }

    pub fn forbidden(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, field, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "", message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "", message)
    }

    /// 500 without detail; the cause goes to the log.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "",
            "internal error; see the server log",
        )
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> ApiError {
        ApiError::internal(&e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(api::Error {
                error: self.message,
                field: self.field,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                "WWW-Authenticate",
                axum::http::HeaderValue::from_static(r#"Bearer realm="partita""#),
            );
        }
        response
    }
}
