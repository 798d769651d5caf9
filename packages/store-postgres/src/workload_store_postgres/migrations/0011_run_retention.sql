-- 0011: run retention (SPEC §5, amended 2026-12-01). With WORKLOAD_RUN_RETENTION_DAYS set, the
-- cluster-duty owner deletes terminal runs that finished longer ago than that, oldest first, a
-- bounded batch per transaction: this index finds them without reading the runs still kept
-- (only finished runs have a finished_at, so unfinished ones are not in it at all).

CREATE INDEX workflow_runs_finished ON workflow_runs (finished_at) WHERE finished_at IS NOT NULL;
