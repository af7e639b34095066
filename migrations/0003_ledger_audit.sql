-- The usage ledger, the price table and the audit log.
--
-- The ledger and the audit log are records of what happened: chargeback
-- and audits must be able to trust that a row, once written, is never
-- changed or removed. So the database itself refuses UPDATE, DELETE and
-- TRUNCATE on them (and on job events), whoever asks: a bug in the server
-- or a hand-typed statement cannot rewrite history. A correction is a new
-- row.

CREATE FUNCTION refuse_append_only_change() RETURNS trigger
    LANGUAGE plpgsql AS
$$
BEGIN
    RAISE EXCEPTION 'table % is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'P0001', HINT = 'a correction is a new row';
END
$$;

-- Prices per GPU-hour of a whole GPU, by model and capacity tier, in
-- integer micro-units of `currency` (1 USD = 1,000,000). '*' is the
-- fallback model. A change is a new row with a later `valid_from`.
CREATE TABLE prices (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    gpu_model     TEXT NOT NULL CHECK (gpu_model <> ''),
    capacity_tier TEXT NOT NULL CHECK (capacity_tier IN ('reserved', 'on-demand', 'spot')),
    price_micros  BIGINT NOT NULL CHECK (price_micros >= 0),
    currency      TEXT NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    valid_from    TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (gpu_model, capacity_tier, valid_from)
);

-- One row per finished hold: a task's use of one GPU (a MIG slice, a
-- share, or the whole GPU) from `started_at` to `ended_at`, cluster time.
-- `gpu_milli` is the part of the GPU held (1000 = whole; a MIG slice
-- counts its share, e.g. 1g.10gb of 7 slices = 142), so
-- `gpu_seconds_milli` = gpu_milli x seconds is GPU-seconds in thousandths,
-- an exact integer that sums exactly. Cost = GPU-hours x price, in integer
-- micro-units. `hold_id` makes the worker's write idempotent.
CREATE TABLE usage_ledger (
    seq               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hold_id           TEXT NOT NULL UNIQUE CHECK (hold_id <> ''),
    recorded_at       TIMESTAMPTZ NOT NULL DEFAULT now(), -- wall time
    team_id           BIGINT NOT NULL REFERENCES teams (id),
    project_id        BIGINT NOT NULL REFERENCES projects (id),
    user_id           BIGINT NOT NULL REFERENCES users (id),
    job_seq           BIGINT NOT NULL REFERENCES jobs (seq),
    task              TEXT NOT NULL,
    node              TEXT NOT NULL,
    gpu_index         INTEGER NOT NULL CHECK (gpu_index >= 0),
    gpu_model         TEXT NOT NULL CHECK (gpu_model <> ''),
    mig_profile       TEXT CHECK (mig_profile <> ''), -- NULL: a share or the whole GPU
    gpu_milli         INTEGER NOT NULL CHECK (gpu_milli > 0 AND gpu_milli <= 1000),
    capacity_tier     TEXT NOT NULL CHECK (capacity_tier IN ('reserved', 'on-demand', 'spot')),
    job_class         TEXT NOT NULL CHECK (job_class IN ('production', 'batch', 'best-effort')),
    started_at        TIMESTAMPTZ NOT NULL,
    ended_at          TIMESTAMPTZ NOT NULL,
    gpu_seconds_milli BIGINT NOT NULL CHECK (gpu_seconds_milli >= 0),
    price_micros      BIGINT NOT NULL CHECK (price_micros >= 0),
    cost_micros       BIGINT NOT NULL CHECK (cost_micros >= 0),
    currency          TEXT NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    CHECK (ended_at >= started_at)
);
CREATE INDEX usage_ledger_ended ON usage_ledger (ended_at);
CREATE INDEX usage_ledger_team_ended ON usage_ledger (team_id, ended_at);
CREATE INDEX usage_ledger_job ON usage_ledger (job_seq);

-- Every change an admin or a lead makes (quota, role, user, token, job
-- class or order, cancel, requeue): who, when (wall time), what, and the
-- object before and after as JSON. `actor` keeps the name as it was;
-- `actor_user_id` is NULL for the server itself (the first start).
CREATE TABLE audit_log (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor_user_id BIGINT REFERENCES users (id),
    actor         TEXT NOT NULL CHECK (actor <> ''),
    action        TEXT NOT NULL CHECK (action <> ''),
    target_kind   TEXT NOT NULL CHECK (target_kind <> ''),
    target        TEXT NOT NULL,
    before        JSONB,
    after         JSONB
);
CREATE INDEX audit_log_at ON audit_log (at);

CREATE TRIGGER usage_ledger_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON usage_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_append_only_change();
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_append_only_change();
CREATE TRIGGER job_events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON job_events
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_append_only_change();
