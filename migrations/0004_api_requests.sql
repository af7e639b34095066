-- What the API records for the worker to act on, and which clock each
-- time the API writes is in.
--
-- Clocks: `jobs.submitted_at` and the `submitted` and `queued` events are
-- cluster time (the worker's clock as stored in `meta`, as 0002 says);
-- the API's requests and class changes are WALL time, UTC.
-- `job_events.clock` says which clock each event's `at` is in, so that a
-- reader never mixes them; the worker's events are 'cluster'.

ALTER TABLE job_events
    ADD COLUMN clock TEXT NOT NULL DEFAULT 'cluster' CHECK (clock IN ('cluster', 'wall'));

-- When a lead asked to put a job that holds resources back in its team's
-- queue (POST /jobs/{id}/requeue), or someone asked to cancel a job
-- (POST /jobs/{id}/cancel), wall time; who asked is in 0005's
-- `*_requested_by`, which the worker reads. The worker carries the request
-- out and records the transition in cluster time.
ALTER TABLE jobs
    ADD COLUMN requeue_requested_at TIMESTAMPTZ,
    ADD COLUMN cancel_requested_at  TIMESTAMPTZ;

-- The jobs with a request pending, found cheaply by the worker.
CREATE INDEX jobs_requests ON jobs (seq)
    WHERE requeue_requested_at IS NOT NULL OR cancel_requested_at IS NOT NULL;
