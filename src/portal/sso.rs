//! Single sign-on with OpenID Connect: the authorization code flow with
//! PKCE (S256), state and nonce, through the `openidconnect` crate.
//!
//! - `GET /auth/login?next=&login_hint=` starts a sign-in: a random
//!   secret goes to the browser in a short-lived HttpOnly cookie
//!   ([`COOKIE`]), and a row of `sso_logins` keyed by its SHA-256 keeps
//!   the request's state, nonce and PKCE verifier; then the browser is
//!   sent to the provider.
//! - `GET /auth/callback` takes that row back (once, within
//!   [`LOGIN_MINUTES`], only in the browser holding the cookie), checks the
//!   state, exchanges the code with the verifier, verifies the ID token
//!   (signature, issuer, audience, expiry, nonce, and the access token's
//!   hash when given), maps the configured claim to a team and role
//!   ([`map_values`]), creates or updates the user, and starts a session
//!   (`session::start(.., "sso", ..)`).
//! - Signing out (`POST /signout`) of a session that came from SSO ends it
//!   and then sends the browser to the provider's `end_session_endpoint`
//!   ([`signout_redirect`]).
//!
//! The provider is discovered once at start ([`Sso::discover`]); if it
//! was down then, the first sign-in tries again. A failed ID token check
//! forgets what was discovered, so rotated keys are fetched again.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use chrono::Utc;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreIdToken, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AccessTokenHash, AdditionalClaims, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    EmptyExtraTokenFields, EndSessionUrl, EndpointMaybeSet, EndpointNotSet, EndpointSet,
    IdTokenClaims, IdTokenFields, IssuerUrl, LoginHint, LogoutRequest, Nonce, OAuth2TokenResponse,
    PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl, ProviderMetadataWithLogout,
    RedirectUrl, Scope, StandardErrorResponse, StandardTokenResponse, TokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::RwLock;

use super::render::PageError;
use super::session::{self, constant_time_eq, random_secret, safe_next};
use crate::api::{ROLE_ADMIN, ROLE_FINANCE, ROLES};
use crate::db::bootstrap::token_hash;
use crate::server::AppState;
use crate::store::audit::{self, Actor, Change};

/// The cookie of a sign-in on its way through the provider.
pub const COOKIE: &str = "partita_sso";
/// How long a sign-in may take at the provider.
pub const LOGIN_MINUTES: i64 = 10;

/// A secret from the command line or the environment: never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

/// How single sign-on is set up (`partita serve --oidc-*`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The provider's issuer URL, exactly as its discovery document says.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// Where the provider sends the browser back: `<public url>/auth/callback`.
    pub redirect_url: String,
    /// Where the provider sends the browser after signing out: `<public url>/`.
    pub post_logout_redirect_url: String,
    /// The claim whose values map to team and role (`groups`).
    pub claim: String,
    /// The scopes asked for (`openid` always).
    pub scopes: Vec<String>,
}

/// The extra claims of an ID token: all of them, by name (the mapped
/// claim's name is configured).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Extra {
    #[serde(flatten)]
    pub claims: serde_json::Map<String, Value>,
}
impl AdditionalClaims for Extra {}

type IdFields = IdTokenFields<
    Extra,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type Tokens = StandardTokenResponse<IdFields, CoreTokenType>;

/// The client as discovery makes it: authorization endpoint set, token
/// and userinfo endpoints maybe.
type OidcClient = openidconnect::Client<
    Extra,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    Tokens,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// What discovery found.
struct Discovered {
    client: OidcClient,
    end_session: Option<EndSessionUrl>,
}

/// Single sign-on: its settings, an HTTP client that follows no
/// redirects, and the provider as discovered.
pub struct Sso {
    pub settings: Settings,
    http: openidconnect::reqwest::Client,
    discovered: RwLock<Option<Arc<Discovered>>>,
}

impl fmt::Debug for Sso {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sso")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Sso {
    /// Checks the settings' URLs; discovers nothing yet.
    pub fn new(settings: Settings) -> anyhow::Result<Sso> {
        IssuerUrl::new(settings.issuer.clone())
            .map_err(|e| anyhow::anyhow!("--oidc-issuer {:?}: {e}", settings.issuer))?;
        RedirectUrl::new(settings.redirect_url.clone())
            .map_err(|e| anyhow::anyhow!("--oidc-redirect-url {:?}: {e}", settings.redirect_url))?;
        PostLogoutRedirectUrl::new(settings.post_logout_redirect_url.clone()).map_err(|e| {
            anyhow::anyhow!(
                "the post-logout URL {:?}: {e}",
                settings.post_logout_redirect_url
            )
        })?;
        anyhow::ensure!(!settings.client_id.is_empty(), "--oidc-client-id is empty");
        anyhow::ensure!(!settings.claim.is_empty(), "--oidc-claim is empty");
        let http = openidconnect::reqwest::ClientBuilder::new()
            // Following redirects would open the server to SSRF.
            .redirect(openidconnect::reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| anyhow::anyhow!("the OpenID Connect HTTP client: {e}"))?;
        Ok(Sso {
            settings,
            http,
            discovered: RwLock::new(None),
        })
    }

    /// The provider's metadata and keys: fetched once, or again after a
    /// failure. The error is a sentence for the log.
    async fn provider(&self) -> Result<Arc<Discovered>, String> {
        if let Some(d) = self.discovered.read().await.as_ref() {
            return Ok(d.clone());
        }
        let mut slot = self.discovered.write().await;
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let s = &self.settings;
        let issuer = IssuerUrl::new(s.issuer.clone()).map_err(|e| e.to_string())?;
        let meta = ProviderMetadataWithLogout::discover_async(issuer, &self.http)
            .await
            .map_err(|e| {
                format!(
                    "discovering the OpenID provider {}: {}",
                    s.issuer,
                    chain(&e)
                )
            })?;
        let end_session = meta.additional_metadata().end_session_endpoint.clone();
        let client = OidcClient::from_provider_metadata(
            meta,
            ClientId::new(s.client_id.clone()),
            Some(ClientSecret::new(s.client_secret.0.clone())),
        )
        .set_redirect_uri(RedirectUrl::new(s.redirect_url.clone()).map_err(|e| e.to_string())?);
        let d = Arc::new(Discovered {
            client,
            end_session,
        });
        *slot = Some(d.clone());
        Ok(d)
    }

    /// Discovers the provider now (at start); says why not otherwise.
    pub async fn discover(&self) -> Result<(), String> {
        self.provider().await.map(|_| ())
    }

    /// Whether the provider has been discovered.
    pub async fn discovered(&self) -> bool {
        self.discovered.read().await.is_some()
    }

    async fn forget(&self) {
        *self.discovered.write().await = None;
    }
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn sso_of(state: &AppState) -> Result<&Arc<Sso>, PageError> {
    state.portal.sso.as_ref().ok_or_else(|| {
        PageError::not_found(
            "Single sign-on is not set up on this server. Sign in with an API token instead.",
        )
    })
}

fn internal(e: sqlx::Error) -> PageError {
    tracing::error!(error = %e, "portal: single sign-on");
    PageError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: "The server could not read its database; see its log.".into(),
    }
}

fn unreachable_provider(sso: &Sso, why: &str) -> PageError {
    tracing::warn!(error = %why, "single sign-on: the provider cannot be reached");
    PageError {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: format!(
            "The single sign-on provider ({}) cannot be reached just now. Try again in a minute, \
             or sign in with an API token.",
            sso.settings.issuer
        ),
    }
}

// ---- GET /auth/login ----

#[derive(Deserialize, Default)]
pub struct LoginQuery {
    #[serde(default)]
    next: String,
    #[serde(default)]
    login_hint: String,
}

/// GET /auth/login: to the provider, with state, nonce and a PKCE
/// challenge; their secrets stay here.
pub async fn login(
    State(state): State<AppState>,
    jar: CookieJar,
    Query(q): Query<LoginQuery>,
) -> Result<Response, PageError> {
    let sso = sso_of(&state)?;
    let provider = sso
        .provider()
        .await
        .map_err(|why| unreachable_provider(sso, &why))?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = provider
        .client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .set_pkce_challenge(challenge);
    for scope in sso.settings.scopes.iter().filter(|s| *s != "openid") {
        request = request.add_scope(Scope::new(scope.clone()));
    }
    let hint = q.login_hint.trim();
    if !hint.is_empty() {
        request = request.set_login_hint(LoginHint::new(hint.to_string()));
    }
    let (url, csrf, nonce) = request.url();

    let browser = random_secret();
    let next = safe_next(&q.next);
    let expires = Utc::now() + chrono::Duration::minutes(LOGIN_MINUTES);
    let mut tx = state.pool.begin().await.map_err(internal)?;
    sqlx::query!("DELETE FROM sso_logins WHERE expires_at < now()")
        .execute(&mut *tx)
        .await
        .map_err(internal)?;
    sqlx::query!(
        "INSERT INTO sso_logins (browser_sha256, state, nonce, pkce_verifier, next, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &token_hash(&browser),
        csrf.secret(),
        nonce.secret(),
        verifier.secret(),
        next,
        expires,
    )
    .execute(&mut *tx)
    .await
    .map_err(internal)?;
    tx.commit().await.map_err(internal)?;

    let cookie = Cookie::build((COOKIE, browser))
        .path("/auth")
        .http_only(true)
        .secure(state.portal.secure_cookies)
        // Lax: the provider's redirect back is a top-level GET from
        // another site, which Strict would send without the cookie.
        .same_site(SameSite::Lax)
        .max_age(cookie::time::Duration::minutes(LOGIN_MINUTES))
        .build();
    Ok((jar.add(cookie), Redirect::to(url.as_str())).into_response())
}

// ---- GET /auth/callback ----

#[derive(Deserialize, Default)]
pub struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

fn refused(status: StatusCode, message: impl Into<String>) -> PageError {
    PageError {
        status,
        message: message.into(),
    }
}

const START_AGAIN: &str = "Start again from the sign-in page.";

/// GET /auth/callback: the provider sends the browser back here with a
/// code; this checks everything and signs the user in.
pub async fn callback(
    State(state): State<AppState>,
    jar: CookieJar,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    // Whatever happens, the sign-in's cookie is spent.
    let spent = jar.clone().remove(Cookie::build(COOKIE).path("/auth"));
    match finish(&state, &jar, &headers, q).await {
        Ok((cookie, next)) => (spent.add(cookie), Redirect::to(&next)).into_response(),
        Err(e) => (spent, e).into_response(),
    }
}

async fn finish(
    state: &AppState,
    jar: &CookieJar,
    headers: &HeaderMap,
    q: CallbackQuery,
) -> Result<(Cookie<'static>, String), PageError> {
    let sso = sso_of(state)?;
    let Some(browser) = jar.get(COOKIE).map(|c| c.value().to_string()) else {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            format!(
                "This sign-in did not start in this browser, or it took longer than {LOGIN_MINUTES} minutes. {START_AGAIN}"
            ),
        ));
    };
    // Taken once: a second callback with the same cookie finds nothing.
    let pending = sqlx::query!(
        "DELETE FROM sso_logins WHERE browser_sha256 = $1 RETURNING state, nonce, pkce_verifier, next,
                expires_at > now() AS \"live!\"",
        &token_hash(&browser),
    )
    .fetch_optional(&state.pool)
    .await
    .map_err(internal)?;
    let Some(pending) = pending.filter(|p| p.live) else {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            format!(
                "This sign-in has expired or was already used (a sign-in must finish within {LOGIN_MINUTES} minutes). {START_AGAIN}"
            ),
        ));
    };
    if !q.error.is_empty() {
        let detail = if q.error_description.is_empty() {
            q.error.clone()
        } else {
            format!("{}: {}", q.error, q.error_description)
        };
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            format!("The single sign-on provider did not sign you in ({detail}). {START_AGAIN}"),
        ));
    }
    if q.state.is_empty() || !constant_time_eq(q.state.as_bytes(), pending.state.as_bytes()) {
        tracing::warn!("single sign-on: a callback with a state that is not the sign-in's");
        return Err(refused(
            StatusCode::BAD_REQUEST,
            format!(
                "This sign-in was refused: the answer from the provider does not belong to the sign-in this browser started. {START_AGAIN}"
            ),
        ));
    }
    if q.code.is_empty() {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            format!("The provider sent no authorization code. {START_AGAIN}"),
        ));
    }
    let provider = sso
        .provider()
        .await
        .map_err(|why| unreachable_provider(sso, &why))?;
    let tokens = provider
        .client
        .exchange_code(AuthorizationCode::new(q.code.clone()))
        .map_err(|e| {
            tracing::error!(error = %e, "single sign-on: the provider has no token endpoint");
            refused(
                StatusCode::BAD_GATEWAY,
                "The single sign-on provider has no token endpoint; see the server's log.",
            )
        })?
        .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
        .request_async(&sso.http)
        .await
        .map_err(|e| {
            tracing::warn!(error = %chain(&e), "single sign-on: the code exchange failed");
            refused(
                StatusCode::BAD_GATEWAY,
                format!(
                    "The single sign-on provider did not accept this sign-in's code. {START_AGAIN}"
                ),
            )
        })?;
    let Some(id_token) = tokens.id_token() else {
        return Err(refused(
            StatusCode::BAD_GATEWAY,
            "The single sign-on provider sent no ID token; see the server's log.",
        ));
    };
    let verifier = provider.client.id_token_verifier();
    let nonce = Nonce::new(pending.nonce.clone());
    let claims = match id_token.claims(&verifier, &nonce) {
        Ok(c) => c.clone(),
        Err(e) => {
            tracing::warn!(error = %chain(&e), "single sign-on: an ID token was refused");
            // Perhaps the provider rotated its keys: discover again next time.
            sso.forget().await;
            return Err(refused(
                StatusCode::UNAUTHORIZED,
                format!("The ID token from the provider could not be verified. {START_AGAIN}"),
            ));
        }
    };
    if let Some(expected) = claims.access_token_hash() {
        let actual = id_token
            .signing_alg()
            .ok()
            .and_then(|alg| {
                let key = id_token.signing_key(&verifier).ok()?;
                AccessTokenHash::from_token(tokens.access_token(), alg, key).ok()
            })
            .ok_or_else(|| {
                refused(
                    StatusCode::UNAUTHORIZED,
                    "The ID token's access token hash could not be checked.",
                )
            })?;
        if actual != *expected {
            return Err(refused(
                StatusCode::UNAUTHORIZED,
                format!("The ID token does not belong to its access token. {START_AGAIN}"),
            ));
        }
    }

    let user_id = provision(state, &sso.settings.claim, &claims).await?;
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let cookie = session::start(state, user_id, "sso", agent).await?;
    sqlx::query!(
        "UPDATE sessions SET sso_id_token = $1 WHERE session_sha256 = $2",
        id_token.to_string(),
        &token_hash(cookie.value()),
    )
    .execute(&state.pool)
    .await
    .map_err(internal)?;
    Ok((cookie, safe_next(&pending.next)))
}

// ---- The claim mapping ----

/// A rule: a value of the claim and the team and/or role it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub claim_value: String,
    pub team: Option<String>,
    pub role: Option<String>,
}

/// What a user's claim values map to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapping {
    pub team: Option<String>,
    pub role: Option<String>,
}

/// Maps a user's claim values: with rules, in their order, the first
/// matching rule with a team gives the team and the first with a role
/// the role; without rules, `team:<name>` and `role:<role>` values are
/// read directly (the first of each).
pub fn map_values(rules: &[Rule], values: &[String]) -> Mapping {
    let mut m = Mapping::default();
    if rules.is_empty() {
        for v in values {
            if let Some(team) = v.strip_prefix("team:").filter(|t| !t.is_empty()) {
                m.team.get_or_insert_with(|| team.to_string());
            } else if let Some(role) = v.strip_prefix("role:").filter(|r| ROLES.contains(r)) {
                m.role.get_or_insert_with(|| role.to_string());
            }
        }
        return m;
    }
    for rule in rules {
        if !values.contains(&rule.claim_value) {
            continue;
        }
        if m.team.is_none() {
            m.team = rule.team.clone();
        }
        if m.role.is_none() {
            m.role = rule.role.clone();
        }
    }
    m
}

/// The values of a claim: a list of strings, or one string.
pub fn claim_values(extra: &Extra, claim: &str) -> Vec<String> {
    match extra.claims.get(claim) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// The rules, in order.
pub async fn rules(db: impl sqlx::PgExecutor<'_>) -> sqlx::Result<Vec<Rule>> {
    sqlx::query_as!(
        Rule,
        r#"SELECT r.claim_value, t.name AS "team?", r.role
           FROM sso_claim_rules r LEFT JOIN teams t ON t.id = r.team_id
           ORDER BY r.position, r.id"#
    )
    .fetch_all(db)
    .await
}

/// A user name from the claims: `preferred_username`, else the email's
/// local part, else `sub`, made of lower-case letters, digits and '-' as
/// user names must be.
pub fn base_name(preferred: Option<&str>, email: Option<&str>, sub: &str) -> String {
    let raw = preferred
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            email
                .and_then(|e| e.split('@').next())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or(sub);
    let mut out = String::new();
    for c in raw.trim().chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    let mut out = out.trim_end_matches('-').to_string();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out = format!("u-{out}").trim_end_matches('-').to_string();
    }
    out.truncate(34);
    out.trim_end_matches('-').to_string()
}

/// Why a user may not sign in, in words.
fn refusal(message: String) -> PageError {
    PageError::forbidden(message)
}

/// Who to ask: the enabled admins by name.
async fn admins(db: &sqlx::PgPool) -> String {
    let names = sqlx::query_scalar!(
        "SELECT name FROM users WHERE role = 'admin' AND NOT disabled ORDER BY name LIMIT 5"
    )
    .fetch_all(db)
    .await
    .unwrap_or_default();
    if names.is_empty() {
        "a Partita administrator".to_string()
    } else {
        format!("a Partita administrator ({})", names.join(", "))
    }
}

/// The user of an ID token: found by (issuer, subject), created at the
/// first sign-in, its role and team set from the claim each time. In one
/// transaction, with the audit log.
async fn provision(
    state: &AppState,
    claim: &str,
    claims: &IdTokenClaims<Extra, CoreGenderClaim>,
) -> Result<i64, PageError> {
    let issuer = claims.issuer().as_str().to_string();
    let subject = claims.subject().as_str().to_string();
    let email = claims.email().map(|e| e.as_str().to_string());
    let values = claim_values(claims.additional_claims(), claim);

    let mut tx = state.pool.begin().await.map_err(internal)?;
    let existing = sqlx::query!(
        r#"SELECT u.id, u.name, u.role, t.name AS "team?", u.disabled
           FROM users u LEFT JOIN teams t ON t.id = u.team_id
           WHERE u.external_issuer = $1 AND u.external_subject = $2
           FOR UPDATE OF u"#,
        issuer,
        subject,
    )
    .fetch_optional(&mut *tx)
    .await
    .map_err(internal)?;
    if existing.as_ref().is_some_and(|u| u.disabled) {
        return Err(refusal(format!(
            "Your Partita account is disabled. Ask {} to enable it.",
            admins(&state.pool).await
        )));
    }
    let rules = rules(&mut *tx).await.map_err(internal)?;
    let mapping = map_values(&rules, &values);
    let role = match (&mapping.role, &mapping.team) {
        (Some(r), _) => r.clone(),
        (None, Some(_)) => crate::api::ROLE_MEMBER.to_string(),
        (None, None) => {
            return Err(refusal(format!(
                "Your single sign-on account is not mapped to a team or a role in Partita \
                 (your {claim}: {}). Ask {} to add you to a team's group, or to map one of \
                 your groups to a team (Admin, Single sign-on).",
                shown(&values),
                admins(&state.pool).await
            )));
        }
    };
    let team_less = role == ROLE_ADMIN || role == ROLE_FINANCE;
    let team = if team_less {
        None
    } else {
        mapping.team.clone()
    };
    let team_id = match &team {
        None if team_less => None,
        None => {
            return Err(refusal(format!(
                "Your single sign-on account gives you the role {role} but no team, and every \
                 {role} belongs to a team (your {claim}: {}). Ask {} to add you to a team's \
                 group, or to map one of your groups to a team (Admin, Single sign-on).",
                shown(&values),
                admins(&state.pool).await
            )));
        }
        Some(name) => {
            let id = sqlx::query_scalar!("SELECT id FROM teams WHERE name = $1", name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(internal)?;
            match id {
                Some(id) => Some(id),
                None => {
                    return Err(refusal(format!(
                        "Your single sign-on account names the team {name}, which Partita does \
                         not have. Ask {} to create it or to map your groups to another team.",
                        admins(&state.pool).await
                    )));
                }
            }
        }
    };

    let user_id = match existing {
        Some(u) => {
            if u.role != role || u.team != team {
                sqlx::query!(
                    "UPDATE users SET role = $2, team_id = $3, email = COALESCE($4, email), updated_at = now()
                     WHERE id = $1",
                    u.id,
                    role,
                    team_id,
                    email,
                )
                .execute(&mut *tx)
                .await
                .map_err(internal)?;
                audit::record(
                    &mut *tx,
                    Actor {
                        user_id: u.id,
                        name: &u.name,
                    },
                    Change {
                        action: "user.sso_update",
                        target_kind: "user",
                        target: &u.name,
                        before: Some(json!({"role": u.role, "team": u.team.clone().unwrap_or_default()})),
                        after: Some(json!({"role": role, "team": team.clone().unwrap_or_default(), "claim": values})),
                    },
                )
                .await
                .map_err(internal)?;
            }
            u.id
        }
        None => {
            let base = base_name(
                claims
                    .preferred_username()
                    .map(|u| u.as_str())
                    .filter(|s| !s.is_empty()),
                email.as_deref(),
                &subject,
            );
            let mut created = None;
            for n in 1..=1000 {
                let name = if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                let id = sqlx::query_scalar!(
                    "INSERT INTO users (name, role, team_id, email, external_issuer, external_subject)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (name) DO NOTHING RETURNING id",
                    name,
                    role,
                    team_id,
                    email,
                    issuer,
                    subject,
                )
                .fetch_optional(&mut *tx)
                .await
                .map_err(internal)?;
                if let Some(id) = id {
                    created = Some((id, name));
                    break;
                }
            }
            let Some((id, name)) = created else {
                return Err(refused(
                    StatusCode::CONFLICT,
                    "No free user name was found for your account; ask an administrator.",
                ));
            };
            audit::record(
                &mut *tx,
                Actor {
                    user_id: id,
                    name: &name,
                },
                Change {
                    action: "user.sso_create",
                    target_kind: "user",
                    target: &name,
                    before: None,
                    after: Some(json!({
                        "role": role,
                        "team": team.clone().unwrap_or_default(),
                        "issuer": issuer,
                        "subject": subject,
                        "claim": values,
                    })),
                },
            )
            .await
            .map_err(internal)?;
            id
        }
    };
    tx.commit().await.map_err(internal)?;
    state.accounts.forget();
    Ok(user_id)
}

fn shown(values: &[String]) -> String {
    if values.is_empty() {
        "none".to_string()
    } else {
        values.join(", ")
    }
}

// ---- Signing out ----

/// Where the browser goes after its session ended: for a session that
/// came from SSO, the provider's end-session endpoint (with the ID token
/// as `id_token_hint` and the post-logout URL), else the sign-in page.
pub async fn signout_redirect(state: &AppState, session_id: i64) -> String {
    let fallback = "/signin".to_string();
    let Some(sso) = state.portal.sso.as_ref() else {
        return fallback;
    };
    let row = sqlx::query!(
        "SELECT via, sso_id_token FROM sessions WHERE id = $1",
        session_id
    )
    .fetch_optional(&state.pool)
    .await;
    let Ok(Some(row)) = row else {
        return fallback;
    };
    if row.via != "sso" {
        return fallback;
    }
    let Ok(provider) = sso.provider().await else {
        return fallback;
    };
    let Some(end) = provider.end_session.clone() else {
        return fallback;
    };
    let Ok(after) = PostLogoutRedirectUrl::new(sso.settings.post_logout_redirect_url.clone())
    else {
        return fallback;
    };
    let mut request = LogoutRequest::from(end)
        .set_client_id(ClientId::new(sso.settings.client_id.clone()))
        .set_post_logout_redirect_uri(after);
    if let Some(token) = row
        .sso_id_token
        .as_deref()
        .and_then(|t| CoreIdToken::from_str(t).ok())
    {
        request = request.set_id_token_hint(&token);
    }
    request.http_get_url().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn without_rules_team_and_role_values_are_read() {
        let m = map_values(&[], &v(&["staff", "team:vision", "role:lead", "team:ads"]));
        assert_eq!(m.team.as_deref(), Some("vision"));
        assert_eq!(m.role.as_deref(), Some("lead"));
        let m = map_values(&[], &v(&["role:wizard", "team:"]));
        assert_eq!(m, Mapping::default());
    }

    #[test]
    fn rules_apply_in_order_and_only_they() {
        let rules = vec![
            Rule {
                claim_value: "ml-leads".into(),
                team: None,
                role: Some("lead".into()),
            },
            Rule {
                claim_value: "ml".into(),
                team: Some("vision".into()),
                role: Some("member".into()),
            },
            Rule {
                claim_value: "ads".into(),
                team: Some("ads".into()),
                role: None,
            },
        ];
        let m = map_values(&rules, &v(&["ads", "ml", "ml-leads", "team:search"]));
        assert_eq!(m.team.as_deref(), Some("vision"));
        assert_eq!(m.role.as_deref(), Some("lead"));
        let m = map_values(&rules, &v(&["ads"]));
        assert_eq!(m.team.as_deref(), Some("ads"));
        assert_eq!(m.role, None);
        // With rules, `team:` values are not read.
        assert_eq!(map_values(&rules, &v(&["team:search"])), Mapping::default());
    }

    #[test]
    fn names_are_user_names() {
        assert_eq!(base_name(Some("Lena.Ng"), None, "x"), "lena-ng");
        assert_eq!(
            base_name(None, Some("Bob_Smith@example.com"), "x"),
            "bob-smith"
        );
        assert_eq!(base_name(Some(" "), None, "1234"), "u-1234");
        assert_eq!(base_name(None, None, "--"), "u");
        let long = base_name(None, None, &"a".repeat(80));
        assert_eq!(long.len(), 34);
    }

    #[test]
    fn claim_values_take_a_list_or_one_string() {
        let mut e = Extra::default();
        e.claims.insert("groups".into(), json!(["a", 1, "b"]));
        e.claims.insert("dept".into(), json!("x"));
        assert_eq!(claim_values(&e, "groups"), v(&["a", "b"]));
        assert_eq!(claim_values(&e, "dept"), v(&["x"]));
        assert!(claim_values(&e, "none").is_empty());
    }

    #[test]
    fn the_secret_is_not_printed() {
        assert_eq!(format!("{:?}", Secret("hush".into())), "Secret(…)");
    }
}
