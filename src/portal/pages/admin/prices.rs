//! Prices: the price table in effect (`GET /api/v1/prices`), and new
//! prices (`PUT /api/v1/prices`), which take effect from now on: the
//! worker charges each hold when it ends at the prices then in effect,
//! and ledger rows already charged keep theirs.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{FieldErrors, number, require_admin};
use crate::accounting::{PriceItem, PriceTable, TIERS};
use crate::api;
use crate::portal::apicall;
use crate::portal::render::{Flash, Layout, PageError, html, html_with};
use crate::portal::session::{Posted, Viewer};
use crate::server::AppState;

/// One price's input.
pub struct Cell {
    pub tier: &'static str,
    pub name: &'static str,
    pub id: String,
    pub value: String,
    pub error: String,
}

/// One model's prices: a row of the form (the last, `new`, for a model
/// not in the table yet).
pub struct Row {
    pub model: String,
    pub new: bool,
    pub cells: Vec<Cell>,
}

/// The form's field of each tier.
const NAMES: [&str; 3] = ["reserved", "on_demand", "spot"];

/// The form as sent: one entry per row in each list, in order.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PricesForm {
    currency: String,
    model: Vec<String>,
    reserved: Vec<String>,
    on_demand: Vec<String>,
    spot: Vec<String>,
}

impl PricesForm {
    fn column(&self, tier: usize) -> &[String] {
        match tier {
            0 => &self.reserved,
            1 => &self.on_demand,
            _ => &self.spot,
        }
    }
}

#[derive(Template)]
#[template(path = "admin/prices.html")]
struct PricesPage {
    layout: Layout,
    table: PriceTable,
    currency: String,
    rows: Vec<Row>,
    errors: FieldErrors,
    tiers: [&'static str; 3],
}

/// The models of a table, in its order, each once.
fn models(table: &PriceTable) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in &table.prices {
        if !out.contains(&p.model) {
            out.push(p.model.clone());
        }
    }
    out
}

fn price_of(table: &PriceTable, model: &str, tier: &str) -> Option<f64> {
    table
        .prices
        .iter()
        .find(|p| p.model == model && p.tier == tier)
        .map(|p| p.price)
}

/// The rows of the form: the table's, then an empty one for a new model.
fn rows_of(table: &PriceTable) -> Vec<Row> {
    let mut rows: Vec<Row> = models(table)
        .into_iter()
        .map(|m| Row {
            cells: (0..3)
                .map(|t| Cell {
                    tier: TIERS[t],
                    name: NAMES[t],
                    id: String::new(),
                    value: price_of(table, &m, TIERS[t])
                        .map(|p| format!("{p}"))
                        .unwrap_or_default(),
                    error: String::new(),
                })
                .collect(),
            model: m,
            new: false,
        })
        .collect();
    rows.push(Row {
        model: String::new(),
        new: true,
        cells: (0..3)
            .map(|t| Cell {
                tier: TIERS[t],
                name: NAMES[t],
                id: String::new(),
                value: String::new(),
                error: String::new(),
            })
            .collect(),
    });
    for (i, r) in rows.iter_mut().enumerate() {
        for c in &mut r.cells {
            c.id = format!("price-{i}-{}", c.tier);
        }
    }
    rows
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Done {
    saved: String,
}

fn render(
    viewer: &Viewer,
    table: PriceTable,
    currency: String,
    rows: Vec<Row>,
    errors: FieldErrors,
    flash: Option<Flash>,
) -> PricesPage {
    let mut layout = Layout::new("Prices", "admin", viewer);
    layout.flash = flash;
    PricesPage {
        layout,
        table,
        currency,
        rows,
        errors,
        tiers: TIERS,
    }
}

/// GET /admin/prices.
pub async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    require_admin(&viewer)?;
    let table: PriceTable = apicall::get(&state, &viewer, "/api/v1/prices").await?;
    let flash = match done.saved.as_str() {
        "" => None,
        "none" => Some(Flash {
            error: false,
            text: "Nothing changed: every price was as it is.".into(),
        }),
        n => Some(Flash {
            error: false,
            text: format!(
                "{n} prices set. They apply to holds charged from now on; ledger rows already charged keep their prices."
            ),
        }),
    };
    let rows = rows_of(&table);
    let currency = table.currency.clone();
    Ok(html(render(
        &viewer,
        table,
        currency,
        rows,
        FieldErrors::default(),
        flash,
    )))
}

/// POST /admin/prices: the prices that changed, set from now on.
pub async fn save(
    State(state): State<AppState>,
    posted: Posted<PricesForm>,
) -> Result<Response, PageError> {
    let Posted { viewer, form } = posted;
    require_admin(&viewer)?;
    let table: PriceTable = apicall::get(&state, &viewer, "/api/v1/prices").await?;
    let currency = form.currency.trim().to_uppercase();
    let mut errors = FieldErrors::default();
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
        errors.add(
            "currency",
            format!(
                "{:?} is not a three-letter currency code such as USD or EUR.",
                form.currency.trim()
            ),
        );
    }
    let new_currency = currency != table.currency;
    // The form as it was sent, each price with its problem.
    let mut rows = Vec::new();
    let mut items = Vec::new();
    for (i, model) in form.model.iter().enumerate() {
        let model = model.trim().to_string();
        let known = price_of(&table, &model, TIERS[0]).is_some()
            || price_of(&table, &model, TIERS[1]).is_some()
            || price_of(&table, &model, TIERS[2]).is_some();
        let mut cells = Vec::new();
        for t in 0..3 {
            let value = form.column(t).get(i).cloned().unwrap_or_default();
            let mut cell = Cell {
                tier: TIERS[t],
                name: NAMES[t],
                id: format!("price-{i}-{}", TIERS[t]),
                value: value.trim().to_string(),
                error: String::new(),
            };
            if cell.value.is_empty() {
                if known && price_of(&table, &model, TIERS[t]).is_some() {
                    cell.error = "Give a price (0 for free).".into();
                }
            } else if model.is_empty() {
                cell.error = "Name the model of this row first.".into();
            } else {
                match number(&cell.value) {
                    Ok(p) if !(0.0..1e6).contains(&p) => {
                        cell.error = "A price is from 0 to 1000000.".into();
                    }
                    Ok(p) => {
                        let old = price_of(&table, &model, TIERS[t]);
                        // Only what changed, unless the currency does.
                        if new_currency
                            || old.is_none_or(|o| (o * 1e6).round() != (p * 1e6).round())
                        {
                            items.push(PriceItem {
                                model: model.clone(),
                                tier: TIERS[t].to_string(),
                                price: p,
                            });
                        }
                    }
                    Err(e) => cell.error = e,
                }
            }
            if !cell.error.is_empty() {
                errors.add(cell.id.clone(), cell.error.clone());
            }
            cells.push(cell);
        }
        rows.push(Row {
            model,
            new: !known,
            cells,
        });
    }
    if errors.is_empty() && items.is_empty() {
        return Ok(Redirect::to("/admin/prices?saved=none").into_response());
    }
    if errors.is_empty() {
        let req = api::PricesUpdate {
            currency: currency.clone(),
            prices: items,
        };
        let n = req.prices.len();
        match apicall::call::<_, PriceTable>(&state, &viewer, Method::PUT, "/api/v1/prices", &req)
            .await
        {
            Ok(_) => return Ok(Redirect::to(&format!("/admin/prices?saved={n}")).into_response()),
            Err(e) if e.status.is_client_error() => errors.api(&e, &["currency"]),
            Err(e) => return Err(e.into()),
        }
    }
    if rows.last().is_none_or(|r| !r.model.is_empty()) {
        // Room for another new model.
        let i = rows.len();
        rows.push(Row {
            model: String::new(),
            new: true,
            cells: (0..3)
                .map(|t| Cell {
                    tier: TIERS[t],
                    name: NAMES[t],
                    id: format!("price-{i}-{}", TIERS[t]),
                    value: String::new(),
                    error: String::new(),
                })
                .collect(),
        });
    }
    let page = render(
        &viewer,
        table,
        form.currency.trim().to_string(),
        rows,
        errors,
        None,
    );
    Ok(html_with(StatusCode::BAD_REQUEST, page))
}
