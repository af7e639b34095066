//! Usage and chargeback reports, the ledger and the price table (the Go
//! build's `reports.go`), read from the usage ledger.
//!
//! The period rule: a ledger row belongs to the period in which it ENDS
//! (`ended_at` in [from, to), cluster time). Each finished hold is
//! charged once, by the worker, when it ends (`accounting::charge`), so a
//! report is an exact sum of ledger rows, and consecutive periods
//! partition the ledger: two months' totals add up to the total of a
//! period that covers both.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::accounts::{actor, query_int};
use super::auth::{ADMINS, Principal};
use super::decode::RawJson;
use super::error::{ApiError, ApiResult};
use crate::accounting::{self, GroupKey, Period, PeriodError, PriceTable, Prices, Report};
use crate::api;
use crate::store::audit::{self, Change};
use crate::store::ledger;
use crate::worker::clock;

/// The query of the reports.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// a calendar month, YYYY-MM (UTC); not with from/to
    pub month: Option<String>,
    /// the period's start, RFC 3339, cluster time (default: the start of `to`'s month)
    pub from: Option<String>,
    /// the period's end, exclusive, RFC 3339, cluster time (default: now)
    pub to: Option<String>,
    /// comma-separated: business_unit, team, project, user, model, tier, class
    pub group_by: Option<String>,
    /// one team (admin and finance: any; other roles: their own only)
    pub team: Option<String>,
    /// json (default) or csv
    pub format: Option<String>,
}

/// 400 naming the parameter at fault.
fn bad(e: PeriodError) -> ApiError {
    ApiError::bad_request(e.field, e.to_string())
}

/// Whether the caller asked for CSV.
fn wants_csv(format: Option<&str>) -> ApiResult<bool> {
    match format.unwrap_or("") {
        "" | "json" => Ok(false),
        "csv" => Ok(true),
        other => Err(ApiError::bad_request(
            "format",
            format!("format: {other:?} is not json or csv"),
        )),
    }
}

/// The cluster's now: the worker's stored clock, or wall now before any
/// worker ran.
async fn cluster_now(state: &AppState) -> ApiResult<DateTime<Utc>> {
    let mut conn = state.pool.acquire().await?;
    Ok(clock::cluster_now(&mut conn)
        .await?
        .unwrap_or_else(Utc::now))
}

/// An ISO 8601 UTC time to the second, as in a file name.
fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A CSV answer with a file name that says the period.
fn csv_response(body: Vec<u8>, name: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Response {
    // Colons are awkward in file names on some systems; the period
    // stays readable without them.
    let file = format!("{name}_{}_{}.csv", iso(from), iso(to)).replace(':', "");
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response()
}

async fn report(
    state: &AppState,
    who: &Principal,
    q: ReportQuery,
    name: &str,
    default: &[GroupKey],
) -> ApiResult<Response> {
    let csv = wants_csv(q.format.as_deref())?;
    let group_by =
        accounting::parse_group_by(q.group_by.as_deref().unwrap_or(""), default).map_err(bad)?;
    let now = cluster_now(state).await?;
    let period =
        Period::parse(q.month.as_deref(), q.from.as_deref(), q.to.as_deref(), now).map_err(bad)?;
    let team = who.scope_team(q.team.as_deref().unwrap_or(""))?;
    let rows = ledger::charged(&state.pool, period, team.as_deref()).await?;
    let prices = ledger::prices(&state.pool).await?;
    let r: Report =
        accounting::build_charged(&rows, period, &group_by, &prices.currency, &prices.source);
    if !csv {
        return Ok(Json(r).into_response());
    }
    let mut body = Vec::new();
    accounting::write_csv(&mut body, &r).map_err(|e| ApiError::internal(&e))?;
    Ok(csv_response(body, name, r.from, r.to))
}

#[utoipa::path(get, path = "/api/v1/reports/usage", tag = "reports",
    summary = "GPU usage over a period, grouped",
    description = "Roles: all; admin and finance see every team, the others their own. \
        A ledger row belongs to the period in which it ends (ended_at in [from, to), cluster time): \
        every finished hold is charged in exactly one period, so the report is an exact sum of ledger rows \
        and consecutive periods partition the ledger. Default period: the calendar month of the cluster's now; \
        default group_by: team. format=csv gives RFC 4180 CSV with the period in every row and a TOTAL line.",
    params(ReportQuery),
    responses((status = 200, body = Report), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn usage_report(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<ReportQuery>,
) -> ApiResult<Response> {
    report(&state, &who, q, "usage", &[GroupKey::Team]).await
}

#[utoipa::path(get, path = "/api/v1/reports/chargeback", tag = "reports",
    summary = "Chargeback over a period, grouped",
    description = "Roles: all; admin and finance see every team, the others their own. \
        A ledger row belongs to the period in which it ends (ended_at in [from, to), cluster time): \
        every finished hold is charged in exactly one period, so the report is an exact sum of ledger rows \
        and consecutive periods partition the ledger. Default period: the calendar month of the cluster's now; \
        default group_by: business_unit,team,project. format=csv gives RFC 4180 CSV with the period in every row \
        and a TOTAL line.",
    params(ReportQuery),
    responses((status = 200, body = Report), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn chargeback_report(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<ReportQuery>,
) -> ApiResult<Response> {
    let default = [GroupKey::BusinessUnit, GroupKey::Team, GroupKey::Project];
    report(&state, &who, q, "chargeback", &default).await
}

/// The query of GET /ledger.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LedgerQuery {
    /// the cursor `next` of the previous page (a row's seq)
    pub after: Option<String>,
    /// page size, 1 to 10000 (default 1000)
    pub limit: Option<String>,
    /// one team (admin and finance: any; other roles: their own only)
    pub team: Option<String>,
    /// json (default) or csv
    pub format: Option<String>,
}

fn entry(r: ledger::LedgerRow) -> api::LedgerEntry {
    api::LedgerEntry {
        seq: r.seq,
        hold: r.hold_id,
        recorded_at: r.recorded_at,
        job: r.job,
        task: r.task,
        business_unit: r.business_unit,
        team: r.team,
        project: r.project,
        user: r.user,
        class: r.class,
        node: r.node,
        gpu: r.gpu,
        model: r.model,
        tier: r.tier,
        mig_profile: r.mig_profile,
        share: i64::from(r.gpu_share),
        started_at: r.started_at,
        ended_at: r.ended_at,
        share_ms: r.share_ms,
        gpu_hours: accounting::micros(r.micro_gpu_hours),
        cost: accounting::micros(r.cost_micros),
        micro_gpu_hours: r.micro_gpu_hours,
        price_micros: r.price_micros,
        cost_micros: r.cost_micros,
        currency: r.currency,
    }
}

/// The ledger's columns in CSV, in this order.
const LEDGER_COLUMNS: [&str; 25] = [
    "seq",
    "hold",
    "recorded_at",
    "job",
    "task",
    "business_unit",
    "team",
    "project",
    "user",
    "class",
    "node",
    "gpu",
    "model",
    "tier",
    "mig_profile",
    "share",
    "started_at",
    "ended_at",
    "share_ms",
    "gpu_hours",
    "cost",
    "micro_gpu_hours",
    "price_micros",
    "cost_micros",
    "currency",
];

fn ledger_csv(entries: &[api::LedgerEntry]) -> csv::Result<Vec<u8>> {
    let mut out = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new());
    out.write_record(LEDGER_COLUMNS)?;
    for e in entries {
        out.write_record([
            e.seq.to_string(),
            e.hold.clone(),
            iso_micros(e.recorded_at),
            e.job.clone(),
            e.task.clone(),
            e.business_unit.clone(),
            e.team.clone(),
            e.project.clone(),
            e.user.clone(),
            e.class.clone(),
            e.node.clone(),
            e.gpu.to_string(),
            e.model.clone(),
            e.tier.clone(),
            e.mig_profile.clone().unwrap_or_default(),
            e.share.to_string(),
            iso_micros(e.started_at),
            iso_micros(e.ended_at),
            e.share_ms.to_string(),
            e.gpu_hours.clone(),
            e.cost.clone(),
            e.micro_gpu_hours.to_string(),
            e.price_micros.to_string(),
            e.cost_micros.to_string(),
            e.currency.clone(),
        ])?;
    }
    out.into_inner().map_err(|e| e.into_error().into())
}

/// An ISO 8601 UTC time with as many fraction digits as it needs.
fn iso_micros(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[utoipa::path(get, path = "/api/v1/ledger", tag = "reports",
    summary = "The usage ledger, in order",
    description = "Roles: all; admin and finance see every team, the others their own. \
        One row per finished hold, charged when it ended; append-only. Paged by `after` (a seq) and `limit`. \
        format=csv gives the page as RFC 4180 CSV.",
    params(LedgerQuery),
    responses((status = 200, body = api::Ledger), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn list_ledger(
    State(state): State<AppState>,
    who: Principal,
    Query(q): Query<LedgerQuery>,
) -> ApiResult<Response> {
    let csv = wants_csv(q.format.as_deref())?;
    let after = query_int("after", q.after.as_deref(), 0, 0, i64::MAX)?;
    let limit = query_int("limit", q.limit.as_deref(), 1000, 1, 10_000)?;
    let team = who.scope_team(q.team.as_deref().unwrap_or(""))?;
    let rows = ledger::page(&state.pool, after, limit, team.as_deref()).await?;
    let next = if rows.len() as i64 == limit {
        rows.last().map(|r| r.seq.to_string()).unwrap_or_default()
    } else {
        String::new()
    };
    let entries: Vec<api::LedgerEntry> = rows.into_iter().map(entry).collect();
    if !csv {
        return Ok(Json(api::Ledger { entries, next }).into_response());
    }
    let body = ledger_csv(&entries).map_err(|e| ApiError::internal(&e))?;
    let mut response = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"ledger.csv\""),
            ),
        ],
        body,
    )
        .into_response();
    // The cursor of the next page, where CSV has no room for it.
    if let Ok(v) = HeaderValue::from_str(&next)
        && !next.is_empty()
    {
        response.headers_mut().insert("X-Next-After", v);
    }
    Ok(response)
}

#[utoipa::path(get, path = "/api/v1/prices", tag = "reports",
    summary = "The price table in effect",
    description = "Roles: all. Per GPU-hour of a whole GPU, by model and capacity tier (model \"*\": any other), \
        with where the figures come from: the built-in planning figures, with the `prices` table's rows in effect laid over them.",
    responses((status = 200, body = PriceTable), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn price_table(
    State(state): State<AppState>,
    _who: Principal,
) -> ApiResult<Json<PriceTable>> {
    Ok(Json(ledger::prices(&state.pool).await?.table()))
}

#[utoipa::path(put, path = "/api/v1/prices", tag = "reports",
    summary = "Set prices, from now on",
    description = "Roles: admin. Each row sets the price of one GPU-hour of a whole GPU of `model` (\"*\": any model not listed) \
        in `tier` (reserved, on-demand, spot), in `currency` units; models and tiers not given keep their price. \
        A new price takes effect from now on: the worker charges each hold when it ends, at the prices in effect then, \
        and ledger rows already charged keep the price they were charged at (the ledger is never rewritten). \
        One table, one currency: a change of currency must give every model and tier the table lists now. \
        Recorded in the audit log. Answers the table now in effect.",
    request_body = api::PricesUpdate,
    responses((status = 200, body = PriceTable), (status = "4XX", body = api::Error)),
    security(("bearer" = [])))]
pub async fn put_prices(
    State(state): State<AppState>,
    who: Principal,
    body: RawJson,
) -> ApiResult<Json<PriceTable>> {
    who.require(ADMINS, "set prices")?;
    let req: api::PricesUpdate = body.decode()?;
    if req.prices.is_empty() {
        return Err(ApiError::bad_request(
            "prices",
            "prices: empty; give at least one model, tier and price",
        ));
    }
    for (i, it) in req.prices.iter().enumerate() {
        if it.model.chars().count() > 64
            || it
                .model
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(ApiError::bad_request(
                "prices",
                format!(
                    "prices[{i}].model: {:?} must be at most 64 characters, without spaces",
                    it.model
                ),
            ));
        }
    }
    // The same checks as a price table file's: the currency's code, the
    // tiers, each price from 0 to 1000000, no model and tier twice.
    let checked = Prices::from_table(PriceTable {
        currency: req.currency.clone(),
        source: String::new(),
        assumptions: Vec::new(),
        prices: req.prices.clone(),
    })
    .map_err(|e| {
        let message = e.to_string();
        let field = if message.starts_with("currency") {
            "currency"
        } else {
            "prices"
        };
        ApiError::bad_request(field, message)
    })?;
    let mut tx = state.pool.begin().await?;
    let before = ledger::prices(&mut *tx).await?.table();
    if before.currency != checked.currency {
        let missing: Vec<String> = before
            .prices
            .iter()
            .filter(|p| {
                !req.prices
                    .iter()
                    .any(|q| q.model == p.model && q.tier == p.tier)
            })
            .map(|p| format!("{}/{}", p.model, p.tier))
            .collect();
        if !missing.is_empty() {
            return Err(ApiError::bad_request(
                "currency",
                format!(
                    "currency: {} is not the table's {}; to change the currency give every model and tier \
                     the table lists (missing: {})",
                    checked.currency,
                    before.currency,
                    missing.join(", ")
                ),
            ));
        }
    }
    let rows: Vec<(String, String, i64)> = req
        .prices
        .iter()
        .map(|p| {
            (
                p.model.clone(),
                p.tier.clone(),
                checked.per_hour(&p.model, &p.tier),
            )
        })
        .collect();
    let (_, currencies) = ledger::insert_prices(&mut tx, &checked.currency, &rows).await?;
    if currencies.len() > 1 {
        // Another change of currency came first.
        return Err(ApiError::conflict(format!(
            "the prices in effect would mix currencies ({}); try again",
            currencies.join(", ")
        )));
    }
    audit::record(
        &mut *tx,
        actor(&who),
        Change {
            action: "prices.update",
            target_kind: "prices",
            target: &checked.currency,
            // The rows changed, as they were and as they are.
            before: Some(serde_json::json!({
                "currency": before.currency,
                "prices": before
                    .prices
                    .iter()
                    .filter(|p| req.prices.iter().any(|q| q.model == p.model && q.tier == p.tier))
                    .collect::<Vec<_>>(),
            })),
            after: Some(serde_json::json!({
                "currency": checked.currency,
                "prices": req.prices,
            })),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(Json(ledger::prices(&state.pool).await?.table()))
}
