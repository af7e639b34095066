//! The API's routes and its OpenAPI 3 document, built together from the
//! handlers' `#[utoipa::path]` annotations (utoipa-axum): a route cannot
//! be served without being documented, nor documented without being
//! served.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::OpenApi as Document;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{AppState, accounts, jobs, preview, reports, views};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Partita API",
        description = "Partita's JSON API. Authenticate with `Authorization: Bearer <token>`. \
            Times are RFC 3339, UTC: those the API records (submissions, audit, tokens, users) are wall time; \
            a job's started_at and finished_at are cluster time (the worker's clock); each job event names its clock."
    ),
    modifiers(&BearerAuth),
    tags((name = "accounts", description = "teams, projects, users, tokens, the profile catalog, the audit log"),
         (name = "jobs", description = "submit, preview, list, change, cancel and requeue jobs; the queue and the cluster as the worker last published them"),
         (name = "reports", description = "usage and chargeback reports (a ledger row counts in the period in which it ends), the usage ledger, the price table"))
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every API route with its document.
pub fn api_routes() -> (axum::Router<AppState>, Document) {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(openapi_json))
        .routes(routes!(accounts::whoami))
        .routes(routes!(jobs::submit, jobs::list_jobs))
        .routes(routes!(jobs::get_job, jobs::patch_job))
        .routes(routes!(jobs::cancel_job))
        .routes(routes!(jobs::requeue_job))
        .routes(routes!(jobs::move_job))
        .routes(routes!(preview::preview_job))
        .routes(routes!(views::get_queue))
        .routes(routes!(views::get_cluster))
        .routes(routes!(accounts::list_teams, accounts::create_team))
        .routes(routes!(accounts::get_team, accounts::patch_team))
        .routes(routes!(accounts::list_projects, accounts::create_project))
        .routes(routes!(accounts::list_users, accounts::create_user))
        .routes(routes!(accounts::patch_user))
        .routes(routes!(accounts::create_token))
        .routes(routes!(accounts::list_tokens))
        .routes(routes!(accounts::revoke_token))
        .routes(routes!(accounts::list_profiles))
        .routes(routes!(accounts::list_audit))
        .routes(routes!(reports::usage_report))
        .routes(routes!(reports::chargeback_report))
        .routes(routes!(reports::list_ledger))
        .routes(routes!(reports::price_table, reports::put_prices))
        .split_for_parts()
}

/// The document as JSON, built once.
pub static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    serde_json::to_string_pretty(&api_routes().1).expect("the OpenAPI document serialises")
});

#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "accounts",
    summary = "This OpenAPI 3 document",
    description = "Public: no token needed.",
    responses((status = 200, description = "the document", content_type = "application/json")))]
pub async fn openapi_json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}
