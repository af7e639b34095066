//! The first start: an `admin` user and an API token for it, written to
//! `DATA_DIR/admin.token` (mode 0600) once. Only the token's SHA-256 is
//! stored in the database.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rand::distr::{Alphanumeric, SampleString};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

/// The name of the admin user the first start creates.
pub const ADMIN_USER: &str = "admin";
/// The file, in the data dir, that holds the first admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// What [`ensure_admin`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// A new database: the admin user was created and its token written here.
    Created(PathBuf),
    /// The admin user already existed: nothing was written.
    Existing,
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("creating the admin user: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A new API token: `pt_` and 43 random letters and digits (about 256
/// bits), as the Go build's tokens start with `pt_`.
pub fn new_token() -> String {
    format!("pt_{}", Alphanumeric.sample_string(&mut rand::rng(), 43))
}

/// The SHA-256 of a token: what the database keeps and looks tokens up by.
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// On a database without the admin user, creates it with a token, writes
/// the token to `data_dir/admin.token` (mode 0600), and records both in
/// the audit log, all in one transaction committed after the file is
/// written: a failed write leaves no admin without a token file. Two
/// servers starting at once on one database create one admin (the user's
/// unique name decides; the other finds it [`Bootstrap::Existing`]).
pub async fn ensure_admin(pool: &PgPool, data_dir: &Path) -> Result<Bootstrap, BootstrapError> {
    let mut tx = pool.begin().await?;
    let created = sqlx::query_scalar!(
        "INSERT INTO users (name, role) VALUES ($1, 'admin')
         ON CONFLICT (name) DO NOTHING RETURNING id",
        ADMIN_USER
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(user_id) = created else {
        return Ok(Bootstrap::Existing);
    };
    let token = new_token();
    sqlx::query!(
        "INSERT INTO api_tokens (user_id, token_sha256, description) VALUES ($1, $2, $3)",
        user_id,
        token_hash(&token),
        "the first start's admin token (admin.token)"
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        "INSERT INTO audit_log (actor, action, target_kind, target, after)
         VALUES ('partita', 'user.create', 'user', $1, $2)",
        ADMIN_USER,
        serde_json::json!({"name": ADMIN_USER, "role": "admin", "token": "admin.token"})
    )
    .execute(&mut *tx)
    .await?;
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    write_secret(&path, &token).map_err(|source| BootstrapError::Io {
        path: path.clone(),
        source,
    })?;
    tx.commit().await?;
    Ok(Bootstrap::Created(path))
}

/// Writes `secret` and a newline to `path`, readable by its owner only.
/// A file left by an earlier database is replaced: its token is void.
fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // `mode` applies only to a new file.
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    writeln!(file, "{secret}")?;
    file.sync_all()
}
