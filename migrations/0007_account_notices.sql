-- Notices of account changes, for the API's in-memory copy of accounts
-- (src/server/accounts_cache.rs).
--
-- Forward-only, as every migration here.

-- Any change to who holds which token, what a user may do, or what a team
-- allows sends a notice on the channel `partita_accounts` when its
-- transaction commits (NOTIFY is transactional: a rolled-back change sends
-- none). Each server process listens and forgets every account it holds.
-- Statement-level triggers: one notice per statement however many rows it
-- changes, and PostgreSQL folds equal notices of one transaction into one.
CREATE FUNCTION notify_account_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('partita_accounts', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_tokens_notice AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION notify_account_change();
CREATE TRIGGER users_notice AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION notify_account_change();
CREATE TRIGGER teams_notice AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON teams
    FOR EACH STATEMENT EXECUTE FUNCTION notify_account_change();
CREATE TRIGGER projects_notice AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON projects
    FOR EACH STATEMENT EXECUTE FUNCTION notify_account_change();
CREATE TRIGGER business_units_notice AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON business_units
    FOR EACH STATEMENT EXECUTE FUNCTION notify_account_change();
