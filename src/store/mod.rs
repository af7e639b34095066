//! What the API reads and writes in PostgreSQL: accounts (teams,
//! projects, users, tokens), jobs and their events, and the audit log.
//! Every query is compile-time checked (`sqlx::query!`); changes that an
//! admin or a lead makes take a transaction that also writes the audit
//! row ([`audit::record`]).

pub mod accounts;
pub mod audit;
pub mod jobs;
pub mod ledger;

/// Whether a database error is a unique-constraint violation (a name
/// already taken).
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}
