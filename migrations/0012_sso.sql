-- Single sign-on with OpenID Connect (src/portal/sso.rs).
--
-- Forward-only, as every migration here.

-- The rules that map values of the configured claim (`--oidc-claim`, by
-- default `groups`) to a team and a role, edited by admins at /admin/sso.
-- At each SSO login the user's claim values are matched against the rules
-- in `position` order: the first matching rule that names a team gives
-- the team, the first that names a role gives the role. Without any rule,
-- values of the form `team:<name>` and `role:<role>` are read directly.
CREATE TABLE sso_claim_rules (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    position    INTEGER NOT NULL,
    claim_value TEXT NOT NULL CHECK (claim_value <> ''),
    team_id     BIGINT REFERENCES teams (id),
    role        TEXT CHECK (role IN ('admin', 'lead', 'member', 'viewer', 'finance')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK (team_id IS NOT NULL OR role IS NOT NULL)
);
CREATE INDEX sso_claim_rules_position ON sso_claim_rules (position, id);

-- A sign-in on its way through the provider: the browser holds a random
-- secret in a short-lived HttpOnly cookie, the database its SHA-256 with
-- the request's state, nonce and PKCE verifier, so the callback is
-- accepted only in the browser that started it, once, within minutes.
CREATE TABLE sso_logins (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    browser_sha256 BYTEA NOT NULL UNIQUE CHECK (octet_length(browser_sha256) = 32),
    state          TEXT NOT NULL,
    nonce          TEXT NOT NULL,
    pkce_verifier  TEXT NOT NULL,
    next           TEXT NOT NULL DEFAULT '/',
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at     TIMESTAMPTZ NOT NULL,
    CHECK (expires_at > created_at)
);
CREATE INDEX sso_logins_expires ON sso_logins (expires_at);

-- The ID token a session signed in with (sessions.via = 'sso'), sent back
-- to the provider as `id_token_hint` when the user signs out.
ALTER TABLE sessions ADD COLUMN sso_id_token TEXT;
