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
--
-- Edited in place before any deployment (nothing ran this migration yet):
-- the first version stored `gpu_milli` (a 1g MIG slice = 142, so seven 1g
-- slices billed 0.994 of a GPU) and GPU-seconds in thousandths. Now:
-- `gpu_share` is the part of the GPU held in 1/7000 GPU, the Go build's
-- exact unit (a MIG slice of k of 7 compute slices = k x 1000, a share of
-- m milli = 7m, a whole GPU 7000), and `share_ms` = gpu_share x held
-- milliseconds, an exact integer that sums exactly. `micro_gpu_hours`
-- (share_ms / 25,200, rounded half up) and `cost_micros` (micro GPU-hours
-- x `price_micros` / 10^6, rounded half up, in micro-units of `currency`)
-- are computed once, by the worker with `accounting::usage`, the function
-- the reports use; a report sums the rows that END in its period, so its
-- total is exactly the sum of those rows. `hold_id` makes the worker's
-- write idempotent.
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
    gpu_share         INTEGER NOT NULL CHECK (gpu_share > 0 AND gpu_share <= 7000),
    capacity_tier     TEXT NOT NULL CHECK (capacity_tier IN ('reserved', 'on-demand', 'spot')),
    job_class         TEXT NOT NULL CHECK (job_class IN ('production', 'batch', 'best-effort')),
    started_at        TIMESTAMPTZ NOT NULL,
    ended_at          TIMESTAMPTZ NOT NULL,
    share_ms          BIGINT NOT NULL CHECK (share_ms >= 0),
    micro_gpu_hours   BIGINT NOT NULL CHECK (micro_gpu_hours >= 0),
    price_micros      BIGINT NOT NULL CHECK (price_micros >= 0),
    cost_micros       BIGINT NOT NULL CHECK (cost_micros >= 0),
    currency          TEXT NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    CHECK (ended_at >= started_at),
    -- The share times the held span, exactly (the span is whole ms).
    CONSTRAINT usage_ledger_span_check CHECK (share_ms = gpu_share * (EXTRACT(EPOCH FROM ended_at - started_at) * 1000)::bigint)
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
