-- Jobs that arrive on a Kubernetes cluster (pods that people create with
-- kubectl and spec.schedulerName: partita) are stored beside the ones
-- submitted through the portal and the API, under their Queue's team, so
-- that one queue view and one ledger show all the work (issue 48).
--
-- `cluster_job` names such a job on the cluster: "<namespace>/<group>"
-- for a gang, "<namespace>/<pod>" for a lone pod (go/internal/kube JobID).
-- A name is reused when the gang is made again after it finished, so it
-- is unique among unfinished jobs only.
ALTER TABLE jobs ADD COLUMN cluster_job TEXT CHECK (cluster_job <> '');
CREATE UNIQUE INDEX jobs_cluster_job_unfinished ON jobs (cluster_job)
    WHERE cluster_job IS NOT NULL AND state IN ('queued', 'admitted', 'running', 'preempted');
