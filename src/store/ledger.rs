//! The usage ledger and the price table: the prices in effect (read by
//! the worker, which charges each finished hold, and by `GET /prices`),
//! the rows a report sums, and the ledger's pages.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::accounting::{Charged, Hold, Period, Prices, Usage};

/// The price table in effect: the built-in table, with the `prices` rows
/// in effect now (the latest `valid_from` not in the future per model and
/// tier) laid over it. The built-in table is in USD; rows in another
/// currency replace it wholly (a figure in one currency must never fill a
/// gap in another), and rows in two currencies are refused.
pub async fn prices(db: impl PgExecutor<'_>) -> Result<Prices, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT DISTINCT ON (gpu_model, capacity_tier) gpu_model, capacity_tier, price_micros, currency
         FROM prices WHERE valid_from <= now()
         ORDER BY gpu_model, capacity_tier, valid_from DESC"
    )
    .fetch_all(db)
    .await?;
    let mut table = Prices::builtin();
    let Some(first) = rows.first() else {
        return Ok(table);
    };
    let currency = first.currency.clone();
    if let Some(other) = rows.iter().find(|r| r.currency != currency) {
        return Err(sqlx::Error::Protocol(format!(
            "the prices table mixes currencies ({currency} and {}): one table, one currency",
            other.currency
        )));
    }
    if currency != table.currency {
        table = Prices::from_table(crate::accounting::PriceTable {
            currency: currency.clone(),
            source: String::new(),
            assumptions: Vec::new(),
            prices: Vec::new(),
        })
        .map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
        table.assumptions = vec![format!(
            "the prices table is in {currency}, so the built-in USD figures do not apply; a model and tier it does not list costs 0"
        )];
    }
    for r in &rows {
        table.set_micros(&r.gpu_model, &r.capacity_tier, r.price_micros);
    }
    table.source = format!(
        "the prices table ({} rows in effect){}",
        rows.len(),
        if currency == "USD" {
            ", over the built-in planning figures (src/accounting/prices.rs)"
        } else {
            ""
        }
    );
    Ok(table)
}

/// The ledger rows that end in `period` (`ended_at` in [from, to)), of
/// one team or all, as the reports group them. A team with no business
/// unit groups under "".
pub async fn charged(
    pool: &PgPool,
    period: Period,
    team: Option<&str>,
) -> Result<Vec<Charged>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT COALESCE(b.name, '') AS "business_unit!", t.name AS team, p.name AS project,
                  u.name AS "user", l.gpu_model, l.capacity_tier, l.job_class, l.gpu_share,
                  l.started_at, l.ended_at, l.micro_gpu_hours, l.cost_micros
           FROM usage_ledger l
           JOIN teams t ON t.id = l.team_id
           LEFT JOIN business_units b ON b.id = t.business_unit_id
           JOIN projects p ON p.id = l.project_id
           JOIN users u ON u.id = l.user_id
           WHERE l.ended_at >= $1 AND l.ended_at < $2 AND ($3::text IS NULL OR t.name = $3)
           ORDER BY l.seq"#,
        period.from,
        period.to,
        team
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Charged {
            hold: Hold {
                business_unit: r.business_unit,
                team: r.team,
                project: r.project,
                user: r.user,
                model: r.gpu_model,
                tier: r.capacity_tier,
                class: r.job_class,
                share: i64::from(r.gpu_share),
                start: r.started_at,
                end: Some(r.ended_at),
            },
            usage: Usage {
                micro_gpu_hours: r.micro_gpu_hours,
                cost_micros: r.cost_micros,
            },
        })
        .collect())
}

/// One ledger row as `GET /ledger` shows it.
#[derive(Debug, Clone)]
pub struct LedgerRow {
    pub seq: i64,
    pub hold_id: String,
    pub recorded_at: DateTime<Utc>,
    pub job: String,
    pub task: String,
    pub business_unit: String,
    pub team: String,
    pub project: String,
    pub user: String,
    pub class: String,
    pub node: String,
    pub gpu: i32,
    pub model: String,
    pub tier: String,
    pub mig_profile: Option<String>,
    pub gpu_share: i32,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub share_ms: i64,
    pub micro_gpu_hours: i64,
    pub price_micros: i64,
    pub cost_micros: i64,
    pub currency: String,
}

/// A page of the ledger in `seq` order: rows after `after`, at most
/// `limit`, of one team or all.
pub async fn page(
    pool: &PgPool,
    after: i64,
    limit: i64,
    team: Option<&str>,
) -> Result<Vec<LedgerRow>, sqlx::Error> {
    sqlx::query_as!(
        LedgerRow,
        r#"SELECT l.seq, l.hold_id, l.recorded_at, j.id AS job, l.task,
                  COALESCE(b.name, '') AS "business_unit!", t.name AS team, p.name AS project,
                  u.name AS "user", l.job_class AS class, l.node, l.gpu_index AS gpu,
                  l.gpu_model AS model, l.capacity_tier AS tier, l.mig_profile, l.gpu_share,
                  l.started_at, l.ended_at, l.share_ms, l.micro_gpu_hours, l.price_micros,
                  l.cost_micros, l.currency
           FROM usage_ledger l
           JOIN jobs j ON j.seq = l.job_seq
           JOIN teams t ON t.id = l.team_id
           LEFT JOIN business_units b ON b.id = t.business_unit_id
           JOIN projects p ON p.id = l.project_id
           JOIN users u ON u.id = l.user_id
           WHERE l.seq > $1 AND ($2::text IS NULL OR t.name = $2)
           ORDER BY l.seq LIMIT $3"#,
        after,
        team,
        limit
    )
    .fetch_all(pool)
    .await
}

/// The key of the lock that lets one price change through at a time:
/// "prices" in ASCII.
const PRICES_LOCK: i64 = 0x7072_6963_6573;

/// New prices (model, tier, micro-units per GPU-hour) in `currency`,
/// in effect from the moment they are written: rows with a `valid_from`
/// of now, after the rows already there (nothing is rewritten; ledger
/// rows keep the price they were charged at). Within `tx`: one change at
/// a time (a lock for the transaction), and refused, by giving the
/// currencies in effect afterwards, when those would be more than one.
/// Gives the moment the prices take effect and the currencies in effect.
pub async fn insert_prices(
    tx: &mut sqlx::PgConnection,
    currency: &str,
    rows: &[(String, String, i64)],
) -> Result<(DateTime<Utc>, Vec<String>), sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT 1 AS "one!" FROM pg_advisory_xact_lock($1)"#,
        PRICES_LOCK
    )
    .fetch_one(&mut *tx)
    .await?;
    // After the lock: a change committed meanwhile is seen, and the new
    // rows come after it.
    let at = sqlx::query_scalar!(r#"SELECT clock_timestamp() AS "at!""#)
        .fetch_one(&mut *tx)
        .await?;
    let models: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let tiers: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
    let micros: Vec<i64> = rows.iter().map(|r| r.2).collect();
    sqlx::query!(
        "INSERT INTO prices (gpu_model, capacity_tier, price_micros, currency, valid_from)
         SELECT m, t, p, $4, $5 FROM UNNEST($1::text[], $2::text[], $3::bigint[]) AS x(m, t, p)",
        &models,
        &tiers,
        &micros,
        currency,
        at,
    )
    .execute(&mut *tx)
    .await?;
    let currencies = sqlx::query_scalar!(
        r#"SELECT DISTINCT currency AS "currency!" FROM (
               SELECT DISTINCT ON (gpu_model, capacity_tier) currency
               FROM prices WHERE valid_from <= $1
               ORDER BY gpu_model, capacity_tier, valid_from DESC) AS in_effect
           ORDER BY 1"#,
        at
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok((at, currencies))
}
