//! What a GPU-hour costs: the `prices` table when it has a row for the
//! model and tier (or the fallback model `*`), else the Go build's
//! built-in planning figures (`go/internal/accounting/prices.go`, which
//! gives their sources and assumptions; docs/server.md, "Price table").
//! All in integer micro-units (1 USD = 1,000,000) per GPU-hour of a whole
//! GPU.

use std::collections::BTreeMap;

/// The fallback model of a price table.
pub const ANY_MODEL: &str = "*";

/// The built-in table: (model, tier, USD micro-units per GPU-hour).
const BUILT_IN: [(&str, &str, i64); 21] = [
    ("H200-141GB", "on-demand", 5_000_000),
    ("H200-141GB", "reserved", 3_100_000),
    ("H200-141GB", "spot", 2_200_000),
    ("H100-80GB", "on-demand", 4_000_000),
    ("H100-80GB", "reserved", 2_500_000),
    ("H100-80GB", "spot", 1_800_000),
    ("A100-80GB", "on-demand", 2_500_000),
    ("A100-80GB", "reserved", 1_550_000),
    ("A100-80GB", "spot", 1_100_000),
    ("A100-40GB", "on-demand", 1_850_000),
    ("A100-40GB", "reserved", 1_150_000),
    ("A100-40GB", "spot", 800_000),
    ("L40S", "on-demand", 1_500_000),
    ("L40S", "reserved", 950_000),
    ("L40S", "spot", 650_000),
    ("L4", "on-demand", 800_000),
    ("L4", "reserved", 500_000),
    ("L4", "spot", 350_000),
    (ANY_MODEL, "on-demand", 2_000_000),
    (ANY_MODEL, "reserved", 1_250_000),
    (ANY_MODEL, "spot", 900_000),
];

/// A price: micro-units of `currency` per GPU-hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    pub micros: i64,
    pub currency: String,
}

/// A price table by (model, tier).
#[derive(Debug, Clone, Default)]
pub struct Prices {
    table: BTreeMap<(String, String), Price>,
}

impl Prices {
    /// The built-in table, in USD.
    pub fn built_in() -> Prices {
        let mut p = Prices::default();
        for (model, tier, micros) in BUILT_IN {
            p.set(model, tier, micros, "USD");
        }
        p
    }

    /// Sets (or replaces) one price.
    pub fn set(&mut self, model: &str, tier: &str, micros: i64, currency: &str) {
        self.table.insert(
            (model.to_string(), tier.to_string()),
            Price {
                micros,
                currency: currency.to_string(),
            },
        );
    }

    /// The price of `model` on `tier`: the model's own, else the fallback
    /// model's, else the built-in table's.
    pub fn price(&self, model: &str, tier: &str) -> Price {
        if let Some(p) = self.lookup(model, tier) {
            return p;
        }
        Prices::built_in().lookup(model, tier).unwrap_or(Price {
            micros: 0,
            currency: "USD".into(),
        })
    }

    /// The model's own price, else the fallback model's.
    fn lookup(&self, model: &str, tier: &str) -> Option<Price> {
        let own = self.table.get(&(model.to_string(), tier.to_string()));
        own.or_else(|| self.table.get(&(ANY_MODEL.to_string(), tier.to_string())))
            .cloned()
    }
}

/// GPU-seconds in thousandths for `gpu_milli` of a GPU held `seconds`.
pub fn gpu_seconds_milli(gpu_milli: i64, seconds: i64) -> i64 {
    gpu_milli * seconds
}

/// The cost in micro-units of `gpu_seconds_milli` at `price_micros` per
/// GPU-hour: GPU-hours x price, rounded half up to a whole micro-unit (a
/// GPU-hour is 3,600,000 GPU-second thousandths). In 128 bits, so no
/// product overflows.
pub fn cost_micros(gpu_seconds_milli: i64, price_micros: i64) -> i64 {
    let num = i128::from(gpu_seconds_milli) * i128::from(price_micros);
    i64::try_from((num + 1_800_000) / 3_600_000).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_fall_back_to_any_model_then_the_built_in_table() {
        let built_in = Prices::built_in();
        assert_eq!(built_in.price("H100-80GB", "reserved").micros, 2_500_000);
        assert_eq!(built_in.price("B200", "spot").micros, 900_000);
        let mut own = Prices::default();
        own.set("H100-80GB", "reserved", 3_000_000, "EUR");
        assert_eq!(own.price("H100-80GB", "reserved").micros, 3_000_000);
        assert_eq!(own.price("H100-80GB", "reserved").currency, "EUR");
        assert_eq!(own.price("A100-80GB", "spot").micros, 1_100_000);
    }

    #[test]
    fn cost_is_gpu_hours_times_price_rounded_half_up() {
        // One whole GPU for an hour at $2.50.
        assert_eq!(
            cost_micros(gpu_seconds_milli(1000, 3600), 2_500_000),
            2_500_000
        );
        // A minute: 41,666.67 micro-dollars, rounded to 41,667.
        assert_eq!(cost_micros(gpu_seconds_milli(1000, 60), 2_500_000), 41_667);
        assert_eq!(cost_micros(0, 2_500_000), 0);
    }
}
