-- 0013: a lease's expiry decided on a read older than a heartbeat that renewed the lease is
-- refused (SPEC §10). A heartbeat renews a lease without a new revision of its run, so the
-- revision check of `commit_run` cannot see it: the lease reaper could read a lease that ran
-- out, a heartbeat that found it held (before the end, by its own time) commit next, and the
-- reaper's commit end the attempt the heartbeat's answer keeps. `commit_run` judges the lease
-- as stored when it writes the attempt (the row it locks, not its snapshot) and calls this
-- function to refuse the whole statement; the store answers a revision conflict, and the
-- reaper reads the run again. SQLSTATE WL409 is Workload's own (class WL).

CREATE FUNCTION workload_lease_renewed() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'a heartbeat renewed the lease after the read that found it expired'
        USING ERRCODE = 'WL409';
END
$$;
