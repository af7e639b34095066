//! The price table: micro currency units per GPU-hour by GPU model and
//! capacity tier, with where the figures come from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The capacity tiers a price (and a ledger hold) is for.
pub const TIERS: [&str; 3] = ["reserved", "on-demand", "spot"];

/// The model of a price that applies to every model not listed.
pub const ANY_MODEL: &str = "*";

/// A price table as the API shows it (`GET /api/v1/prices`) and as a
/// `--prices` file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    pub currency: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub assumptions: Vec<String>,
    pub prices: Vec<PriceItem>,
}

/// The price of one GPU-hour of `model` in `tier`, in currency units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceItem {
    pub model: String,
    pub tier: String,
    pub price: f64,
}

/// A price table that was checked: every price in micro units.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    pub currency: String,
    pub source: String,
    pub assumptions: Vec<String>,
    micros: BTreeMap<(String, String), i64>,
}

/// A price table refused, naming the entry and field at fault.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct PriceError(String);

/// The built-in prices, USD per GPU-hour: round planning figures, not a
/// quote; operators load their own table. Sources and assumptions
/// (2025-2026 public list prices):
///  - on-demand: hyperscaler H100 list prices fell to about $3-7 per
///    GPU-hour after AWS's June 2025 P5 reduction (up to 45 %); AWS EC2
///    Capacity Blocks listed p5.48xlarge (8 × H100) at $4.916 per
///    accelerator-hour and p4d.24xlarge (8 × A100-40GB) at $1.844 in
///    us-east-1 in 2025. H100-80GB is taken at $4.00 and the others scaled
///    by the same market's ratios;
///  - reserved (owned hardware or 1-3 year commitments): about 35-40 %
///    below on-demand;
///  - spot: about 50-65 % below on-demand, preemptible.
const DEFAULT_TABLE: [(&str, [f64; 3]); 7] = [
    // (model, [reserved, on-demand, spot])
    ("H200-141GB", [3.10, 5.00, 2.20]),
    ("H100-80GB", [2.50, 4.00, 1.80]),
    ("A100-80GB", [1.55, 2.50, 1.10]),
    ("A100-40GB", [1.15, 1.85, 0.80]),
    ("L40S", [0.95, 1.50, 0.65]),
    ("L4", [0.50, 0.80, 0.35]),
    (ANY_MODEL, [1.25, 2.00, 0.90]),
];

impl Prices {
    /// The built-in table (`DEFAULT_TABLE`).
    pub fn builtin() -> Prices {
        let mut prices = Vec::new();
        for (model, by_tier) in DEFAULT_TABLE {
            for (tier, price) in TIERS.iter().zip(by_tier) {
                prices.push(PriceItem {
                    model: model.to_string(),
                    tier: tier.to_string(),
                    price,
                });
            }
        }
        Prices::from_table(PriceTable {
            currency: "USD".into(),
            source: "built-in planning figures (src/accounting/prices.rs); replace with your own price table".into(),
            assumptions: vec![
                "on-demand: 2025-2026 hyperscaler list prices after the mid-2025 reductions (AWS EC2 Capacity Blocks, us-east-1: p5.48xlarge $4.916 and p4d.24xlarge $1.844 per GPU-hour); H100-80GB taken at $4.00, other models scaled by market ratios".into(),
                "reserved: owned hardware or 1-3 year commitments, about 35-40% below on-demand".into(),
                "spot: about 50-65% below on-demand, and preemptible".into(),
                "a MIG slice costs its compute share of the GPU (3g.40gb = 3/7); a share its milli".into(),
            ],
            prices,
        })
        .expect("the built-in table is valid (tested)")
    }

    /// Checks a table: a three-letter currency, known tiers, named models,
    /// prices from 0 to a million, no model and tier twice.
    pub fn from_table(t: PriceTable) -> Result<Prices, PriceError> {
        if t.currency.len() != 3 || !t.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(PriceError(format!(
                "currency: {:?} is not a three-letter code such as USD",
                t.currency
            )));
        }
        let mut micros = BTreeMap::new();
        for (i, it) in t.prices.iter().enumerate() {
            if !TIERS.contains(&it.tier.as_str()) {
                return Err(PriceError(format!(
                    "prices[{i}].tier: {:?} is not a tier ({})",
                    it.tier,
                    TIERS.join(", ")
                )));
            }
            if it.model.is_empty() {
                return Err(PriceError(format!(
                    "prices[{i}].model: empty (use {ANY_MODEL:?} for any model)"
                )));
            }
            if !(it.price >= 0.0 && it.price < 1e6) {
                return Err(PriceError(format!(
                    "prices[{i}].price: {} must be between 0 and 1000000",
                    it.price
                )));
            }
            let key = (it.model.clone(), it.tier.clone());
            if micros.contains_key(&key) {
                return Err(PriceError(format!(
                    "prices[{i}]: {}/{} is listed twice",
                    it.model, it.tier
                )));
            }
            micros.insert(key, (it.price * 1e6).round() as i64);
        }
        Ok(Prices {
            currency: t.currency,
            source: t.source,
            assumptions: t.assumptions,
            micros,
        })
    }

    /// Sets the price of `model` in `tier` to `micros` per GPU-hour (a
    /// row of the `prices` table, already checked by its constraints).
    pub fn set_micros(&mut self, model: &str, tier: &str, micros: i64) {
        self.micros
            .insert((model.to_string(), tier.to_string()), micros);
    }

    /// Reads a table from JSON in the shape of `GET /api/v1/prices`.
    pub fn from_json(text: &str) -> Result<Prices, PriceError> {
        let t: PriceTable =
            serde_json::from_str(text).map_err(|e| PriceError(format!("price table: {e}")))?;
        Prices::from_table(t)
    }

    /// The price of one GPU-hour in micro units: the model's own in the
    /// tier, else the tier's price for any model, else 0.
    pub fn per_hour(&self, model: &str, tier: &str) -> i64 {
        let own = self.micros.get(&(model.to_string(), tier.to_string()));
        let any = || self.micros.get(&(ANY_MODEL.to_string(), tier.to_string()));
        own.or_else(any).copied().unwrap_or(0)
    }

    /// The table in API form, by model and tier.
    pub fn table(&self) -> PriceTable {
        PriceTable {
            currency: self.currency.clone(),
            source: self.source.clone(),
            assumptions: self.assumptions.clone(),
            prices: self
                .micros
                .iter()
                .map(|((model, tier), &m)| PriceItem {
                    model: model.clone(),
                    tier: tier.clone(),
                    price: m as f64 / 1e6,
                })
                .collect(),
        }
    }
}
