//! The audit log, newest first, a page at a time: who changed what, and
//! when (wall time), with what changed between before and after.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::require_admin;
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Layout, PageError, html};
use crate::portal::session::{Viewer, encode};
use crate::server::AppState;

/// Rows a page.
const PAGE: usize = 50;

/// One row as shown: the entry and its changes in words.
pub struct Line {
    pub entry: api::AuditEntry,
    pub changes: Vec<String>,
}

#[derive(Template)]
#[template(path = "admin/audit.html")]
struct AuditPage {
    layout: Layout,
    lines: Vec<Line>,
    next: String,
    first: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct AuditQuery {
    after: String,
}

/// A JSON value, short.
fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        Value::Number(n) => n.as_f64().map(super::num).unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    };
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(79).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// What changed between before and after: each field that differs, as
/// "field: old → new"; a creation or removal lists what there is.
pub fn changes(before: Option<&Value>, after: Option<&Value>) -> Vec<String> {
    let obj = |v: Option<&Value>| v.and_then(Value::as_object).cloned();
    match (obj(before), obj(after)) {
        (Some(b), Some(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            let mut out = Vec::new();
            for k in keys.into_iter().filter(|k| b.get(*k) != a.get(*k)) {
                if let (Some(pb), Some(pa)) = (price_rows(b.get(k)), price_rows(a.get(k))) {
                    out.extend(price_changes(&pb, &pa));
                    continue;
                }
                out.push(format!(
                    "{k}: {} → {}",
                    b.get(k).map(short).unwrap_or_else(|| "none".into()),
                    a.get(k).map(short).unwrap_or_else(|| "none".into())
                ));
            }
            out
        }
        (None, Some(a)) | (Some(a), None) => a
            .iter()
            .map(|(k, v)| format!("{k}: {}", short(v)))
            .collect(),
        (None, None) => match (before, after) {
            (Some(b), Some(a)) if b != a => vec![format!("{} → {}", short(b), short(a))],
            (_, Some(v)) | (Some(v), None) => vec![short(v)],
            _ => Vec::new(),
        },
    }
}

/// A list of prices (`{"model", "tier", "price"}`), by "model/tier".
fn price_rows(v: Option<&Value>) -> Option<Vec<(String, String)>> {
    let items = v?.as_array()?;
    items
        .iter()
        .map(|p| {
            let model = p.get("model")?.as_str()?;
            let tier = p.get("tier")?.as_str()?;
            Some((format!("{model}/{tier}"), short(p.get("price")?)))
        })
        .collect()
}

/// Each price set: "model/tier: old → new" ("none" where there was
/// none).
fn price_changes(before: &[(String, String)], after: &[(String, String)]) -> Vec<String> {
    after
        .iter()
        .map(|(key, new)| {
            let old = before
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .unwrap_or("none");
            format!("{key}: {old} → {new}")
        })
        .collect()
}

/// GET /admin/audit?after=SEQ.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<AuditQuery>,
) -> Result<Response, PageError> {
    require_admin(&viewer)?;
    let mut path = format!("/api/v1/audit?limit={PAGE}");
    if !q.after.is_empty() {
        path.push_str(&format!("&after={}", encode(&q.after)));
    }
    let list: api::AuditList = apicall::get(&state, &viewer, &path).await?;
    let lines = list
        .entries
        .into_iter()
        .map(|e| Line {
            changes: changes(e.before.as_ref(), e.after.as_ref()),
            entry: e,
        })
        .collect();
    Ok(html(AuditPage {
        layout: Layout::new("Audit log", "admin", &viewer),
        lines,
        next: list.next,
        first: q.after.is_empty(),
    }))
}
