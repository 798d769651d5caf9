-- A replica's membership of its database's cluster (SPEC §16), run on the replica's own session
-- (``PostgresShardLeases``). A replica is *live* while its lease runs and the session that
-- registered it is alive (``backend_pid`` and ``backend_start`` still name a backend); a shard
-- is *free* when nobody holds it, its lease ran out, or its owner is not live.

-- name: join_cluster
-- Replicas share the coordinator's advisory lock ("WKLDCORD"): a coordinator takes it
-- exclusively (§7, §14), so the two modes never run on one database at once.
SELECT pg_try_advisory_lock_shared(%(key)s::bigint) AS joined, pg_backend_pid() AS pid,
       (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()) AS started,
       (SELECT shards_total FROM cluster) AS shards_total

-- name: leave_cluster
SELECT pg_advisory_unlock_shared(%(key)s::bigint)

-- name: end_coordinator_writers
-- Writes still in flight of a coordinator whose lock vanished (its session ended before its own
-- lock check noticed): they hold the coordinator's fence ("WKLDFENC", migration 0007) shared and
-- could never commit once the epoch below moves; they are ended, or it would wait for them.
-- Only shared holders: another replica joining holds it exclusively, and is waited for.
SELECT pg_terminate_backend(l.pid, 1000)
FROM pg_locks l
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = %(classid)s::bigint::oid AND l.objid = %(objid)s::bigint::oid
  AND l.objsubid = 1 AND l.mode = 'ShareLock' AND l.granted AND l.pid <> pg_backend_pid()

-- name: fence_coordinators
-- After every coordinator write in flight (they hold the fence shared), until the commit.
SELECT pg_advisory_xact_lock(%(fence_key)s::bigint)

-- name: bump_coordinator_epoch
-- A replica joins: the coordinator epoch moves on, held by nobody, so a coordinator whose lock
-- vanished moments ago writes nothing more (SPEC §14, §16) — as a new leader's increment does.
UPDATE coordinator SET epoch = epoch + 1, leader = NULL, lease_expires_at = NULL

-- name: lock_replica
-- The row of a replica id, and whether the replica it names is live (its session alive too).
SELECT r.lease_expires_at > now()
       AND EXISTS (SELECT 1 FROM pg_stat_activity a
                   WHERE a.pid = r.backend_pid AND a.backend_start = r.backend_start) AS live
FROM replicas r WHERE r.replica_id = %(replica_id)s
FOR UPDATE

-- name: register_replica
-- A new incarnation of a replica id whose previous one is gone: its shards are free now (the
-- next owner of each still takes it in a new epoch, after any write of the old one in flight).
WITH freed AS (
    UPDATE shards SET owner = NULL, lease_expires_at = NULL
    WHERE owner = %(replica_id)s
)
INSERT INTO replicas (replica_id, started_at, last_seen_at, lease_expires_at, backend_pid,
                      backend_start)
VALUES (%(replica_id)s, now(), now(), now() + make_interval(secs => %(lease)s),
        pg_backend_pid(), %(backend_start)s)
ON CONFLICT (replica_id) DO UPDATE
SET started_at = excluded.started_at, last_seen_at = excluded.last_seen_at,
    lease_expires_at = excluded.lease_expires_at, backend_pid = excluded.backend_pid,
    backend_start = excluded.backend_start, leaving = false

-- name: renew_membership
-- One round trip at every lock check: say this replica is alive, extend the leases of the shards
-- it holds in their epochs, and see the cluster (live replicas, free shards, shards held each).
-- A leaving replica (migration 0014) is no member to share with, but holds what it holds.
-- The reads see the cluster as it was before this statement's own updates. Its commit does not
-- wait for the disk (ADR 0047): leases are worth nothing after a crash of PostgreSQL.
WITH me AS (
    UPDATE replicas
    SET last_seen_at = now(), lease_expires_at = now() + make_interval(secs => %(lease)s)
    WHERE replica_id = %(replica_id)s AND backend_pid = pg_backend_pid()
      AND set_config('synchronous_commit', 'off', true) = 'off'
    RETURNING replica_id
), renewed AS (
    UPDATE shards s SET lease_expires_at = now() + make_interval(secs => %(lease)s)
    FROM unnest(%(shards)s::integer[], %(epochs)s::bigint[]) AS h(shard, epoch)
    WHERE s.shard = h.shard AND s.epoch = h.epoch AND s.owner = %(replica_id)s
      AND EXISTS (SELECT 1 FROM me)
    RETURNING s.shard
), live AS (
    SELECT r.replica_id, r.leaving FROM replicas r
    WHERE r.lease_expires_at > now()
      AND EXISTS (SELECT 1 FROM pg_stat_activity a
                  WHERE a.pid = r.backend_pid AND a.backend_start = r.backend_start)
), held AS (
    SELECT s.shard, s.owner FROM shards s
    WHERE s.owner IN (SELECT replica_id FROM live) AND s.lease_expires_at > now()
)
SELECT EXISTS (SELECT 1 FROM me) AS registered,
       (SELECT coalesce(array_agg(shard), '{}') FROM renewed) AS renewed,
       (SELECT coalesce(array_agg(replica_id ORDER BY replica_id), '{}') FROM live
        WHERE NOT leaving) AS members,
       (SELECT coalesce(array_agg(s.shard ORDER BY s.shard), '{}') FROM shards s
        WHERE s.shard NOT IN (SELECT shard FROM held)) AS free,
       (SELECT coalesce(jsonb_object_agg(owner, n), '{}')
        FROM (SELECT owner, count(*) AS n FROM held GROUP BY owner) o) AS owned,
       (SELECT shards_total FROM cluster) AS shards_total

-- name: lock_shard
-- Whether a shard is free (see the file's first lines), its row locked until this transaction
-- ends: two replicas never take one shard, and its owner cannot renew it meanwhile.
SELECT s.owner IS NULL
       OR s.lease_expires_at <= now()
       OR NOT EXISTS (SELECT 1 FROM replicas r
                      WHERE r.replica_id = s.owner AND r.lease_expires_at > now()
                        AND EXISTS (SELECT 1 FROM pg_stat_activity a
                                    WHERE a.pid = r.backend_pid
                                      AND a.backend_start = r.backend_start)) AS free
FROM shards s WHERE s.shard = %(shard)s
FOR UPDATE

-- name: take_lock_timeout
SELECT set_config('lock_timeout', %(ms)s::text || 'ms', true)

-- name: end_shard_writers
-- The sessions still holding the shard's fence: writes of its previous owner in flight (a
-- frozen replica's open transaction). They could never commit; they are ended, or the new
-- epoch would wait for them for good.
SELECT pg_terminate_backend(l.pid, 1000)
FROM pg_locks l
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = %(fence_key)s::bigint::oid AND l.objid = %(shard)s::bigint::oid
  AND l.objsubid = 2 AND l.granted AND l.pid <> pg_backend_pid()

-- name: fence_shard
-- Wait for every write of the shard's previous epoch in flight (they hold its fence shared).
SELECT pg_advisory_xact_lock(%(fence_key)s::integer, %(shard)s::integer)

-- name: take_shard
-- The lease counts from this statement, after the waits of its transaction (the row's lock,
-- the fence): from now(), the transaction's start, it could begin run out (ADR 0047).
UPDATE shards
SET epoch = epoch + 1, owner = %(replica_id)s,
    lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s),
    taken_at = statement_timestamp()
WHERE shard = %(shard)s
RETURNING epoch

-- name: depart_cluster
-- A replica about to hand every shard over: the others count it out of their shares now.
UPDATE replicas SET leaving = true
WHERE replica_id = %(replica_id)s AND backend_pid = pg_backend_pid()

-- name: give_shard
UPDATE shards SET owner = NULL, lease_expires_at = NULL
WHERE shard = %(shard)s AND epoch = %(epoch)s AND owner = %(replica_id)s

-- name: leave_replicas
-- A replica leaving: what it still holds is free, and it is no longer a member.
WITH freed AS (
    UPDATE shards SET owner = NULL, lease_expires_at = NULL WHERE owner = %(replica_id)s
)
DELETE FROM replicas WHERE replica_id = %(replica_id)s AND backend_pid = pg_backend_pid()
