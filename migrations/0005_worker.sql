-- The background worker (src/worker/): how people ask it to cancel or
-- requeue a job, and its heartbeat.
--
-- Forward-only, as every migration here.

-- A cancel or requeue request, recorded by the API (or a person at psql)
-- and carried out by the active worker at its next tick: the worker alone
-- changes a job's state, so a request never races a start. The value is
-- who asked (a user name), kept for the job's event. `cancel_requested_by`
-- stays set once the job is cancelled; `requeue_requested_by` is cleared
-- (NULL) when the worker has requeued the job (or found it already queued).
ALTER TABLE jobs
    ADD COLUMN cancel_requested_by  TEXT CHECK (cancel_requested_by <> ''),
    ADD COLUMN requeue_requested_by TEXT CHECK (requeue_requested_by <> '');
CREATE INDEX jobs_cancel_requested ON jobs (seq) WHERE cancel_requested_by IS NOT NULL;
CREATE INDEX jobs_requeue_requested ON jobs (seq) WHERE requeue_requested_by IS NOT NULL;

-- Every worker process, active or waiting for the advisory lock, with its
-- last heartbeat (wall time). `/readyz` says whether an active worker was
-- seen recently. `cluster_time` is the active worker's cluster clock at its
-- last tick (cluster time, see 0002_jobs.sql).
CREATE TABLE workers (
    id           TEXT PRIMARY KEY CHECK (id <> ''),
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    active       BOOLEAN NOT NULL DEFAULT false,
    cluster_time TIMESTAMPTZ
);
