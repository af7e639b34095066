//! Teams, business units, projects, users and API tokens.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool};

use crate::server::auth::Principal;

/// A token's owner and whether the token may be used.
#[derive(Debug, Clone)]
pub struct TokenOwner {
    pub principal: Principal,
    pub revoked: bool,
    pub expires_at: Option<DateTime<Utc>>,
    pub disabled: bool,
}

impl TokenOwner {
    /// Whether the token has expired (told at each use: the owner may be
    /// kept in memory for a while).
    pub fn expired(&self) -> bool {
        self.expires_at.is_some_and(|at| at <= Utc::now())
    }
}

/// The owner of the token whose SHA-256 is `hash`, if any.
pub async fn token_owner(pool: &PgPool, hash: &[u8]) -> sqlx::Result<Option<TokenOwner>> {
    let row = sqlx::query!(
        r#"SELECT k.id AS token_id, u.id AS user_id, u.name AS user_name, u.role, u.disabled,
                  t.id AS "team_id?", t.name AS "team_name?",
                  k.revoked_at IS NOT NULL AS "revoked!", k.expires_at
           FROM api_tokens k
           JOIN users u ON u.id = k.user_id
           LEFT JOIN teams t ON t.id = u.team_id
           WHERE k.token_sha256 = $1"#,
        hash
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| TokenOwner {
        principal: Principal {
            user_id: r.user_id,
            user: r.user_name,
            role: r.role,
            team: r.team_name.unwrap_or_default(),
            team_id: r.team_id,
            token_id: r.token_id,
        },
        revoked: r.revoked,
        expires_at: r.expires_at,
        disabled: r.disabled,
    }))
}

/// What a submission needs to know, read in one round trip (submissions
/// are the API's hot path): the token's owner, and the team the job is
/// for (`team`, or the owner's own when empty) with its projects' ids.
#[derive(Debug)]
pub struct SubmissionContext {
    pub owner: TokenOwner,
    pub team: Option<TeamProjects>,
}

/// Reads a [`SubmissionContext`]; None when no token has this hash.
pub async fn submission_context(
    pool: &PgPool,
    hash: &[u8],
    team: &str,
) -> sqlx::Result<Option<SubmissionContext>> {
    let row = sqlx::query!(
        r#"SELECT k.id AS token_id, u.id AS user_id, u.name AS user_name, u.role, u.disabled,
                  ut.id AS "own_team_id?", ut.name AS "own_team_name?",
                  k.revoked_at IS NOT NULL AS "revoked!", k.expires_at,
                  t.id AS "team_id?", t.name AS "team_name?", t.guarantee_milli AS "guarantee_milli?",
                  t.burst_milli AS "burst_milli?", t.weight AS "weight?", t.classes AS "classes?",
                  b.name AS "business_unit?",
                  ARRAY(SELECT p.name FROM projects p WHERE p.team_id = t.id ORDER BY p.name) AS "projects!",
                  ARRAY(SELECT p.id FROM projects p WHERE p.team_id = t.id ORDER BY p.name) AS "project_ids!"
           FROM api_tokens k
           JOIN users u ON u.id = k.user_id
           LEFT JOIN teams ut ON ut.id = u.team_id
           LEFT JOIN teams t ON t.name = COALESCE(NULLIF($2, ''), ut.name)
           LEFT JOIN business_units b ON b.id = t.business_unit_id
           WHERE k.token_sha256 = $1"#,
        hash,
        team
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| {
        let team = match (r.team_id, r.team_name) {
            (Some(id), Some(name)) => Some(TeamProjects {
                project_ids: r.projects.iter().cloned().zip(r.project_ids).collect(),
                team: TeamRow {
                    id,
                    name,
                    guarantee_milli: r.guarantee_milli.unwrap_or(0),
                    burst_milli: r.burst_milli.unwrap_or(0),
                    weight: r.weight.unwrap_or(0.0),
                    classes: r.classes.unwrap_or_default(),
                    business_unit: r.business_unit,
                    projects: r.projects,
                },
            }),
            _ => None,
        };
        SubmissionContext {
            owner: TokenOwner {
                principal: Principal {
                    user_id: r.user_id,
                    user: r.user_name,
                    role: r.role,
                    team: r.own_team_name.unwrap_or_default(),
                    team_id: r.own_team_id,
                    token_id: r.token_id,
                },
                revoked: r.revoked,
                expires_at: r.expires_at,
                disabled: r.disabled,
            },
            team,
        }
    }))
}

/// A team as a submission needs it: the row and its projects' ids.
#[derive(Debug, Clone)]
pub struct TeamProjects {
    pub team: TeamRow,
    /// (name, id) of each project.
    pub project_ids: Vec<(String, i64)>,
}

impl TeamProjects {
    pub fn project_id(&self, name: &str) -> Option<i64> {
        self.project_ids
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, id)| id)
    }
}

/// A team as stored, with its business unit's name and its projects.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamRow {
    pub id: i64,
    pub name: String,
    pub guarantee_milli: i64,
    pub burst_milli: i64,
    pub weight: f64,
    pub classes: Vec<String>,
    pub business_unit: Option<String>,
    pub projects: Vec<String>,
}

/// Every team by name, or the one named `only`.
pub async fn teams(db: impl PgExecutor<'_>, only: Option<&str>) -> sqlx::Result<Vec<TeamRow>> {
    sqlx::query_as!(
        TeamRow,
        r#"SELECT t.id, t.name, t.guarantee_milli, t.burst_milli, t.weight, t.classes,
                  b.name AS "business_unit?",
                  ARRAY(SELECT p.name FROM projects p WHERE p.team_id = t.id ORDER BY p.name) AS "projects!"
           FROM teams t
           LEFT JOIN business_units b ON b.id = t.business_unit_id
           WHERE ($1::text IS NULL OR t.name = $1)
           ORDER BY t.name"#,
        only
    )
    .fetch_all(db)
    .await
}

pub async fn team(db: impl PgExecutor<'_>, name: &str) -> sqlx::Result<Option<TeamRow>> {
    Ok(teams(db, Some(name)).await?.into_iter().next())
}

/// The sum of every team's guarantee but `except`'s, in GPU milli.
pub async fn other_guarantees(db: impl PgExecutor<'_>, except: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT COALESCE(SUM(guarantee_milli), 0)::bigint AS "sum!" FROM teams WHERE name <> $1"#,
        except
    )
    .fetch_one(db)
    .await
}

/// The id of the business unit named `name`, created when new.
pub async fn business_unit(db: impl PgExecutor<'_>, name: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        "INSERT INTO business_units (name) VALUES ($1)
         ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
         RETURNING id",
        name
    )
    .fetch_one(db)
    .await
}

/// The fields of a team that a request sets.
#[derive(Debug, Clone)]
pub struct TeamFields {
    pub guarantee_milli: i64,
    pub burst_milli: i64,
    pub weight: f64,
    pub classes: Vec<String>,
    pub business_unit_id: Option<i64>,
}

/// A new team; None when the name is taken.
pub async fn insert_team(
    db: impl PgExecutor<'_>,
    name: &str,
    f: &TeamFields,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "INSERT INTO teams (name, guarantee_milli, burst_milli, weight, classes, business_unit_id)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (name) DO NOTHING
         RETURNING id",
        name,
        f.guarantee_milli,
        f.burst_milli,
        f.weight,
        &f.classes,
        f.business_unit_id
    )
    .fetch_optional(db)
    .await
}

pub async fn update_team(db: impl PgExecutor<'_>, id: i64, f: &TeamFields) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE teams SET guarantee_milli = $2, burst_milli = $3, weight = $4, classes = $5,
                business_unit_id = $6
         WHERE id = $1",
        id,
        f.guarantee_milli,
        f.burst_milli,
        f.weight,
        &f.classes,
        f.business_unit_id
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A team's id and its business unit's, by name (for a PATCH that keeps it).
pub async fn team_business_unit(
    db: impl PgExecutor<'_>,
    team_id: i64,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!("SELECT business_unit_id FROM teams WHERE id = $1", team_id)
        .fetch_one(db)
        .await
}

#[derive(Debug, Clone)]
pub struct ProjectRow {
    pub team: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

pub async fn projects(db: impl PgExecutor<'_>, team_id: i64) -> sqlx::Result<Vec<ProjectRow>> {
    sqlx::query_as!(
        ProjectRow,
        "SELECT t.name AS team, p.name, p.created_at
         FROM projects p JOIN teams t ON t.id = p.team_id
         WHERE p.team_id = $1 ORDER BY p.name",
        team_id
    )
    .fetch_all(db)
    .await
}

/// A new project; None when the team has one of that name.
pub async fn insert_project(
    db: impl PgExecutor<'_>,
    team_id: i64,
    name: &str,
) -> sqlx::Result<Option<DateTime<Utc>>> {
    sqlx::query_scalar!(
        "INSERT INTO projects (team_id, name) VALUES ($1, $2)
         ON CONFLICT (team_id, name) DO NOTHING RETURNING created_at",
        team_id,
        name
    )
    .fetch_optional(db)
    .await
}

#[derive(Debug, Clone, PartialEq)]
pub struct UserRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub team: Option<String>,
    pub disabled: bool,
    pub created_at: DateTime<Utc>,
}

/// Every user by name, or the one named `only`.
pub async fn users(db: impl PgExecutor<'_>, only: Option<&str>) -> sqlx::Result<Vec<UserRow>> {
    sqlx::query_as!(
        UserRow,
        r#"SELECT u.id, u.name, u.role, t.name AS "team?", u.disabled, u.created_at
           FROM users u LEFT JOIN teams t ON t.id = u.team_id
           WHERE ($1::text IS NULL OR u.name = $1)
           ORDER BY u.name"#,
        only
    )
    .fetch_all(db)
    .await
}

pub async fn user(db: impl PgExecutor<'_>, name: &str) -> sqlx::Result<Option<UserRow>> {
    Ok(users(db, Some(name)).await?.into_iter().next())
}

/// A new user; None when the name is taken.
pub async fn insert_user(
    db: impl PgExecutor<'_>,
    name: &str,
    role: &str,
    team_id: Option<i64>,
) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!(
        "INSERT INTO users (name, role, team_id) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO NOTHING RETURNING id",
        name,
        role,
        team_id
    )
    .fetch_optional(db)
    .await
}

pub async fn update_user(
    db: impl PgExecutor<'_>,
    id: i64,
    role: &str,
    team_id: Option<i64>,
    disabled: bool,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE users SET role = $2, team_id = $3, disabled = $4, updated_at = now() WHERE id = $1",
        id,
        role,
        team_id,
        disabled
    )
    .execute(db)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenRow {
    pub id: i64,
    pub user: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Every token (without secrets: only hashes are stored), or the one
/// with id `only`.
pub async fn tokens(db: impl PgExecutor<'_>, only: Option<i64>) -> sqlx::Result<Vec<TokenRow>> {
    sqlx::query_as!(
        TokenRow,
        "SELECT k.id, u.name AS user, k.description, k.created_at, k.expires_at, k.revoked_at
         FROM api_tokens k JOIN users u ON u.id = k.user_id
         WHERE ($1::bigint IS NULL OR k.id = $1)
         ORDER BY k.id",
        only
    )
    .fetch_all(db)
    .await
}

/// Stores a token's hash; its id.
pub async fn insert_token(
    db: impl PgExecutor<'_>,
    user_id: i64,
    hash: &[u8],
    description: &str,
    expires_at: Option<DateTime<Utc>>,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        "INSERT INTO api_tokens (user_id, token_sha256, description, expires_at)
         VALUES ($1, $2, $3, $4) RETURNING id",
        user_id,
        hash,
        description,
        expires_at
    )
    .fetch_one(db)
    .await
}

/// Revokes a token (once: a second revoke keeps the first time).
pub async fn revoke_token(db: impl PgExecutor<'_>, id: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1",
        id
    )
    .execute(db)
    .await?;
    Ok(())
}
