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
INSERT INTO attempts (run_id, task_key, attempt, status, started_at, finished_at, output, error)
VALUES (%(run_id)s, %(task_key)s, %(attempt)s, %(status)s, %(started_at)s, %(finished_at)s,
        %(output)s, %(error)s)
ON CONFLICT (run_id, task_key, attempt) DO UPDATE
SET status = excluded.status, finished_at = excluded.finished_at, output = excluded.output,
    error = excluded.error

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

-- name: running_attempts
SELECT task_key, attempt, status, started_at, finished_at, output, error
FROM attempts WHERE run_id = %(run_id)s AND status = 'running'

-- name: list_attempts
SELECT task_key, attempt, status, started_at, finished_at, output, error
FROM attempts
WHERE run_id = %(run_id)s AND task_key = %(task_key)s AND attempt > %(after)s
ORDER BY attempt
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

-- name: runs_with_running_attempts
-- Served by attempts_running (partial on status = 'running'): few rows, even with a big backlog.
SELECT DISTINCT run_id FROM attempts WHERE status = 'running' ORDER BY run_id

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
