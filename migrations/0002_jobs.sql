-- Jobs and their events, as the Go store keeps them (go/internal/store),
-- with users, teams and projects as references.
--
-- Job and event times are CLUSTER time: on the virtual cluster it runs
-- `--speed` times faster than the wall clock (docs/server.md, "Cluster
-- time"); `created_at` columns elsewhere are wall time.

CREATE TABLE jobs (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE CHECK (id <> ''),
    team_id          BIGINT NOT NULL REFERENCES teams (id),
    project_id       BIGINT NOT NULL REFERENCES projects (id),
    user_id          BIGINT NOT NULL REFERENCES users (id),
    name             TEXT NOT NULL DEFAULT '',
    class            TEXT NOT NULL CHECK (class IN ('production', 'batch', 'best-effort')),
    state            TEXT NOT NULL
        CHECK (state IN ('queued', 'admitted', 'running', 'preempted', 'succeeded', 'failed', 'cancelled')),
    reason           TEXT NOT NULL DEFAULT '',
    -- Within its team's queue and class: a lead's reordering (0 = none).
    priority         INTEGER NOT NULL DEFAULT 0,
    -- The job as the engine takes it (tasks, demands, gang, duration) and
    -- the request as submitted, both as JSON with the Go build's field names.
    spec             JSONB NOT NULL,
    request          JSONB NOT NULL,
    -- A replayed idempotency key answers with the same job; the hash of
    -- the request tells a replay from a different request under one key.
    idempotency_key  TEXT CHECK (idempotency_key <> ''),
    idempotency_hash BYTEA CHECK (octet_length(idempotency_hash) = 32),
    submitted_at     TIMESTAMPTZ NOT NULL,
    started_at       TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- Where it runs, its clock, its last checkpoint: the worker's.
    runtime          JSONB NOT NULL DEFAULT '{}',
    CHECK ((idempotency_key IS NULL) = (idempotency_hash IS NULL))
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_team_seq ON jobs (team_id, seq);
CREATE INDEX jobs_state_seq ON jobs (state, seq);

-- Every transition of a job (append-only: see 0003).
CREATE TABLE job_events (
    seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_seq BIGINT NOT NULL REFERENCES jobs (seq),
    at      TIMESTAMPTZ NOT NULL,
    -- the state entered, or 'submitted', 'requeued', 'priority'
    state   TEXT NOT NULL CHECK (state <> ''),
    reason  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job ON job_events (job_seq, seq);
