-- The cluster time now, as any process reads it (the API stamps
-- submissions with it), defined once, here, in SQL: a submission batch
-- asks for it inside the statement that stores the batch, saving a round
-- trip (src/store/group_commit.rs), and the Rust `clock::cluster_now` is
-- this function.
--
-- Forward-only, as every migration here.

-- From the clock the active worker stores each tick in `meta`
-- (src/worker/clock.rs): `epoch` (Unix nanoseconds of cluster time zero),
-- `clock` (the cluster time of its last tick, nanoseconds), `clock_wall`
-- (the wall time at which it reached that cluster time, Unix nanoseconds)
-- and `speed`. While an active worker was seen in the last 10 s the clock
-- runs on from its last tick at that speed; else it stands still. NULL
-- before any worker started the clock. In microseconds, rounded down, as
-- PostgreSQL keeps times.
CREATE FUNCTION cluster_now() RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
    WITH m AS (
        SELECT max(value) FILTER (WHERE key = 'epoch')::bigint AS epoch,
               max(value) FILTER (WHERE key = 'clock')::bigint AS clock,
               max(value) FILTER (WHERE key = 'clock_wall')::bigint AS wall,
               max(value) FILTER (WHERE key = 'speed')::float8 AS speed
        FROM meta
        WHERE key IN ('epoch', 'clock', 'clock_wall', 'speed')
    ),
    live AS (
        SELECT EXISTS (SELECT 1 FROM workers
                       WHERE active AND heartbeat_at > now() - interval '10 seconds') AS live
    ),
    ran AS (
        SELECT m.*,
               CASE WHEN live.live AND m.wall IS NOT NULL AND m.speed IS NOT NULL
                    THEN (greatest(0, (extract(epoch FROM clock_timestamp()) * 1e9)::bigint - m.wall)
                          * m.speed)::bigint
                    ELSE 0 END AS since
        FROM m, live
    )
    SELECT CASE WHEN epoch IS NULL OR clock IS NULL THEN NULL
                ELSE timestamptz 'epoch'
                     + ((epoch + clock + since) / 1000)::float8 * interval '1 microsecond' END
    FROM ran
$$;
