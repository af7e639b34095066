-- How the worker finds new submissions without re-reading the queue.
--
-- Forward-only, as every migration here.

-- The transaction that inserted the job. Job `seq`s are handed out before
-- their transactions commit, so a job with a smaller `seq` can become
-- visible after a larger one: the worker cannot just remember the largest
-- `seq` it has seen. Instead, before each read it notes the oldest
-- transaction still running (`pg_snapshot_xmin(pg_current_snapshot())`);
-- every job that read could not see was inserted by that transaction or a
-- later one, so the next read asks only for jobs with `created_xid` at or
-- above it (and skips those it knows). The window stays a few
-- milliseconds of submissions wide, unless some transaction stays open
-- for long; then it is wider, never wrong.
ALTER TABLE jobs ADD COLUMN created_xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX jobs_queued_created_xid ON jobs (created_xid) WHERE state = 'queued';
