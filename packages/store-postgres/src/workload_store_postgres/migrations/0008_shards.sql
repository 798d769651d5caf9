-- 0008: scale-out (SPEC §16). Runs are split into shards by a stable hash of their id; replicas
-- (`workload serve --replica`) register with a heartbeat and own shards through leases, each
-- taken in a new epoch of its shard, which every execution write of the shard's runs carries.
-- The number of shards is fixed here, when the database is first migrated (64, or
-- WORKLOAD_SHARDS as `workload migrate up` applies this file), and never changed.

CREATE TABLE cluster (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    shards_total integer NOT NULL CHECK (shards_total BETWEEN 1 AND 4096)
);
INSERT INTO cluster (singleton, shards_total) VALUES (true, 64);

-- One row per shard. ``owner`` holds it until ``lease_expires_at`` (renewed at every lock
-- check); ``epoch`` rises at every acquisition.
CREATE TABLE shards (
    shard            integer     PRIMARY KEY CHECK (shard BETWEEN 0 AND 4095),
    epoch            bigint      NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    owner            text,
    lease_expires_at timestamptz,
    taken_at         timestamptz,
    CHECK ((owner IS NULL) = (lease_expires_at IS NULL))
);
INSERT INTO shards (shard) SELECT generate_series(0, 63);

-- Live replicas say so at every lock check. ``backend_pid`` and ``backend_start`` name the
-- session of the replica's membership connection: once it is gone, so is the replica (its
-- shards are free at once, not only when its lease runs out).
CREATE TABLE replicas (
    replica_id       text        PRIMARY KEY CHECK (replica_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    started_at       timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    backend_pid      integer     NOT NULL,
    backend_start    timestamptz NOT NULL
);

-- The shard of a run: the first 32 bits of the MD5 of its id (as text), modulo the number of
-- shards; ``workload_domain.shards.shard_of`` computes the same.
CREATE FUNCTION workload_shard_of(run_id uuid, total integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (('x' || left(md5(run_id::text), 8))::bit(32)::bigint % total)::integer
$$;

ALTER TABLE workflow_runs ADD COLUMN shard integer;
UPDATE workflow_runs SET shard = workload_shard_of(run_id, 64);
ALTER TABLE workflow_runs ALTER COLUMN shard SET NOT NULL;
-- A replica's recovery and sweep of its shards: their unfinished runs by id.
CREATE INDEX workflow_runs_unfinished_by_shard ON workflow_runs (shard, run_id)
    WHERE status IN ('pending', 'running', 'waiting_retry', 'waiting_approval');

-- Which service process ran an in-process attempt (SPEC §6: its replica_id).
ALTER TABLE attempts ADD COLUMN executed_by text;

-- A single coordinator (§7, §14) is seen from outside as the one member of its cluster.
ALTER TABLE coordinator ADD COLUMN since timestamptz, ADD COLUMN renewed_at timestamptz;

-- The shard fence: a replica's write to a run of shard ``shard`` in its epoch ``expected``
-- holds the shard's shared transaction lock until it commits, and passes only while that epoch
-- is the shard's current one. A replica taking the shard increments the epoch under the same
-- lock held exclusively: it waits for every write in flight, and every later write of an older
-- epoch reads the new one and is refused. (Volatile: it reads with a fresh snapshot, after the
-- lock.) The lock's two keys are "WKSH" and the shard.
CREATE FUNCTION workload_shard_fence(shard integer, expected bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1464554312, shard);
    RETURN EXISTS (SELECT 1 FROM shards s WHERE s.shard = $1 AND s.epoch = expected);
END
$$;
