-- A team's own order of its queue (the portal's "move up / move down",
-- POST /api/v1/jobs/{id}/move). Within a team and class the scheduler
-- takes queued jobs by `queue_key`, then id; a job that was never moved
-- has none and is taken by its submission time, as before. Moving a job
-- swaps its key with its neighbour's, so the places the team's jobs hold
-- among other teams' stay where they were: a team reorders its own work,
-- it does not jump others.
--
-- The worker takes up a change to a known job (its class or its key) when
-- `queue_version` differs from the `queue_seen` it last wrote: the API
-- increments the one, the worker sets the other to what it read, so a
-- change made while the worker reads is taken up at the next tick.
--
-- Forward-only, as every migration here.
ALTER TABLE jobs
    ADD COLUMN queue_key     TIMESTAMPTZ,
    ADD COLUMN queue_version INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN queue_seen    INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_queue_changed ON jobs (seq) WHERE queue_version <> queue_seen;
