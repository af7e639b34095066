//! Accounting: the price table, what a finished hold of a GPU is charged,
//! and the usage and chargeback reports summed from those charges over a
//! period, grouped by business unit, team, project, user, GPU model,
//! capacity tier or class. No I/O: the worker stores each charge in the
//! usage ledger, and the server reads the rows back and writes the answer.
//!
//! All arithmetic is in integers so that totals reconcile exactly: a
//! hold's share is in 1/7000 GPU ([`SHARE_UNIT`]: a MIG slice, k/7 of a
//! GPU, and a share in milli are both whole numbers of it), its length in
//! milliseconds; a hold is charged once, when it ends ([`charge`]), in
//! whole micro GPU-hours and whole micro currency units, and a report
//! only sums those, counting each hold in the period in which it ends.
//! (The Go build's `internal/accounting`, with business units and
//! periods added.)

mod prices;
mod report;

pub use prices::{ANY_MODEL, PriceError, PriceItem, PriceTable, Prices, TIERS};
pub use report::{
    Charged, GroupKey, Hold, Period, PeriodError, Report, ReportRow, Usage, build_charged, charge,
    micros, parse_group_by, usage, write_csv,
};

/// A whole GPU in the ledger's share unit: 7 compute slices × 1000 milli.
pub const SHARE_UNIT: i64 = 7000;

/// The share of a MIG slice of `compute` of a GPU's 7 compute slices.
pub fn slice_share(compute: i64) -> i64 {
    compute * SHARE_UNIT / 7
}

/// The share of `milli` thousandths of a GPU (a whole GPU is 1000).
pub fn milli_share(milli: i64) -> i64 {
    milli * SHARE_UNIT / 1000
}

/// What one grant on a GPU of `model` holds, for a ledger row: its share
/// and, for a MIG slice, the profile (0 for a profile the model lacks).
pub fn grant_share(
    model: &partita_engine::gpu::Model,
    g: &partita_engine::cluster::Grant,
) -> (i64, Option<String>) {
    match &g.slice {
        Some(p) => (
            model
                .find(&p.profile)
                .map_or(0, |pr| slice_share(i64::from(pr.compute))),
            Some(p.profile.to_string()),
        ),
        None => (milli_share(i64::from(g.milli)), None),
    }
}
