//! Who a token belongs to, and what a team allows, kept in memory so that
//! a request does not read them from PostgreSQL each time (the API's hot
//! path, a submission, would otherwise spend a round trip on them).
//!
//! Never stale for longer than a notice takes to arrive: every change to
//! `api_tokens`, `users`, `teams`, `projects` or `business_units`, by the
//! API or by a person at psql, sends a PostgreSQL notice on
//! [`CHANNEL`] when it commits (`migrations/0007_account_notices.sql`);
//! every server process listens and forgets everything it holds when one
//! arrives. The API's own changes are also forgotten in this process as
//! soon as they commit ([`AccountsCache::forget`]), so a token revoked
//! here is refused from the next request on. While the listening
//! connection is down, nothing is cached (every request reads the
//! database), since notices sent meanwhile are lost. Entries also age out
//! after [`MAX_AGE`], should a notice ever go astray.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::store::accounts::{TeamProjects, TokenOwner};

/// The PostgreSQL notification channel of account changes.
pub const CHANNEL: &str = "partita_accounts";

/// The longest an entry is trusted.
pub const MAX_AGE: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct AccountsCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Whether notices are heard: nothing is cached otherwise.
    listening: bool,
    /// Counts the times everything was forgotten; a value read from the
    /// database is kept only if none happened since the read began.
    generation: u64,
    tokens: HashMap<Vec<u8>, (Instant, TokenOwner)>,
    teams: HashMap<String, (Instant, TeamProjects)>,
}

/// Taken before reading the database; lets [`AccountsCache::keep_token`]
/// and [`AccountsCache::keep_team`] drop what an intervening change made
/// stale.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(Option<u64>);

impl AccountsCache {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain maps behind: still
        // usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn token(&self, hash: &[u8]) -> Option<TokenOwner> {
        let inner = self.lock();
        let (at, owner) = inner.tokens.get(hash)?;
        (inner.listening && at.elapsed() < MAX_AGE).then(|| owner.clone())
    }

    pub fn team(&self, name: &str) -> Option<TeamProjects> {
        let inner = self.lock();
        let (at, team) = inner.teams.get(name)?;
        (inner.listening && at.elapsed() < MAX_AGE).then(|| team.clone())
    }

    pub fn ticket(&self) -> Ticket {
        let inner = self.lock();
        Ticket(inner.listening.then_some(inner.generation))
    }

    pub fn keep_token(&self, ticket: Ticket, hash: &[u8], owner: &TokenOwner) {
        let mut inner = self.lock();
        if ticket.0 == Some(inner.generation) && inner.listening {
            inner
                .tokens
                .insert(hash.to_vec(), (Instant::now(), owner.clone()));
        }
    }

    pub fn keep_team(&self, ticket: Ticket, team: &TeamProjects) {
        let mut inner = self.lock();
        if ticket.0 == Some(inner.generation) && inner.listening {
            inner
                .teams
                .insert(team.team.name.clone(), (Instant::now(), team.clone()));
        }
    }

    /// Forgets everything: an account changed.
    pub fn forget(&self) {
        let mut inner = self.lock();
        inner.generation += 1;
        inner.tokens.clear();
        inner.teams.clear();
    }

    fn set_listening(&self, listening: bool) {
        self.forget();
        self.lock().listening = listening;
    }

    /// Listens for account notices on a connection of its own, forgetting
    /// everything at each, until the pool closes; reconnects when the
    /// connection drops (caching nothing meanwhile).
    pub fn spawn_listener(self: &Arc<Self>, pool: PgPool) {
        let cache = Arc::clone(self);
        tokio::spawn(async move {
            while !pool.is_closed() {
                if let Err(err) = cache.listen(&pool).await {
                    tracing::debug!(%err, "account notices: not listening; retrying in 1 s");
                }
                cache.set_listening(false);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }

    async fn listen(&self, pool: &PgPool) -> sqlx::Result<()> {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(CHANNEL).await?;
        self.set_listening(true);
        // `None`: the connection was lost (and notices with it).
        while listener.try_recv().await?.is_some() {
            self.forget();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::auth::Principal;

    fn owner(name: &str) -> TokenOwner {
        TokenOwner {
            principal: Principal {
                user_id: 1,
                user: name.into(),
                role: "lead".into(),
                team: "a".into(),
                team_id: Some(1),
                token_id: 1,
            },
            revoked: false,
            expires_at: None,
            disabled: false,
        }
    }

    #[test]
    fn keeps_nothing_unless_listening() {
        let c = AccountsCache::default();
        c.keep_token(c.ticket(), b"h", &owner("u"));
        assert!(c.token(b"h").is_none());
        c.set_listening(true);
        c.keep_token(c.ticket(), b"h", &owner("u"));
        assert_eq!(c.token(b"h").unwrap().principal.user, "u");
        c.set_listening(false);
        assert!(c.token(b"h").is_none());
    }

    #[test]
    fn a_read_that_began_before_a_change_is_not_kept() {
        let c = AccountsCache::default();
        c.set_listening(true);
        let ticket = c.ticket();
        c.forget(); // a change committed while the read ran
        c.keep_token(ticket, b"h", &owner("stale"));
        assert!(c.token(b"h").is_none());
        c.keep_token(c.ticket(), b"h", &owner("fresh"));
        c.forget();
        assert!(c.token(b"h").is_none(), "forget drops what was kept");
    }
}
