-- 0007: high availability (SPEC §14). The coordinator's epoch — incremented at every
-- acquisition of the coordinator lock — its lease (so that a frozen leader can be replaced),
-- and the fence every execution write passes: it is refused once its writer's epoch is no
-- longer the current one. Events record the epoch of the coordinator that wrote them.

CREATE TABLE coordinator (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch            bigint      NOT NULL CHECK (epoch >= 0),
    leader           text,
    lease_expires_at timestamptz
);
INSERT INTO coordinator (singleton, epoch) VALUES (true, 0);

ALTER TABLE state_events ADD COLUMN epoch bigint CHECK (epoch >= 1);

-- The fence: a writer of epoch ``expected`` holds the fence's shared transaction lock until it
-- commits, and passes only if its epoch is still the current one. A new leader increments the
-- epoch under the fence's exclusive lock, so it waits for every write in flight, and every
-- later write of an older epoch is refused. (A volatile function reads with a fresh snapshot,
-- after the lock: it sees an increment committed while it waited.)
CREATE FUNCTION workload_fence(expected bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(6290205160673463875);  -- "WKLDFENC"
    RETURN EXISTS (SELECT 1 FROM coordinator WHERE epoch = expected);
END
$$;
