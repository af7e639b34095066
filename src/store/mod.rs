//! What the API reads and writes in PostgreSQL: accounts (teams,
//! projects, users, tokens), jobs and their events, and the audit log.
//! Every query is compile-time checked (`sqlx::query!`); changes that an
//! admin or a lead makes take a transaction that also writes the audit
//! row ([`audit::record`]).

pub mod accounts;
pub mod audit;
pub mod group_commit;
pub mod jobs;
pub mod ledger;
pub mod views;

/// Whether a database error is a unique-constraint violation (a name
/// already taken).
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// What a database holds at start, for the server's first log line about
/// it: jobs by state (in the order of their life) and ledger rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    pub jobs_by_state: Vec<(String, i64)>,
    pub ledger_rows: i64,
}

impl Found {
    pub fn jobs(&self) -> i64 {
        self.jobs_by_state.iter().map(|(_, n)| n).sum()
    }
}

impl std::fmt::Display for Found {
    /// `12 jobs (3 queued, 2 running, 7 succeeded), 9 ledger rows`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} jobs", self.jobs())?;
        if !self.jobs_by_state.is_empty() {
            let states: Vec<String> = self
                .jobs_by_state
                .iter()
                .map(|(s, n)| format!("{n} {s}"))
                .collect();
            write!(f, " ({})", states.join(", "))?;
        }
        write!(f, ", {} ledger rows", self.ledger_rows)
    }
}

/// Counts what [`Found`] says.
pub async fn found(pool: &sqlx::PgPool) -> sqlx::Result<Found> {
    let jobs_by_state = sqlx::query!(
        r#"SELECT state AS "state!", count(*) AS "n!" FROM jobs GROUP BY state
           ORDER BY array_position(ARRAY['queued', 'admitted', 'running', 'preempted',
                                         'succeeded', 'failed', 'cancelled'], state)"#
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.state, r.n))
    .collect();
    let ledger_rows = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM usage_ledger"#)
        .fetch_one(pool)
        .await?;
    Ok(Found {
        jobs_by_state,
        ledger_rows,
    })
}
