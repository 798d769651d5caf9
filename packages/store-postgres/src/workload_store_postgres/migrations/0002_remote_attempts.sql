-- 0002: remote execution (SPEC §10): queued attempts claimed by workers under leases; the
-- worker registry and the queues. Each index names the query it serves.

ALTER TABLE attempts
    ADD COLUMN attempt_id                uuid,
    ADD COLUMN action                    text,
    ADD COLUMN queue                     text NOT NULL DEFAULT 'default'
        CHECK (queue ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    ADD COLUMN heartbeat_timeout_seconds double precision
        CHECK (heartbeat_timeout_seconds > 0 AND heartbeat_timeout_seconds <= 3600),
    ADD COLUMN timeout_seconds           double precision
        CHECK (timeout_seconds > 0 AND timeout_seconds <= 86400),
    ADD COLUMN schedule_deadline         timestamptz,
    ADD COLUMN worker_id                 text CHECK (worker_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    ADD COLUMN claimed_at                timestamptz,
    ADD COLUMN lease_expires_at          timestamptz,
    ADD COLUMN timeout_at                timestamptz,
    ADD COLUMN lease_token_digest        text CHECK (lease_token_digest ~ '^[0-9a-f]{64}$'),
    ADD COLUMN progress                  jsonb
        CHECK (progress IS NULL OR jsonb_typeof(progress) = 'object'),
    ADD COLUMN report_hash               text;

-- Attempts written before this migration: an id of their own (new attempts get a name-based
-- one from the service), and the action and queue their task's definition names.
UPDATE attempts SET attempt_id = gen_random_uuid();
UPDATE attempts a
SET action = v.definition -> 'tasks' -> t.position ->> 'action',
    queue = coalesce(v.definition -> 'tasks' -> t.position ->> 'queue', 'default')
FROM task_runs t, workflow_runs r, workflow_versions v
WHERE t.run_id = a.run_id AND t.task_key = a.task_key
  AND r.run_id = a.run_id AND v.workflow_id = r.workflow_id AND v.version = r.version;
ALTER TABLE attempts
    ALTER COLUMN attempt_id SET NOT NULL,
    ALTER COLUMN action SET NOT NULL,
    ADD CHECK (length(action) BETWEEN 1 AND 128);

ALTER TABLE attempts DROP CONSTRAINT attempts_status_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_status_check CHECK (status IN
    ('queued', 'running', 'succeeded', 'failed', 'timed_out', 'canceled', 'interrupted'));
ALTER TABLE attempts DROP CONSTRAINT attempts_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_finished_check
    CHECK ((status IN ('queued', 'running')) = (finished_at IS NULL));
-- A lease is all of it or none of it, and a queued attempt has none.
ALTER TABLE attempts ADD CONSTRAINT attempts_lease_check CHECK (
    (worker_id IS NULL) = (claimed_at IS NULL)
    AND (claimed_at IS NULL) = (lease_expires_at IS NULL)
    AND (lease_expires_at IS NULL) = (lease_token_digest IS NULL)
    AND (lease_expires_at IS NULL) = (timeout_at IS NULL)
    AND (status <> 'queued' OR worker_id IS NULL)
);

-- Heartbeat, complete and fail address an attempt by its id.
CREATE UNIQUE INDEX attempts_by_id ON attempts (attempt_id);
-- Claims: queued attempts oldest first (FIFO by ready time), FOR UPDATE SKIP LOCKED. Queues and
-- actions are filtered on the way: a service has few of them, and most are served.
CREATE INDEX attempts_queued ON attempts (started_at, run_id, task_key, attempt)
    WHERE status = 'queued';
-- load_run's live attempts, and the start-up scan of runs with local attempts left running.
DROP INDEX attempts_running;
CREATE INDEX attempts_live ON attempts (run_id) WHERE status IN ('queued', 'running');
-- The lease reaper: leases run out, start-to-close deadlines, schedule-to-start deadlines.
CREATE INDEX attempts_lease_due ON attempts (lease_expires_at)
    WHERE status = 'running' AND lease_expires_at IS NOT NULL;
CREATE INDEX attempts_timeout_due ON attempts (timeout_at)
    WHERE status = 'running' AND timeout_at IS NOT NULL;
CREATE INDEX attempts_schedule_due ON attempts (schedule_deadline)
    WHERE status = 'queued' AND schedule_deadline IS NOT NULL;
-- GET /workers (in_flight per worker) and GET /queues (running remote attempts per queue).
CREATE INDEX attempts_leased ON attempts (worker_id) WHERE status = 'running'
    AND worker_id IS NOT NULL;

ALTER TABLE state_events DROP CONSTRAINT state_events_type_check;
ALTER TABLE state_events ADD CONSTRAINT state_events_type_check CHECK (type IN
    ('run.created', 'run.started', 'run.cancel_requested', 'run.succeeded', 'run.failed',
     'run.canceled', 'run.recovered', 'attempt.queued', 'attempt.started', 'attempt.succeeded',
     'attempt.failed', 'attempt.timed_out', 'attempt.canceled', 'attempt.interrupted',
     'task.waiting_retry', 'task.succeeded', 'task.failed', 'task.skipped', 'task.canceled'));

-- Workers as last seen by a claim (GET /workers, by id: the primary key).
CREATE TABLE workers (
    worker_id     text        PRIMARY KEY CHECK (worker_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    queues        text[]      NOT NULL,
    actions       text[]      NOT NULL,
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL
);

-- Every queue that ever had a remote attempt (GET /queues lists them, with or without work).
CREATE TABLE queues (
    queue      text        PRIMARY KEY CHECK (queue ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    created_at timestamptz NOT NULL
);
INSERT INTO queues (queue, created_at)
SELECT DISTINCT queue, now() FROM attempts WHERE action <> 'mock';
