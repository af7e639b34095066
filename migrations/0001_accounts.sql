-- Accounts: business units, teams, projects, users, API tokens and portal
-- sessions. Times in this file are wall time (TIMESTAMPTZ, UTC).
--
-- Forward-only: a later change is a new numbered file, never an edit here
-- (sqlx checks each applied file's checksum at start).

-- A small key-value table for server-wide facts (the cluster clock, the
-- schema's origin), as the Go store's `meta`.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- A cost centre that finance allocates GPU spend to; teams belong to one.
CREATE TABLE business_units (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE CHECK (name <> ''),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A team and its quota, in GPU milli (1000 = one whole GPU): the
-- guarantee it always gets and the burst it may borrow up to when others
-- leave room. `classes` are the priority classes its jobs may use.
CREATE TABLE teams (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE CHECK (name <> ''),
    business_unit_id BIGINT REFERENCES business_units (id),
    guarantee_milli  BIGINT NOT NULL DEFAULT 0 CHECK (guarantee_milli >= 0),
    burst_milli      BIGINT NOT NULL DEFAULT 0 CHECK (burst_milli >= 0),
    weight           DOUBLE PRECISION NOT NULL DEFAULT 1 CHECK (weight > 0),
    classes          TEXT[] NOT NULL DEFAULT ARRAY ['production', 'batch', 'best-effort']
        CHECK (classes <@ ARRAY ['production', 'batch', 'best-effort']),
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE projects (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team_id    BIGINT NOT NULL REFERENCES teams (id),
    name       TEXT NOT NULL CHECK (name <> ''),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (team_id, name)
);

-- A person or a robot. Users are disabled, never deleted (the ledger and
-- the audit log point at them). An admin or finance user has no team; the
-- other roles belong to exactly one. `external_issuer` + `external_subject`
-- is the OpenID Connect identity (`iss`, `sub`) of a user who signs in
-- with SSO: both or neither.
CREATE TABLE users (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE CHECK (name <> ''),
    role             TEXT NOT NULL CHECK (role IN ('admin', 'lead', 'member', 'viewer', 'finance')),
    team_id          BIGINT REFERENCES teams (id),
    disabled         BOOLEAN NOT NULL DEFAULT false,
    email            TEXT,
    external_issuer  TEXT,
    external_subject TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT users_team_for_role CHECK ((role IN ('admin', 'finance')) = (team_id IS NULL)),
    CONSTRAINT users_external_identity_whole CHECK ((external_issuer IS NULL) = (external_subject IS NULL)),
    CONSTRAINT users_external_identity_unique UNIQUE (external_issuer, external_subject)
);

-- API tokens. Only the SHA-256 of the secret is stored: the secret is
-- shown once, when the token is issued, and a request's token is looked
-- up by its hash. A token with `expires_at` in the past or `revoked_at`
-- set is refused.
CREATE TABLE api_tokens (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id),
    token_sha256 BYTEA NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
    description  TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ,
    last_used_at TIMESTAMPTZ,
    CHECK (expires_at IS NULL OR expires_at > created_at)
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- Portal sessions (for the SSO sign-in to come): the browser holds a
-- random secret in a cookie; the database holds its SHA-256.
CREATE TABLE sessions (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id        BIGINT NOT NULL REFERENCES users (id),
    session_sha256 BYTEA NOT NULL UNIQUE CHECK (octet_length(session_sha256) = 32),
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at     TIMESTAMPTZ NOT NULL,
    revoked_at     TIMESTAMPTZ,
    last_seen_at   TIMESTAMPTZ,
    user_agent     TEXT NOT NULL DEFAULT '',
    CHECK (expires_at > created_at)
);
CREATE INDEX sessions_user ON sessions (user_id);
