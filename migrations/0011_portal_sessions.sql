-- Portal sessions (src/portal/session.rs). A session's cookie secret is
-- also the secret of an API token of its own (`token_id`, expiring with
-- the session): the portal calls the API in-process with it, so a page
-- is allowed exactly what the API allows its user, and revoking that
-- token, disabling the user or signing out ends the session. Sessions
-- live in PostgreSQL, so a restart signs nobody out.
--
-- `csrf_token` is the session's synchronizer token: every form and every
-- htmx request sends it back. `via` says how the user signed in.
--
-- Forward-only, as every migration here.
ALTER TABLE sessions
    ADD COLUMN token_id   BIGINT REFERENCES api_tokens (id),
    ADD COLUMN csrf_token TEXT NOT NULL DEFAULT '',
    ADD COLUMN via        TEXT NOT NULL DEFAULT 'token' CHECK (via IN ('token', 'sso'));
