//! Who is calling: `Authorization: Bearer <token>`, looked up by the
//! token's SHA-256, and what their role lets them do.
//!
//! The owner is read from the database, or from the in-memory copy that
//! account changes clear (`accounts_cache.rs`), so a revoked token, an
//! expired one or a disabled user is refused from the next request on.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::api::{ROLE_ADMIN, ROLE_FINANCE, ROLE_LEAD, ROLE_MEMBER};
use crate::db::bootstrap::token_hash;
use crate::store::accounts;

/// The caller of a request that carried a valid token.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    pub user_id: i64,
    pub user: String,
    pub role: String,
    /// "" for admin and finance.
    pub team: String,
    pub team_id: Option<i64>,
    pub token_id: i64,
}

/// Roles that may submit and cancel jobs.
pub const SUBMITTERS: &[&str] = &[ROLE_ADMIN, ROLE_LEAD, ROLE_MEMBER];
/// Roles that may re-prioritise, requeue, and create projects.
pub const LEADS: &[&str] = &[ROLE_ADMIN, ROLE_LEAD];
pub const ADMINS: &[&str] = &[ROLE_ADMIN];

impl Principal {
    /// 403 unless the caller has one of `roles`.
    pub fn require(&self, roles: &[&str], what: &str) -> Result<(), ApiError> {
        if roles.contains(&self.role.as_str()) {
            return Ok(());
        }
        Err(ApiError::forbidden(
            "",
            format!(
                "role {} may not {what} (allowed: {})",
                self.role,
                roles.join(", ")
            ),
        ))
    }

    /// Whether the caller reads every team: admins, and finance (which
    /// reads everything and writes nothing).
    pub fn sees_all(&self) -> bool {
        self.role == ROLE_ADMIN || self.role == ROLE_FINANCE
    }

    /// Whether the caller may see a team's data.
    pub fn sees(&self, team: &str) -> bool {
        self.sees_all() || self.team == team
    }

    /// The team a listing is limited to: the caller's own, or for those
    /// who see all the one asked for (None: all). Asking for another team
    /// is answered as if it did not exist.
    pub fn scope_team(&self, asked: &str) -> Result<Option<String>, ApiError> {
        if self.sees_all() {
            return Ok((!asked.is_empty()).then(|| asked.to_string()));
        }
        if !asked.is_empty() && asked != self.team {
            return Err(ApiError::not_found("team", asked));
        }
        Ok(Some(self.team.clone()))
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let hash = token_hash(bearer_secret(&parts.headers)?);
        if let Some(owner) = state.accounts.token(&hash) {
            return usable(Some(owner));
        }
        let ticket = state.accounts.ticket();
        let found = accounts::token_owner(&state.pool, &hash).await?;
        if let Some(owner) = &found {
            state.accounts.keep_token(ticket, &hash, owner);
        }
        usable(found)
    }
}

/// The secret of the `Authorization: Bearer` header.
pub fn bearer_secret(headers: &HeaderMap) -> Result<&str, ApiError> {
    let header = headers
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let secret = header.strip_prefix("Bearer ").unwrap_or("").trim();
    if secret.is_empty() {
        return Err(ApiError::unauthorized(
            "missing token: send Authorization: Bearer <token>",
        ));
    }
    Ok(secret)
}

/// The caller, if their token may be used: it exists, is neither revoked
/// nor expired, and its user is not disabled.
pub fn usable(found: Option<accounts::TokenOwner>) -> Result<Principal, ApiError> {
    let Some(found) = found else {
        return Err(ApiError::unauthorized("invalid or revoked token"));
    };
    if found.revoked {
        return Err(ApiError::unauthorized("invalid or revoked token"));
    }
    if found.expired() {
        return Err(ApiError::unauthorized(
            "token expired: ask an admin for a new one",
        ));
    }
    if found.disabled {
        return Err(ApiError::unauthorized(format!(
            "user {} is disabled",
            found.principal.user
        )));
    }
    Ok(found.principal)
}
