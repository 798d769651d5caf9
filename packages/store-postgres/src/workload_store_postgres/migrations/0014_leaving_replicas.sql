-- 0014: a replica that is leaving (SIGTERM, SPEC §16) says so before it hands its shards over.
-- The others count it out of their shares at once, so each shard it gives up is taken at the
-- next lock check, not once its last hand-off has ended; what it still holds stays its own.
-- A new incarnation of a replica id is not leaving.

ALTER TABLE replicas ADD COLUMN leaving boolean NOT NULL DEFAULT false;
