-- Named queries of the PostgreSQL store. Each starts with "-- name: <name>"; every value is a
-- bound parameter. Each filter combination of a listing has its own statement (and index).

-- name: insert_workflow
INSERT INTO workflows (workflow_id, latest_version, description, created_at, updated_at)
VALUES (%(workflow_id)s, %(latest_version)s, %(description)s, %(created_at)s, %(updated_at)s)

-- name: insert_version
INSERT INTO workflow_versions
    (workflow_id, version, definition_hash, task_count, definition, created_at)
VALUES (%(workflow_id)s, %(version)s, %(definition_hash)s, %(task_count)s, %(definition)s,
        %(created_at)s)

-- name: bump_workflow
-- Only if the new version is the next one: concurrent new versions serialize on the row lock,
-- and the loser finds zero rows (it re-reads and tries again with the next number).
UPDATE workflows
SET latest_version = %(version)s, updated_at = %(created_at)s, description = %(description)s
WHERE workflow_id = %(workflow_id)s AND latest_version = %(version)s - 1
RETURNING latest_version

-- name: get_workflow
SELECT workflow_id, latest_version, description, created_at, updated_at
FROM workflows WHERE workflow_id = %(workflow_id)s

-- name: get_version
SELECT workflow_id, version, definition_hash, task_count, created_at, definition
FROM workflow_versions WHERE workflow_id = %(workflow_id)s AND version = %(version)s

-- name: page_workflows
SELECT workflow_id, latest_version, description, created_at, updated_at
FROM workflows
WHERE (created_at, workflow_id) > (%(after_at)s, %(after_id)s)
ORDER BY created_at, workflow_id
LIMIT %(limit)s

-- name: page_versions
SELECT workflow_id, version, definition_hash, task_count, created_at, definition
FROM workflow_versions
WHERE workflow_id = %(workflow_id)s AND version > %(after)s
ORDER BY version
LIMIT %(limit)s

-- name: insert_run
INSERT INTO workflow_runs
    (run_id, workflow_id, version, status, revision, last_sequence, input, cancel_requested,
     created_at, updated_at, started_at, finished_at)
VALUES (%(run_id)s, %(workflow_id)s, %(version)s, %(status)s, %(revision)s, %(last_sequence)s,
        %(input)s, %(cancel_requested)s, %(created_at)s, %(updated_at)s, %(started_at)s,
        %(finished_at)s)

-- name: insert_task
INSERT INTO task_runs
    (run_id, task_key, position, status, depends_on, attempt_count, max_attempts,
     next_attempt_at, started_at, finished_at, output, error)
VALUES (%(run_id)s, %(task_key)s, %(position)s, %(status)s, %(depends_on)s, %(attempt_count)s,
        %(max_attempts)s, %(next_attempt_at)s, %(started_at)s, %(finished_at)s, %(output)s,
        %(error)s)

-- name: insert_event
INSERT INTO state_events (run_id, sequence, type, occurred_at, task_key, attempt, data)
VALUES (%(run_id)s, %(sequence)s, %(type)s, %(occurred_at)s, %(task_key)s, %(attempt)s,
        %(data)s)

-- name: update_run
-- The revision condition is the whole concurrency control of a run: zero rows means stale.
UPDATE workflow_runs
SET status = %(status)s, revision = %(revision)s, last_sequence = last_sequence + %(events)s,
    cancel_requested = %(cancel_requested)s, updated_at = %(updated_at)s,
    started_at = %(started_at)s, finished_at = %(finished_at)s
WHERE run_id = %(run_id)s AND revision = %(expected_revision)s
RETURNING last_sequence

-- name: update_task
UPDATE task_runs
SET status = %(status)s, attempt_count = %(attempt_count)s, next_attempt_at = %(next_attempt_at)s,
    started_at = %(started_at)s, finished_at = %(finished_at)s, output = %(output)s,
    error = %(error)s
WHERE run_id = %(run_id)s AND task_key = %(task_key)s

-- name: upsert_attempt
-- A commit never writes a lease back: claims and heartbeats change those columns without a
-- new revision, so the stored ones are newer than any snapshot's.
INSERT INTO attempts (run_id, task_key, attempt, status, started_at, finished_at, output, error,
                      attempt_id, action, queue, heartbeat_timeout_seconds, timeout_seconds,
                      schedule_deadline, report_hash)
VALUES (%(run_id)s, %(task_key)s, %(attempt)s, %(status)s, %(started_at)s, %(finished_at)s,
        %(output)s, %(error)s, %(attempt_id)s, %(action)s, %(queue)s,
        %(heartbeat_timeout_seconds)s, %(timeout_seconds)s, %(schedule_deadline)s,
        %(report_hash)s)
ON CONFLICT (run_id, task_key, attempt) DO UPDATE
SET status = excluded.status, finished_at = excluded.finished_at, output = excluded.output,
    error = excluded.error, report_hash = excluded.report_hash

-- name: ensure_queues
INSERT INTO queues (queue, created_at)
SELECT DISTINCT q, %(now)s FROM unnest(%(queues)s::text[]) AS q
ON CONFLICT (queue) DO NOTHING

-- name: get_run
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at, last_sequence
FROM workflow_runs WHERE run_id = %(run_id)s

-- name: get_run_with_counts
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at,
       (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
        FROM (SELECT status, count(*) AS n FROM task_runs t
              WHERE t.run_id = r.run_id GROUP BY status) AS counts) AS task_counts
FROM workflow_runs r WHERE run_id = %(run_id)s

-- name: run_exists
SELECT 1 FROM workflow_runs WHERE run_id = %(run_id)s

-- name: list_tasks
SELECT task_key, position, status, depends_on, attempt_count, max_attempts, next_attempt_at,
       started_at, finished_at, output, error
FROM task_runs WHERE run_id = %(run_id)s AND position > %(after)s
ORDER BY position
LIMIT %(limit)s

-- name: get_task
SELECT task_key, position, status, depends_on, attempt_count, max_attempts, next_attempt_at,
       started_at, finished_at, output, error
FROM task_runs WHERE run_id = %(run_id)s AND task_key = %(task_key)s

-- name: live_attempts
-- Served by attempts_live.
SELECT task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash
FROM attempts WHERE run_id = %(run_id)s AND status IN ('queued', 'running')

-- name: list_attempts
SELECT task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash
FROM attempts
WHERE run_id = %(run_id)s AND task_key = %(task_key)s AND attempt > %(after)s
ORDER BY attempt
LIMIT %(limit)s

-- name: list_run_attempts
-- Served by the primary key (run_id, task_key, attempt).
SELECT task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash
FROM attempts
WHERE run_id = %(run_id)s
ORDER BY task_key, attempt
LIMIT %(limit)s

-- name: list_events
SELECT sequence, type, occurred_at, task_key, attempt, data
FROM state_events
WHERE run_id = %(run_id)s AND sequence > %(after)s
ORDER BY sequence
LIMIT %(limit)s

-- name: page_runs
-- Served by workflow_runs_keyset.
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at
FROM workflow_runs
WHERE (created_at, run_id) > (%(after_at)s, %(after_id)s)
ORDER BY created_at, run_id
LIMIT %(limit)s

-- name: page_runs_by_workflow
-- Served by workflow_runs_by_workflow.
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at
FROM workflow_runs
WHERE workflow_id = %(workflow_id)s AND (created_at, run_id) > (%(after_at)s, %(after_id)s)
ORDER BY created_at, run_id
LIMIT %(limit)s

-- name: page_runs_by_status
-- Served by workflow_runs_by_status.
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at
FROM workflow_runs
WHERE status = %(status)s AND (created_at, run_id) > (%(after_at)s, %(after_id)s)
ORDER BY created_at, run_id
LIMIT %(limit)s

-- name: page_runs_by_workflow_and_status
-- Served by workflow_runs_by_workflow (status filtered on the way).
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at
FROM workflow_runs
WHERE workflow_id = %(workflow_id)s AND status = %(status)s
  AND (created_at, run_id) > (%(after_at)s, %(after_id)s)
ORDER BY created_at, run_id
LIMIT %(limit)s

-- name: task_counts
SELECT run_id, status, count(*) FROM task_runs
WHERE run_id = ANY(%(run_ids)s)
GROUP BY run_id, status

-- name: unfinished_runs
SELECT run_id FROM workflow_runs
WHERE status IN ('pending', 'running', 'waiting_retry') AND run_id > %(after)s
ORDER BY run_id
LIMIT %(limit)s

-- name: count_active_runs
-- Only unfinished runs are counted (what workflow_runs_unfinished indexes): bounded by the work
-- in flight, not by the history.
SELECT status, count(*) AS count FROM workflow_runs
WHERE status IN ('pending', 'running', 'waiting_retry', 'waiting_approval')
  AND (%(workflow_id)s::text IS NULL OR workflow_id = %(workflow_id)s::text)
GROUP BY status

-- name: runs_with_running_attempts
-- Served by attempts_live (partial on live attempts): few rows, even with a big backlog.
SELECT DISTINCT run_id FROM attempts
WHERE status = 'running' AND action = ANY(%(actions)s)
ORDER BY run_id

-- name: find_outcome
SELECT operation, request_hash, status_code, response
FROM idempotency_records WHERE principal = %(principal)s AND idempotency_key = %(key)s

-- name: insert_outcome
INSERT INTO idempotency_records
    (principal, idempotency_key, operation, request_hash, status_code, response, created_at)
VALUES (%(principal)s, %(key)s, %(operation)s, %(request_hash)s, %(status_code)s, %(response)s,
        %(created_at)s)

-- name: purge_outcomes
DELETE FROM idempotency_records WHERE created_at < %(older_than)s

-- name: ensure_secret
INSERT INTO service_secrets (name, secret, created_at) VALUES (%(name)s, %(secret)s, now())
ON CONFLICT (name) DO NOTHING

-- name: get_secret
SELECT secret FROM service_secrets WHERE name = %(name)s

-- name: claim_attempts
-- One statement: pick the oldest matching queued attempts, skipping rows (attempts or their
-- runs) another transaction holds, so two claimers never take the same attempt and never wait
-- (no deadlock with a commit, which locks the run first); lease each under its token's digest;
-- one commit per run (revision + 1, one attempt.started per attempt); record the worker.
WITH picked AS (
    SELECT a.run_id, a.task_key, a.attempt, a.started_at
    FROM attempts a JOIN workflow_runs r ON r.run_id = a.run_id
    WHERE a.status = 'queued' AND a.queue = ANY(%(queues)s) AND a.action = ANY(%(actions)s)
    ORDER BY a.started_at, a.run_id, a.task_key, a.attempt
    LIMIT %(limit)s
    FOR UPDATE OF a, r SKIP LOCKED
), stamped AS (
    SELECT p.*,
           row_number() OVER (ORDER BY p.started_at, p.run_id, p.task_key, p.attempt) AS n,
           count(*) OVER (PARTITION BY p.run_id) AS per_run,
           row_number() OVER (PARTITION BY p.run_id ORDER BY p.task_key, p.attempt) AS nth
    FROM picked p
), runs AS (
    UPDATE workflow_runs r
    SET revision = r.revision + 1, last_sequence = r.last_sequence + s.per_run,
        updated_at = %(now)s
    FROM (SELECT DISTINCT run_id, per_run FROM stamped) s
    WHERE r.run_id = s.run_id
    RETURNING r.run_id, r.workflow_id, r.version, r.input, r.last_sequence
), claimed AS (
    UPDATE attempts a
    SET status = 'running', worker_id = %(worker_id)s, claimed_at = %(now)s,
        lease_expires_at = %(now)s + make_interval(secs => a.heartbeat_timeout_seconds),
        timeout_at = %(now)s + make_interval(secs => a.timeout_seconds),
        lease_token_digest = (%(digests)s::text[])[s.n]
    FROM stamped s
    WHERE a.run_id = s.run_id AND a.task_key = s.task_key AND a.attempt = s.attempt
    RETURNING a.run_id, a.task_key, a.attempt, a.attempt_id, a.queue, a.action,
              a.lease_expires_at, a.timeout_at, a.heartbeat_timeout_seconds, s.n, s.nth,
              s.per_run
), events AS (
    INSERT INTO state_events (run_id, sequence, type, occurred_at, task_key, attempt, data)
    SELECT c.run_id, r.last_sequence - c.per_run + c.nth, 'attempt.started', %(now)s,
           c.task_key, c.attempt, jsonb_build_object('worker_id', %(worker_id)s::text)
    FROM claimed c JOIN runs r ON r.run_id = c.run_id
), seen AS (
    INSERT INTO workers (worker_id, queues, actions, first_seen_at, last_seen_at)
    VALUES (%(worker_id)s, %(queues)s, %(actions)s, %(now)s, %(now)s)
    ON CONFLICT (worker_id) DO UPDATE
    SET queues = excluded.queues, actions = excluded.actions, last_seen_at = excluded.last_seen_at
)
SELECT c.attempt_id, c.run_id, r.workflow_id, r.version, c.task_key, c.attempt, c.queue,
       c.action, coalesce(v.definition -> 'tasks' -> t.position -> 'input', '{}') AS input,
       r.input AS run_input,
       (SELECT coalesce(jsonb_object_agg(d.task_key, coalesce(d.output, '{}')), '{}')
        FROM task_runs d
        WHERE d.run_id = c.run_id AND d.task_key = ANY(t.depends_on)) AS upstream,
       c.lease_expires_at, c.timeout_at, c.heartbeat_timeout_seconds, c.n - 1 AS token_index
FROM claimed c
JOIN runs r ON r.run_id = c.run_id
JOIN task_runs t ON t.run_id = c.run_id AND t.task_key = c.task_key
JOIN workflow_versions v ON v.workflow_id = r.workflow_id AND v.version = r.version
ORDER BY c.n

-- name: find_attempt
-- Served by attempts_by_id.
SELECT run_id, task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash, lease_token_digest
FROM attempts WHERE attempt_id = %(attempt_id)s

-- name: heartbeat
-- Renews only a lease that is held now (same token, running, neither expired nor timed out);
-- zero rows means nothing was written.
WITH renewed AS (
    UPDATE attempts
    SET lease_expires_at = %(now)s + make_interval(secs => heartbeat_timeout_seconds),
        progress = coalesce(%(progress)s, progress)
    WHERE attempt_id = %(attempt_id)s AND lease_token_digest = %(digest)s
      AND status = 'running' AND lease_expires_at > %(now)s AND timeout_at > %(now)s
    RETURNING worker_id, lease_expires_at
), seen AS (
    UPDATE workers w SET last_seen_at = %(now)s
    FROM renewed WHERE w.worker_id = renewed.worker_id
)
SELECT lease_expires_at FROM renewed

-- name: due_attempts
-- Served by attempts_lease_due, attempts_timeout_due and attempts_schedule_due.
SELECT run_id, task_key, attempt, min(due) AS due FROM (
    (SELECT run_id, task_key, attempt, lease_expires_at AS due FROM attempts
     WHERE status = 'running' AND lease_expires_at <= %(now)s
     ORDER BY lease_expires_at LIMIT %(limit)s)
    UNION ALL
    (SELECT run_id, task_key, attempt, timeout_at FROM attempts
     WHERE status = 'running' AND timeout_at <= %(now)s
     ORDER BY timeout_at LIMIT %(limit)s)
    UNION ALL
    (SELECT run_id, task_key, attempt, schedule_deadline FROM attempts
     WHERE status = 'queued' AND schedule_deadline <= %(now)s
     ORDER BY schedule_deadline LIMIT %(limit)s)
) AS passed
GROUP BY run_id, task_key, attempt
ORDER BY min(due), run_id, task_key, attempt
LIMIT %(limit)s

-- name: page_workers
-- Workers by id (the primary key); in_flight from attempts_leased.
SELECT w.worker_id, w.queues, w.actions, w.first_seen_at, w.last_seen_at,
       (SELECT count(*) FROM attempts a
        WHERE a.status = 'running' AND a.worker_id = w.worker_id)::int AS in_flight
FROM workers w
WHERE w.worker_id > %(after)s
ORDER BY w.worker_id
LIMIT %(limit)s

-- name: queue_stats
-- Queued attempts from attempts_queued, running remote ones from attempts_leased.
SELECT q.queue,
       (SELECT count(*) FROM attempts a WHERE a.status = 'queued' AND a.queue = q.queue)::int
           AS queued,
       (SELECT count(*) FROM attempts a
        WHERE a.status = 'running' AND a.worker_id IS NOT NULL AND a.queue = q.queue)::int
           AS running,
       (SELECT min(a.started_at) FROM attempts a WHERE a.status = 'queued' AND a.queue = q.queue)
           AS oldest_queued_at
FROM queues q
ORDER BY q.queue
