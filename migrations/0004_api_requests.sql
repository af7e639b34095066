-- What the API records for the worker to act on, and which clock each
-- time the API writes is in.
--
-- Clocks: the API has no cluster clock (the worker and the virtual
-- cluster own it), so every time the API writes is WALL time, UTC:
-- `jobs.submitted_at` (the moment the submission was stored, wall time:
-- this comment supersedes 0002's for that one column), the events the API
-- appends (`submitted`, `queued`, `priority`, `cancelled`,
-- `cancel_requested`, `requeue_requested`), and the request columns below.
-- `job_events.clock` says which clock each event's `at` is in, so that a
-- reader never mixes them; the worker's events are 'cluster'.

ALTER TABLE job_events
    ADD COLUMN clock TEXT NOT NULL DEFAULT 'cluster' CHECK (clock IN ('cluster', 'wall'));

COMMENT ON COLUMN jobs.submitted_at IS 'wall time (UTC) at which the API stored the submission';

-- A lead asked to put a job that holds resources back in its team's queue
-- (POST /jobs/{id}/requeue), or someone asked to cancel a job that holds
-- resources (POST /jobs/{id}/cancel): the worker releases its resources,
-- records the transition in cluster time and clears the request. Wall time.
ALTER TABLE jobs
    ADD COLUMN requeue_requested_at TIMESTAMPTZ,
    ADD COLUMN cancel_requested_at  TIMESTAMPTZ;

-- The jobs with a request pending, found cheaply by the worker.
CREATE INDEX jobs_requests ON jobs (seq)
    WHERE requeue_requested_at IS NOT NULL OR cancel_requested_at IS NOT NULL;
