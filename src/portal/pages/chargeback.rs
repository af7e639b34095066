//! Chargeback: a month's GPU-hours and cost, grouped as asked, with
//! totals, a bar chart drawn on the server (SVG, no script) and the API's
//! CSV for exactly the same query. Admin and finance see every team (and
//! may pick one); the other roles their own team's, as the API decides.
//!
//! The default month is the API's: the calendar month of the cluster's
//! now (`server::reports`), read back from the API's answer so that the
//! two can never differ.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use partita_engine::svgchart::{Bar, BarChart};
use serde::Deserialize;

use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html_with};
use crate::portal::session::{Viewer, encode};
use crate::server::AppState;

/// What a report may be grouped by (the API's `group_by`), in words.
pub const GROUPS: [(&str, &str); 7] = [
    ("business_unit", "business unit"),
    ("team", "team"),
    ("project", "project"),
    ("user", "user"),
    ("model", "GPU model"),
    ("tier", "capacity tier"),
    ("class", "class"),
];

/// The page's query: a month (YYYY-MM), groupings (repeated, or comma
/// separated as in the CSV link) and a team.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ChargebackQuery {
    month: String,
    group_by: Vec<String>,
    team: String,
}

impl ChargebackQuery {
    fn parse(raw: Option<&str>) -> ChargebackQuery {
        let mut q: ChargebackQuery =
            serde_html_form::from_str(raw.unwrap_or("")).unwrap_or_default();
        q.month = q.month.trim().to_string();
        q.group_by = q
            .group_by
            .iter()
            .flat_map(|g| g.split(','))
            .map(|g| g.trim().to_string())
            .filter(|g| !g.is_empty())
            .collect();
        q
    }

    /// The API's query for this report (without `format`).
    fn api_query(&self, month: &str) -> String {
        let mut parts = Vec::new();
        if !month.is_empty() {
            parts.push(format!("month={}", encode(month)));
        }
        if !self.group_by.is_empty() {
            parts.push(format!("group_by={}", encode(&self.group_by.join(","))));
        }
        if !self.team.is_empty() {
            parts.push(format!("team={}", encode(&self.team)));
        }
        parts.join("&")
    }
}

/// A report as the API answers it (`accounting::Report`).
#[derive(Debug, Clone, Deserialize)]
pub struct Report {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub group_by: Vec<String>,
    pub currency: String,
    pub prices: String,
    pub rows: Vec<Row>,
    pub total: Row,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Row {
    pub business_unit: Option<String>,
    pub team: Option<String>,
    pub project: Option<String>,
    pub user: Option<String>,
    pub model: Option<String>,
    pub tier: Option<String>,
    pub class: Option<String>,
    pub gpu_hours: String,
    pub cost: String,
    pub cost_micros: i64,
    pub holds: u64,
}

impl Row {
    /// The row's value of a grouping ("none" for a team without a
    /// business unit).
    pub fn key(&self, group: &str) -> String {
        let v = match group {
            "business_unit" => &self.business_unit,
            "team" => &self.team,
            "project" => &self.project,
            "user" => &self.user,
            "model" => &self.model,
            "tier" => &self.tier,
            _ => &self.class,
        };
        match v.as_deref() {
            Some("") => "none".into(),
            Some(s) => s.into(),
            None => String::new(),
        }
    }

    fn label(&self, groups: &[String]) -> String {
        groups
            .iter()
            .map(|g| self.key(g))
            .collect::<Vec<_>>()
            .join(" / ")
    }
}

#[derive(Template)]
#[template(path = "chargeback.html")]
struct ChargebackPage {
    layout: Layout,
    report: Option<Report>,
    /// The month shown, YYYY-MM.
    month: String,
    month_error: String,
    error: String,
    prev: String,
    next: String,
    /// Groupings ticked.
    groups: Vec<String>,
    options: [(&'static str, &'static str); 7],
    /// Teams to pick from (admin and finance), and the one picked.
    teams: Vec<String>,
    team: String,
    sees_all: bool,
    own_team: String,
    csv: String,
    chart: String,
    chart_note: String,
}

impl ChargebackPage {
    pub fn grouped(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }

    pub fn group_name(&self, g: &str) -> &'static str {
        GROUPS
            .iter()
            .find(|(k, _)| *k == g)
            .map(|(_, n)| *n)
            .unwrap_or("")
    }

    /// A link to another month, with the same groupings and team.
    fn month_link(q: &ChargebackQuery, month: &str) -> String {
        format!("/chargeback?{}", q.api_query(month))
    }
}

/// The most bars the chart draws (the largest costs).
const MAX_BARS: usize = 30;

fn chart(r: &Report) -> (String, String) {
    if r.rows.is_empty() {
        return (String::new(), String::new());
    }
    let mut rows: Vec<&Row> = r.rows.iter().collect();
    let mut note = String::new();
    if rows.len() > MAX_BARS {
        rows.sort_by_key(|r| std::cmp::Reverse(r.cost_micros));
        rows.truncate(MAX_BARS);
        note = format!(
            "The {MAX_BARS} largest of {} rows; the table has them all.",
            r.rows.len()
        );
    }
    let names: Vec<&str> = r
        .group_by
        .iter()
        .map(|g| {
            GROUPS
                .iter()
                .find(|(k, _)| k == g)
                .map(|(_, n)| *n)
                .unwrap_or("")
        })
        .collect();
    let c = BarChart {
        title: format!("Cost ({}) by {}", r.currency, names.join(" / ")),
        width: 620,
        bars: rows
            .iter()
            .map(|row| Bar {
                label: row.label(&r.group_by),
                value: row.cost_micros as f64 / 1e6,
                note: format!("{} {} · {} GPU-h", row.cost, r.currency, row.gpu_hours),
            })
            .collect(),
    };
    // svgchart escapes every text it writes.
    (c.render(), note)
}

/// GET /chargeback.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Result<Response, PageError> {
    let q = ChargebackQuery::parse(raw.as_deref());
    let sees_all = viewer.who.role == api::ROLE_ADMIN || viewer.who.role == api::ROLE_FINANCE;
    let teams: Vec<String> = if sees_all {
        let t: Vec<api::Team> = apicall::get(&state, &viewer, "/api/v1/teams").await?;
        t.into_iter().map(|t| t.name).collect()
    } else {
        Vec::new()
    };
    let path = format!("/api/v1/reports/chargeback?{}", q.api_query(&q.month));
    let mut page = ChargebackPage {
        layout: Layout::new("Chargeback", "chargeback", &viewer),
        report: None,
        month: q.month.clone(),
        month_error: String::new(),
        error: String::new(),
        prev: String::new(),
        next: String::new(),
        groups: q.group_by.clone(),
        options: GROUPS,
        teams,
        team: q.team.clone(),
        sees_all,
        own_team: viewer.who.team.clone(),
        csv: String::new(),
        chart: String::new(),
        chart_note: String::new(),
    };
    let status = match apicall::get::<Report>(&state, &viewer, &path).await {
        Ok(r) => {
            // The month the API chose (the cluster's, by default).
            let month = r.from.format("%Y-%m").to_string();
            page.prev = ChargebackPage::month_link(
                &q,
                &(r.from - Duration::days(1)).format("%Y-%m").to_string(),
            );
            page.next = ChargebackPage::month_link(&q, &r.to.format("%Y-%m").to_string());
            page.csv = format!("/chargeback.csv?{}", q.api_query(&month));
            page.month = month;
            page.groups = r.group_by.clone();
            (page.chart, page.chart_note) = chart(&r);
            page.report = Some(r);
            StatusCode::OK
        }
        Err(e) if e.status == StatusCode::BAD_REQUEST => {
            let message = crate::portal::pages::admin::people(&e);
            if e.field == "month" {
                page.month_error = message;
            } else {
                page.error = message;
            }
            StatusCode::BAD_REQUEST
        }
        Err(e) if e.status == StatusCode::NOT_FOUND && !q.team.is_empty() => {
            page.error = format!("There is no team {:?} that you may see.", q.team);
            StatusCode::NOT_FOUND
        }
        Err(e) => return Err(e.into()),
    };
    Ok(html_with(status, page))
}

/// GET /chargeback.csv: the API's CSV for the same query, byte for byte,
/// with its Content-Type and Content-Disposition (the file's name says
/// the period).
pub async fn csv(
    State(state): State<AppState>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Result<Response, PageError> {
    let q = ChargebackQuery::parse(raw.as_deref());
    let mut query = q.api_query(&q.month);
    if !query.is_empty() {
        query.push('&');
    }
    query.push_str("format=csv");
    let path = format!("/api/v1/reports/chargeback?{query}");
    let answer = apicall::send(&state, &viewer, Method::GET, &path, None).await?;
    if !answer.status.is_success() {
        let e: api::Error = serde_json::from_slice(&answer.body).unwrap_or(api::Error {
            error: String::from_utf8_lossy(&answer.body).into_owned(),
            field: String::new(),
        });
        return Err(PageError {
            status: answer.status,
            message: e.error,
        });
    }
    let mut headers = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::CONTENT_DISPOSITION] {
        if let Some(v) = answer.headers.get(&name) {
            headers.insert(name, v.clone());
        }
    }
    Ok((answer.status, headers, answer.body).into_response())
}
