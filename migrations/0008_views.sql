-- What the active worker last saw of its world, published for the web
-- servers (the worker may run in another process): GET /cluster, GET
-- /queue, a queued job's place on GET /jobs/{id}, and the gauges of
-- /metrics read it. src/worker/views.rs writes it, in a tick's
-- transaction, at most about once a second; src/server/views.rs reads it.
--
-- Forward-only, as every migration here.

-- One row per view: ('cluster', '') for the nodes, GPUs, slices and
-- utilization (naming every job and team; the API hides other teams' per
-- caller), and ('queue', <team>) for each team with queued jobs, so that a
-- caller's answer reads its own team's row only. A team whose queue
-- emptied has no row. `cluster_time` is the cluster time (see
-- 0002_jobs.sql) of the world the row shows, `speed` the worker's cluster
-- seconds per wall second, `published_at` wall time.
CREATE TABLE worker_views (
    kind         TEXT NOT NULL CHECK (kind IN ('cluster', 'queue')),
    team         TEXT NOT NULL,
    worker_id    TEXT NOT NULL,
    cluster_time TIMESTAMPTZ NOT NULL,
    speed        DOUBLE PRECISION NOT NULL CHECK (speed > 0),
    published_at TIMESTAMPTZ NOT NULL,
    body         JSONB NOT NULL,
    PRIMARY KEY (kind, team),
    CHECK ((kind = 'cluster') = (team = ''))
);
