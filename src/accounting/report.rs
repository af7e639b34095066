//! Usage and chargeback reports: the ledger's holds clipped to a period,
//! priced, summed by group, as JSON or CSV.

use std::collections::BTreeMap;
use std::io::Write;

use chrono::{DateTime, Datelike, Months, NaiveDate, SecondsFormat, TimeZone, Utc};
use serde::Serialize;

use super::{Prices, SHARE_UNIT};

/// One hold of the usage ledger: a task's use of (part of) one GPU from
/// `start` to `end` in cluster time; `end` is none while it still holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub business_unit: String,
    pub team: String,
    pub project: String,
    pub user: String,
    pub model: String,
    pub tier: String,
    pub class: String,
    /// The part of the GPU held, in 1/7000 GPU (`SHARE_UNIT`).
    pub share: i64,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
}

/// What a hold contributes to a period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub micro_gpu_hours: i64,
    pub cost_micros: i64,
}

/// A share of `s` (1/7000 GPU) held for `d` ms is s·d / (7000 · 3.6e6)
/// GPU-hours, s·d / 25,200 micro GPU-hours.
const MICRO_HOUR_DIVISOR: i64 = SHARE_UNIT * 3_600_000 / 1_000_000;

/// What `h` contributes to `period`: micro GPU-hours and micro currency
/// units, each rounded half up; an open hold counts until `now`. A hold
/// entirely inside the period gives the same figures whatever the period,
/// which is what makes a report's total equal the ledger's sum.
pub fn usage(h: &Hold, period: &Period, now: DateTime<Utc>, prices: &Prices) -> Usage {
    let end = h.end.unwrap_or(now);
    let (start, stop) = (h.start.max(period.from), end.min(period.to));
    if stop <= start {
        return Usage::default();
    }
    let ms = (stop - start).num_milliseconds();
    // i128: a whole GPU for a year is 7000 × 3.2e10 ms, beyond i64 only
    // for centuries, but the product with a price is not far.
    let micro_gpu_hours = ((i128::from(h.share) * i128::from(ms)
        + i128::from(MICRO_HOUR_DIVISOR / 2))
        / i128::from(MICRO_HOUR_DIVISOR)) as i64;
    let price = prices.per_hour(&h.model, &h.tier);
    let cost_micros =
        ((i128::from(micro_gpu_hours) * i128::from(price) + 500_000) / 1_000_000) as i64;
    Usage {
        micro_gpu_hours,
        cost_micros,
    }
}

/// A half-open period [from, to) of cluster time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Period {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// A period refused, naming the parameter at fault.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{field}: {message}")]
pub struct PeriodError {
    pub field: &'static str,
    pub message: String,
}

fn period_error(field: &'static str, message: impl Into<String>) -> PeriodError {
    PeriodError {
        field,
        message: message.into(),
    }
}

impl Period {
    /// The calendar month (UTC) that holds `t`: every report's default.
    pub fn month_of(t: DateTime<Utc>) -> Period {
        let first = NaiveDate::from_ymd_opt(t.year(), t.month(), 1).expect("day 1 exists");
        let from = Utc.from_utc_datetime(&first.and_hms_opt(0, 0, 0).expect("midnight"));
        Period {
            from,
            to: from + Months::new(1),
        }
    }

    /// The period a request asks for: `month` ("2026-12"), or `from` and
    /// `to` (RFC 3339; a missing `from` is the start of `to`'s month, a
    /// missing `to` is `now`), or by default the calendar month of `now`.
    pub fn parse(
        month: Option<&str>,
        from: Option<&str>,
        to: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Period, PeriodError> {
        if let Some(m) = month {
            if from.is_some() || to.is_some() {
                return Err(period_error("month", "give a month or from/to, not both"));
            }
            let day = NaiveDate::parse_from_str(&format!("{m}-01"), "%Y-%m-%d").map_err(|_| {
                period_error("month", format!("{m:?} is not a month such as 2026-12"))
            })?;
            return Ok(Period::month_of(
                Utc.from_utc_datetime(&day.and_hms_opt(0, 0, 0).expect("midnight")),
            ));
        }
        let time = |field: &'static str, s: &str| {
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| {
                    period_error(
                        field,
                        format!("{s:?} is not an RFC 3339 time such as 2026-12-01T00:00:00Z"),
                    )
                })
        };
        let period = match (from, to) {
            (None, None) => Period::month_of(now),
            (f, t) => {
                let to = t.map(|s| time("to", s)).transpose()?.unwrap_or(now);
                let from = match f {
                    Some(s) => time("from", s)?,
                    None => Period::month_of(to).from,
                };
                Period { from, to }
            }
        };
        if period.to <= period.from {
            return Err(period_error(
                "to",
                format!("{} is not after from {}", iso(period.to), iso(period.from)),
            ));
        }
        Ok(period)
    }
}

/// An ISO 8601 UTC time, to the second: 2026-12-01T00:00:00Z.
fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// What a report may group by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupKey {
    BusinessUnit,
    Team,
    Project,
    User,
    Model,
    Tier,
    Class,
}

impl GroupKey {
    pub const ALL: [GroupKey; 7] = [
        GroupKey::BusinessUnit,
        GroupKey::Team,
        GroupKey::Project,
        GroupKey::User,
        GroupKey::Model,
        GroupKey::Tier,
        GroupKey::Class,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GroupKey::BusinessUnit => "business_unit",
            GroupKey::Team => "team",
            GroupKey::Project => "project",
            GroupKey::User => "user",
            GroupKey::Model => "model",
            GroupKey::Tier => "tier",
            GroupKey::Class => "class",
        }
    }

    fn of(self, h: &Hold) -> &str {
        match self {
            GroupKey::BusinessUnit => &h.business_unit,
            GroupKey::Team => &h.team,
            GroupKey::Project => &h.project,
            GroupKey::User => &h.user,
            GroupKey::Model => &h.model,
            GroupKey::Tier => &h.tier,
            GroupKey::Class => &h.class,
        }
    }
}

/// Reads a comma-separated `group_by`; empty is `default`.
pub fn parse_group_by(s: &str, default: &[GroupKey]) -> Result<Vec<GroupKey>, PeriodError> {
    if s.trim().is_empty() {
        return Ok(default.to_vec());
    }
    let mut out = Vec::new();
    for k in s.split(',').map(str::trim) {
        let Some(key) = GroupKey::ALL.into_iter().find(|g| g.name() == k) else {
            let names: Vec<&str> = GroupKey::ALL.iter().map(|g| g.name()).collect();
            return Err(period_error(
                "group_by",
                format!("{k:?} is not one of {}", names.join(", ")),
            ));
        };
        if out.contains(&key) {
            return Err(period_error("group_by", format!("{k:?} is given twice")));
        }
        out.push(key);
    }
    Ok(out)
}

/// A usage or chargeback report.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Report {
    /// The period [from, to), cluster time.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    #[schema(value_type = Vec<String>)]
    pub group_by: Vec<&'static str>,
    pub currency: String,
    /// Where the prices come from.
    pub prices: String,
    pub rows: Vec<ReportRow>,
    pub total: ReportRow,
}

/// One group's usage; the key fields not grouped on are absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReportRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub business_unit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Exact decimals of the integer fields below.
    pub gpu_hours: String,
    pub cost: String,
    pub micro_gpu_hours: i64,
    pub cost_micros: i64,
    /// The holds counted: those that overlap the period (`build`), or
    /// the ledger rows that end in it (`build_charged`).
    pub holds: u64,
}

impl ReportRow {
    fn key_mut(&mut self, k: GroupKey) -> &mut Option<String> {
        match k {
            GroupKey::BusinessUnit => &mut self.business_unit,
            GroupKey::Team => &mut self.team,
            GroupKey::Project => &mut self.project,
            GroupKey::User => &mut self.user,
            GroupKey::Model => &mut self.model,
            GroupKey::Tier => &mut self.tier,
            GroupKey::Class => &mut self.class,
        }
    }

    fn key(&self, k: GroupKey) -> Option<&str> {
        match k {
            GroupKey::BusinessUnit => self.business_unit.as_deref(),
            GroupKey::Team => self.team.as_deref(),
            GroupKey::Project => self.project.as_deref(),
            GroupKey::User => self.user.as_deref(),
            GroupKey::Model => self.model.as_deref(),
            GroupKey::Tier => self.tier.as_deref(),
            GroupKey::Class => self.class.as_deref(),
        }
    }

    fn add(&mut self, u: Usage) {
        self.micro_gpu_hours += u.micro_gpu_hours;
        self.cost_micros += u.cost_micros;
        self.holds += 1;
    }

    fn finish(mut self) -> ReportRow {
        self.gpu_hours = micros(self.micro_gpu_hours);
        self.cost = micros(self.cost_micros);
        self
    }
}

/// A finished hold as the usage ledger stores it: charged once, when it
/// ended, with [`charge`].
#[derive(Debug, Clone, PartialEq)]
pub struct Charged {
    pub hold: Hold,
    pub usage: Usage,
}

/// What a finished hold is charged, over its own span: the ledger row's
/// `share_ms` (share × held milliseconds) and its [`usage`]. The worker
/// calls it once per hold; reports only sum what it gave, so the two can
/// never disagree. None for a hold not yet ended.
pub fn charge(h: &Hold, prices: &Prices) -> Option<(i64, Usage)> {
    let end = h.end?;
    let span = Period {
        from: h.start,
        to: end,
    };
    let ms = (end - h.start).num_milliseconds().max(0);
    Some((h.share * ms, usage(h, &span, end, prices)))
}

/// The chargeback of ledger rows: the rows that END in `period` (the
/// caller selects them), each counted whole with the figures it was
/// charged, grouped by `group_by`. Every finished hold is charged in
/// exactly one period, so consecutive periods partition the ledger and a
/// report's total is exactly the sum of its rows.
pub fn build_charged(
    rows: &[Charged],
    period: Period,
    group_by: &[GroupKey],
    currency: &str,
    source: &str,
) -> Report {
    let charged = rows
        .iter()
        .filter(|c| {
            c.hold
                .end
                .is_some_and(|e| e >= period.from && e < period.to)
        })
        .map(|c| (&c.hold, c.usage));
    sum(charged, period, group_by, currency, source)
}

fn sum<'a>(
    charged: impl Iterator<Item = (&'a Hold, Usage)>,
    period: Period,
    group_by: &[GroupKey],
    currency: &str,
    source: &str,
) -> Report {
    let mut rows: BTreeMap<Vec<&str>, ReportRow> = BTreeMap::new();
    let mut total = ReportRow::default();
    for (h, u) in charged {
        let key: Vec<&str> = group_by.iter().map(|&g| g.of(h)).collect();
        rows.entry(key)
            .or_insert_with(|| {
                let mut r = ReportRow::default();
                for &g in group_by {
                    *r.key_mut(g) = Some(g.of(h).to_string());
                }
                r
            })
            .add(u);
        total.add(u);
    }
    Report {
        from: period.from,
        to: period.to,
        group_by: group_by.iter().map(|g| g.name()).collect(),
        currency: currency.to_string(),
        prices: source.to_string(),
        rows: rows.into_values().map(ReportRow::finish).collect(),
        total: total.finish(),
    }
}

/// An integer count of millionths as an exact decimal: 1500000 is
/// "1.500000".
pub fn micros(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let a = v.unsigned_abs();
    format!("{sign}{}.{:06}", a / 1_000_000, a % 1_000_000)
}

/// Writes a report as CSV (RFC 4180: CRLF line ends, fields quoted when
/// they need it; UTF-8): a header, one line per row with the period in
/// each, and a last line with the total, whose key columns say "TOTAL".
pub fn write_csv<W: Write>(w: W, r: &Report) -> csv::Result<()> {
    let mut out = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(w);
    let keys: Vec<GroupKey> = r
        .group_by
        .iter()
        .filter_map(|n| GroupKey::ALL.into_iter().find(|g| g.name() == *n))
        .collect();
    let mut header: Vec<String> = keys.iter().map(|k| k.name().to_string()).collect();
    header.extend([
        "period_from".to_string(),
        "period_to".to_string(),
        "gpu_hours".to_string(),
        format!("cost_{}", r.currency.to_lowercase()),
        "micro_gpu_hours".to_string(),
        "cost_micros".to_string(),
        "holds".to_string(),
    ]);
    out.write_record(&header)?;
    let (from, to) = (iso(r.from), iso(r.to));
    let line = |row: &ReportRow, total: bool| -> Vec<String> {
        let mut fields: Vec<String> = keys
            .iter()
            .map(|&k| {
                if total {
                    "TOTAL".to_string()
                } else {
                    row.key(k).unwrap_or_default().to_string()
                }
            })
            .collect();
        fields.extend([
            from.clone(),
            to.clone(),
            row.gpu_hours.clone(),
            row.cost.clone(),
            row.micro_gpu_hours.to_string(),
            row.cost_micros.to_string(),
            row.holds.to_string(),
        ]);
        fields
    };
    for row in &r.rows {
        out.write_record(line(row, false))?;
    }
    out.write_record(line(&r.total, true))?;
    out.flush()?;
    Ok(())
}
