//! The database: PostgreSQL, either embedded (a private server Partita
//! runs in its data dir, [`embedded`]) or external (a URL), migrated at
//! start ([`MIGRATOR`], the files in `migrations/`), and the first start's
//! admin account ([`bootstrap`]).
//!
//! Queries elsewhere use sqlx's compile-time checked macros (`query!`);
//! their data is in `.sqlx/` (see `scripts/sqlx-prepare`).

pub mod bootstrap;
pub mod embedded;

use std::path::Path;
use std::time::Duration;

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};

pub use embedded::{EmbeddedError, EmbeddedPostgres, PgBinaries, Settings};

/// The migrations in `migrations/`, built into the binary. Forward-only.
pub static MIGRATOR: Migrator = sqlx::migrate!();

/// The table in which sqlx's migrator records applied migrations.
pub const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// The database Partita uses inside the embedded server.
pub const DATABASE_NAME: &str = "partita";

/// How long to wait for a connection before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// What can go wrong opening the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
    #[error("{what}: {source}")]
    Sql {
        what: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("migrating the database: {0}")]
    Migrate(#[from] MigrateError),
    #[error("the embedded PostgreSQL task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

fn sql_err(what: impl Into<String>) -> impl FnOnce(sqlx::Error) -> DbError {
    let what = what.into();
    move |source| DbError::Sql { what, source }
}

/// An open, migrated database: the pool, and the embedded server when
/// Partita runs one (stopped by [`Database::close`], or on drop).
#[derive(Debug)]
pub struct Database {
    pub pool: PgPool,
    embedded: Option<EmbeddedPostgres>,
    description: String,
}

impl Database {
    /// Starts (and on first use creates) the embedded PostgreSQL in
    /// `data_dir/postgres`, creates the `partita` database in it if
    /// missing, and migrates it.
    pub async fn open_embedded(data_dir: &Path, settings: Settings) -> Result<Self, DbError> {
        let pgdata = data_dir.join("postgres");
        let pg = tokio::task::spawn_blocking(move || {
            let bins = PgBinaries::find()?;
            EmbeddedPostgres::start(bins, &pgdata, &settings)
        })
        .await??;
        let description = format!(
            "embedded PostgreSQL in {}{}",
            pg.pgdata().display(),
            match pg.service_user() {
                Some(user) => format!(" (running as {})", user.name),
                None => String::new(),
            }
        );
        // From here on, dropping `pg` (on an error) stops the server.
        create_database_if_missing(pg.connect_options("postgres"), DATABASE_NAME).await?;
        let pool = connect(pg.connect_options(DATABASE_NAME)).await?;
        migrate(&pool).await?;
        Ok(Database {
            pool,
            embedded: Some(pg),
            description,
        })
    }

    /// Connects to an external PostgreSQL at `url` and migrates it.
    pub async fn open_external(url: &str) -> Result<Self, DbError> {
        let options: PgConnectOptions = url.parse().map_err(sql_err("reading --database-url"))?;
        let description = format!(
            "external PostgreSQL, database {:?} on {}",
            options.get_database().unwrap_or("(default)"),
            options
                .get_socket()
                .map(|s| s.display().to_string())
                .unwrap_or_else(|| format!("{}:{}", options.get_host(), options.get_port()))
        );
        let pool = connect(options).await?;
        migrate(&pool).await?;
        Ok(Database {
            pool,
            embedded: None,
            description,
        })
    }

    /// Where the database is, in words, for the log.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The embedded server, when Partita runs one.
    pub fn embedded(&self) -> Option<&EmbeddedPostgres> {
        self.embedded.as_ref()
    }

    /// Closes the pool, then stops the embedded server (if any) cleanly.
    pub async fn close(mut self) -> Result<(), DbError> {
        self.pool.close().await;
        if let Some(mut pg) = self.embedded.take() {
            tokio::task::spawn_blocking(move || pg.stop()).await??;
        }
        Ok(())
    }
}

/// A pool on `options`. Connections are not pinged each time they are
/// taken from the pool (sqlx's default): that doubled the round trips of
/// every query. A connection that broke meanwhile (PostgreSQL restarted)
/// fails its next query instead, and is dropped.
pub async fn connect(options: PgConnectOptions) -> Result<PgPool, DbError> {
    PgPoolOptions::new()
        .max_connections(16)
        .test_before_acquire(false)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(sql_err("connecting to PostgreSQL"))
}

/// Applies the migrations not yet applied. sqlx's migrator holds a
/// PostgreSQL advisory lock (`pg_advisory_lock`, keyed on the database's
/// name) from before it reads which migrations are applied until after
/// the last one, so two processes starting at once do not both migrate:
/// the second waits, then finds nothing to do. Each migration runs in its
/// own transaction.
pub async fn migrate(pool: &PgPool) -> Result<(), DbError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// The latest migration applied to the database and the latest this
/// binary knows, for `/readyz`.
pub async fn schema_versions(pool: &PgPool) -> Result<(Option<i64>, Option<i64>), DbError> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(sql_err("acquiring a connection"))?;
    let applied = conn.list_applied_migrations(MIGRATIONS_TABLE).await?;
    let latest_applied = applied.iter().map(|m| m.version).max();
    let latest_known = MIGRATOR.iter().map(|m| m.version).max();
    Ok((latest_applied, latest_known))
}

/// Creates database `name` through a connection to the server's
/// `postgres` database, unless it exists.
async fn create_database_if_missing(
    admin: PgConnectOptions,
    name: &'static str,
) -> Result<(), DbError> {
    let mut conn: PgConnection = admin
        .connect()
        .await
        .map_err(sql_err("connecting to the embedded PostgreSQL"))?;
    let exists = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS "exists!""#,
        name
    )
    .fetch_one(&mut conn)
    .await
    .map_err(sql_err("looking for the partita database"))?;
    if !exists {
        tracing::info!(database = name, "creating the database");
        sqlx::query("CREATE DATABASE partita")
            .execute(&mut conn)
            .await
            .map_err(sql_err("creating the partita database"))?;
    }
    conn.close().await.map_err(sql_err("closing"))?;
    Ok(())
}
