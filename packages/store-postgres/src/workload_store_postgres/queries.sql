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

-- name: next_version
-- The workflow's next version number. The UPDATE locks the workflow's row: concurrent new
-- versions queue on it, and each (READ COMMITTED re-reads the row once the lock is granted)
-- takes the number after the one committed before it. No row: there is no such workflow.
UPDATE workflows
SET latest_version = latest_version + 1, updated_at = %(created_at)s,
    description = %(description)s
WHERE workflow_id = %(workflow_id)s
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

-- name: create_run
-- A new run in one statement (one transaction, one round trip): the run row, its tasks, its
-- first events and the idempotency record (none when the outcome parameters are null) — or
-- nothing, when the key is recorded already: then that record's row is the answer (replayed,
-- or refused as reused), and no row means the run was written. Rows come as JSON arrays.
WITH replay AS (
    SELECT operation, request_hash, status_code, response
    FROM idempotency_records
    WHERE principal = %(outcome_principal)s::text AND idempotency_key = %(outcome_key)s::text
), run AS (
    INSERT INTO workflow_runs
        (run_id, workflow_id, version, status, revision, last_sequence, input,
         cancel_requested, created_at, updated_at, started_at, finished_at, traceparent, shard)
    SELECT %(run_id)s::uuid, %(workflow_id)s::text, %(version)s::integer, %(status)s::text,
           %(revision)s::bigint, %(last_sequence)s::bigint, %(input)s::jsonb,
           %(cancel_requested)s::boolean, %(created_at)s::timestamptz,
           %(updated_at)s::timestamptz, %(started_at)s::timestamptz,
           %(finished_at)s::timestamptz, %(traceparent)s::text,
           workload_shard_of(%(run_id)s::uuid, (SELECT shards_total FROM cluster))
    WHERE NOT EXISTS (SELECT FROM replay)
    RETURNING run_id,
              CASE WHEN %(announce)s THEN pg_notify(%(channel)s, %(payload)s) END AS notified
), tasks AS (
    INSERT INTO task_runs
        (run_id, task_key, position, status, depends_on, attempt_count, max_attempts,
         next_attempt_at, started_at, finished_at, output, error)
    SELECT run.run_id, t.*
    FROM run, jsonb_to_recordset(%(tasks)s::jsonb) AS t(
        task_key text, position integer, status text, depends_on text[], attempt_count integer,
        max_attempts integer, next_attempt_at timestamptz, started_at timestamptz,
        finished_at timestamptz, output jsonb, error jsonb)
), events AS (
    INSERT INTO state_events (run_id, sequence, type, occurred_at, task_key, attempt, data, epoch)
    SELECT run.run_id, e.*
    FROM run, jsonb_to_recordset(%(event_rows)s::jsonb) AS e(
        sequence bigint, type text, occurred_at timestamptz, task_key text, attempt integer,
        data jsonb, epoch bigint)
), outcome AS (
    INSERT INTO idempotency_records
        (principal, idempotency_key, operation, request_hash, status_code, response, created_at)
    SELECT %(outcome_principal)s::text, %(outcome_key)s::text, %(outcome_operation)s::text,
           %(outcome_request_hash)s::text, %(outcome_status_code)s::integer,
           %(outcome_response)s::json, %(outcome_created_at)s::timestamptz
    FROM run WHERE %(outcome_principal)s::text IS NOT NULL
)
SELECT operation, request_hash, status_code, response FROM replay

-- name: commit_run
-- A run transition in one statement (one round trip). The run row is updated only if it is
-- still at the expected revision (the whole concurrency control of a run), its events
-- continue its history, every task the commit changes is one of the run's, and its writer's
-- epoch is current (the fence, §14); the task, attempt and event rows are joined to that
-- update, so no row — nothing written — when any condition fails (the caller finds out which).
WITH run AS (
    UPDATE workflow_runs
    SET status = %(status)s, revision = %(revision)s, last_sequence = last_sequence + %(events)s,
        cancel_requested = %(cancel_requested)s, updated_at = %(updated_at)s,
        started_at = %(started_at)s, finished_at = %(finished_at)s, output = %(output)s
    WHERE run_id = %(run_id)s AND revision = %(expected_revision)s
      AND (%(after_sequence)s::bigint IS NULL OR last_sequence = %(after_sequence)s::bigint)
      AND (SELECT count(*) FROM task_runs k
           WHERE k.run_id = %(run_id)s AND k.task_key = ANY(%(task_keys)s::text[]))
          = cardinality(%(task_keys)s::text[])
      AND (%(epoch)s::bigint IS NULL OR workload_fence(%(epoch)s))
      AND (%(shard_epoch)s::bigint IS NULL
           OR workload_shard_fence(%(shard)s, %(shard_epoch)s))
    RETURNING run_id, last_sequence,
              CASE WHEN %(announce)s THEN pg_notify(%(channel)s, %(payload)s) END AS notified
), tasks AS (
    UPDATE task_runs t
    SET status = n.status, attempt_count = n.attempt_count, next_attempt_at = n.next_attempt_at,
        started_at = n.started_at, finished_at = n.finished_at, output = n.output,
        error = n.error
    FROM run, jsonb_to_recordset(%(tasks)s::jsonb) AS n(
        task_key text, status text, attempt_count integer, next_attempt_at timestamptz,
        started_at timestamptz, finished_at timestamptz, output jsonb, error jsonb)
    WHERE t.run_id = run.run_id AND t.task_key = n.task_key
), attempts AS (
    -- A commit never writes a lease back: claims and heartbeats change those columns without
    -- a new revision, so the stored ones are newer than any snapshot's.
    INSERT INTO attempts (run_id, task_key, attempt, status, started_at, finished_at, output,
                          error, attempt_id, action, queue, heartbeat_timeout_seconds,
                          timeout_seconds, schedule_deadline, report_hash, paused_at,
                          paused_seconds, executed_by)
    SELECT run.run_id, a.*
    FROM run, jsonb_to_recordset(%(attempts)s::jsonb) AS a(
        task_key text, attempt integer, status text, started_at timestamptz,
        finished_at timestamptz, output jsonb, error jsonb, attempt_id uuid, action text,
        queue text, heartbeat_timeout_seconds double precision,
        timeout_seconds double precision, schedule_deadline timestamptz, report_hash text,
        paused_at timestamptz, paused_seconds double precision, executed_by text)
    ON CONFLICT (run_id, task_key, attempt) DO UPDATE
    SET status = excluded.status, finished_at = excluded.finished_at, output = excluded.output,
        error = excluded.error, report_hash = excluded.report_hash,
        paused_at = excluded.paused_at, paused_seconds = excluded.paused_seconds,
        executed_by = excluded.executed_by
    -- A lease's expiry decided on a read older than a heartbeat that renewed the lease refuses
    -- the statement (0013): judged on the row as locked here, a heartbeat's too.
    WHERE CASE WHEN excluded.status = 'interrupted' AND excluded.error->>'code' = 'lease_expired'
                    AND attempts.status = 'running'
                    AND attempts.lease_expires_at > excluded.finished_at
               THEN workload_lease_renewed() ELSE true END
), events AS (
    INSERT INTO state_events (run_id, sequence, type, occurred_at, task_key, attempt, data, epoch)
    SELECT run.run_id, e.*
    FROM run, jsonb_to_recordset(%(event_rows)s::jsonb) AS e(
        sequence bigint, type text, occurred_at timestamptz, task_key text, attempt integer,
        data jsonb, epoch bigint)
)
SELECT last_sequence, notified FROM run

-- name: ensure_queues
-- Remote work was queued: record its queues, and wake the claims waiting on other replicas
-- for it (%(work)s names its queues and actions; empty wakes every claim, ADR 0025).
WITH known AS (
    INSERT INTO queues (queue, created_at)
    SELECT DISTINCT q, %(now)s FROM unnest(%(queues)s::text[]) AS q
    ON CONFLICT (queue) DO NOTHING
)
SELECT CASE WHEN %(announce)s THEN pg_notify('workload_work', %(work)s) END AS notified

-- name: get_run
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at, last_sequence, model_calls, tool_calls,
       input_tokens, output_tokens, traceparent, output
FROM workflow_runs WHERE run_id = %(run_id)s

-- part: run_with_counts
-- The select list of get_run_with_counts and of every runs listing (each adds its own WHERE,
-- ORDER BY and LIMIT): a run row and its task counts by status, read in one snapshot.
SELECT run_id, workflow_id, version, status, revision, input, cancel_requested, created_at,
       updated_at, started_at, finished_at, model_calls, tool_calls, input_tokens,
       output_tokens, output,
       (SELECT coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
        FROM (SELECT status, count(*) AS n FROM task_runs t
              WHERE t.run_id = r.run_id GROUP BY status) AS counts) AS task_counts
FROM workflow_runs r

-- name: get_run_with_counts
-- with part: run_with_counts
WHERE run_id = %(run_id)s

-- name: run_exists
SELECT 1 FROM workflow_runs WHERE run_id = %(run_id)s

-- name: list_tasks
SELECT task_key, position, status, depends_on, attempt_count, max_attempts, next_attempt_at,
       started_at, finished_at, output, error, model_calls, tool_calls, input_tokens,
       output_tokens
FROM task_runs WHERE run_id = %(run_id)s AND position > %(after)s
ORDER BY position
LIMIT %(limit)s

-- name: get_task
SELECT task_key, position, status, depends_on, attempt_count, max_attempts, next_attempt_at,
       started_at, finished_at, output, error, model_calls, tool_calls, input_tokens,
       output_tokens
FROM task_runs WHERE run_id = %(run_id)s AND task_key = %(task_key)s

-- name: live_attempts
-- Served by attempts_live.
SELECT task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash, paused_at,
       paused_seconds, executed_by
FROM attempts WHERE run_id = %(run_id)s AND status IN ('queued', 'running')

-- name: list_attempts
SELECT task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash, paused_at,
       paused_seconds, executed_by
FROM attempts
WHERE run_id = %(run_id)s AND task_key = %(task_key)s AND attempt > %(after)s
ORDER BY attempt
LIMIT %(limit)s

-- name: list_run_attempts
-- Served by the primary key (run_id, task_key, attempt).
SELECT task_key, attempt, status, started_at, finished_at, output, error, attempt_id, action,
       queue, heartbeat_timeout_seconds, timeout_seconds, schedule_deadline, worker_id,
       claimed_at, lease_expires_at, timeout_at, progress, report_hash, executed_by
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

-- part: runs_window_asc
-- The end of a runs listing, oldest first: the creation window (exclusive; the store passes the
-- widest bounds when none is asked for), the keyset's order and the page's size.
  AND created_at > %(created_after)s AND created_at < %(created_before)s
ORDER BY created_at, run_id
LIMIT %(limit)s

-- part: runs_window_desc
-- The same, newest first (each index scanned backward).
  AND created_at > %(created_after)s AND created_at < %(created_before)s
ORDER BY created_at DESC, run_id DESC
LIMIT %(limit)s

-- name: page_runs
-- Served by workflow_runs_keyset.
-- Every runs listing (SPEC §6): keyset (created_at, run_id) in either direction, within an
-- exclusive creation window (the store passes the widest bounds when none is asked for, so every
-- variant is one range scan of its index; a backward scan serves newest first).
-- with part: run_with_counts
WHERE (created_at, run_id) > (%(after_at)s, %(after_id)s)
-- with part: runs_window_asc

-- name: page_runs_desc
-- Served by workflow_runs_keyset, scanned backward.
-- with part: run_with_counts
WHERE (created_at, run_id) < (%(after_at)s, %(after_id)s)
-- with part: runs_window_desc

-- name: page_runs_by_workflow
-- Served by workflow_runs_by_workflow.
-- with part: run_with_counts
WHERE workflow_id = %(workflow_id)s AND (created_at, run_id) > (%(after_at)s, %(after_id)s)
-- with part: runs_window_asc

-- name: page_runs_by_workflow_desc
-- Served by workflow_runs_by_workflow, scanned backward.
-- with part: run_with_counts
WHERE workflow_id = %(workflow_id)s AND (created_at, run_id) < (%(after_at)s, %(after_id)s)
-- with part: runs_window_desc

-- name: page_runs_by_status
-- Served by workflow_runs_by_status.
-- with part: run_with_counts
WHERE status = %(status)s AND (created_at, run_id) > (%(after_at)s, %(after_id)s)
-- with part: runs_window_asc

-- name: page_runs_by_status_desc
-- Served by workflow_runs_by_status, scanned backward.
-- with part: run_with_counts
WHERE status = %(status)s AND (created_at, run_id) < (%(after_at)s, %(after_id)s)
-- with part: runs_window_desc

-- name: page_runs_by_workflow_and_status
-- Served by workflow_runs_by_workflow (status filtered on the way).
-- with part: run_with_counts
WHERE workflow_id = %(workflow_id)s AND status = %(status)s
  AND (created_at, run_id) > (%(after_at)s, %(after_id)s)
-- with part: runs_window_asc

-- name: page_runs_by_workflow_and_status_desc
-- Served by workflow_runs_by_workflow, scanned backward (status filtered on the way).
-- with part: run_with_counts
WHERE workflow_id = %(workflow_id)s AND status = %(status)s
  AND (created_at, run_id) < (%(after_at)s, %(after_id)s)
-- with part: runs_window_desc

-- name: unfinished_runs
SELECT run_id FROM workflow_runs
WHERE status IN ('pending', 'running', 'waiting_retry', 'waiting_approval') AND run_id > %(after)s
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

-- name: unfinished_runs_in_shards
-- Served by workflow_runs_unfinished_by_shard: a replica's recovery and sweep (SPEC §16).
SELECT run_id FROM workflow_runs
WHERE shard = ANY(%(shards)s::integer[])
  AND status IN ('pending', 'running', 'waiting_retry', 'waiting_approval') AND run_id > %(after)s
ORDER BY run_id
LIMIT %(limit)s

-- name: runs_with_running_attempts_in_shards
-- Served by attempts_live, then each run's primary key.
SELECT DISTINCT a.run_id FROM attempts a JOIN workflow_runs r ON r.run_id = a.run_id
WHERE a.status = 'running' AND a.action = ANY(%(actions)s)
  AND r.shard = ANY(%(shards)s::integer[])
ORDER BY a.run_id

-- name: find_outcome
SELECT operation, request_hash, status_code, response
FROM idempotency_records WHERE principal = %(principal)s AND idempotency_key = %(key)s

-- name: insert_outcome
INSERT INTO idempotency_records
    (principal, idempotency_key, operation, request_hash, status_code, response, created_at)
VALUES (%(principal)s, %(key)s, %(operation)s, %(request_hash)s, %(status_code)s, %(response)s,
        %(created_at)s)

-- name: purge_outcomes
-- One bounded batch of the purge (never a long statement, whatever the backlog): the oldest
-- records past the limit, by idempotency_records_created; repeated until a batch comes short.
DELETE FROM idempotency_records
WHERE (principal, idempotency_key) IN (
    SELECT principal, idempotency_key FROM idempotency_records
    WHERE created_at < %(older_than)s
    ORDER BY created_at
    LIMIT %(limit)s)

-- name: finished_runs_due
-- Retention (SPEC §5): the oldest finished runs past the limit, served by workflow_runs_finished.
-- A run another transaction holds is left for the next batch rather than waited for. Its
-- events and its agents' steps (model and tool calls) measure how many rows it owns.
SELECT run_id, last_sequence + model_calls + tool_calls AS owned FROM workflow_runs
WHERE finished_at < %(finished_before)s AND status IN ('succeeded', 'failed', 'canceled')
ORDER BY finished_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: purge_run_approvals
-- Each child table is deleted by its key's run_id prefix (approvals_by_attempt for approvals).
DELETE FROM approvals WHERE run_id = ANY(%(run_ids)s)

-- name: purge_run_steps
DELETE FROM agent_steps WHERE run_id = ANY(%(run_ids)s)

-- name: purge_run_events
DELETE FROM state_events WHERE run_id = ANY(%(run_ids)s)

-- name: purge_run_attempts
DELETE FROM attempts WHERE run_id = ANY(%(run_ids)s)

-- name: purge_run_tasks
DELETE FROM task_runs WHERE run_id = ANY(%(run_ids)s)

-- name: purge_runs
DELETE FROM workflow_runs WHERE run_id = ANY(%(run_ids)s)

-- name: ensure_secret
INSERT INTO service_secrets (name, secret, created_at) VALUES (%(name)s, %(secret)s, now())
ON CONFLICT (name) DO NOTHING

-- name: get_secret
SELECT secret FROM service_secrets WHERE name = %(name)s

-- name: claimable
-- Whether work claim_attempts would hand out is queued, locked by another transaction or not:
-- after a claim that found nothing, true means it met work a commit held for a moment.
SELECT EXISTS (
           SELECT 1 FROM attempts a
           WHERE a.status = 'queued' AND a.queue = ANY(%(queues)s) AND a.action = ANY(%(actions)s)
             AND (a.schedule_deadline IS NULL OR a.schedule_deadline > %(now)s))
       OR EXISTS (
           SELECT 1 FROM agent_steps s JOIN workflow_runs r ON r.run_id = s.run_id
           WHERE s.status = 'running' AND s.queue IS NOT NULL AND s.worker_id IS NULL
             AND s.queue = ANY(%(queues)s) AND s.action = ANY(%(actions)s) AND s.deadline > %(now)s
             AND (s.schedule_deadline IS NULL OR s.schedule_deadline > %(now)s)
             AND NOT r.cancel_requested) AS claimable

-- name: claim_attempts
-- One statement: pick the oldest matching queued work, skipping rows (attempts or their runs,
-- agents' tool calls) another transaction holds, so two claimers never take the same work and
-- never wait (no deadlock with a commit, which locks the run first); lease each under its
-- token's digest; record the worker. Task attempts and agents' remote tool calls are one FIFO
-- by ready time (SPEC §10; on a tie the tool call first, its agent is waiting): each kind's
-- oldest candidates are locked, then the oldest of both are taken, the n-th getting the n-th
-- token. Task attempts: one commit per run (revision + 1, one attempt.started per attempt).
-- Work whose schedule-to-start deadline (or a tool call's attempt deadline) has passed is not
-- handed out: the lease reaper fails it (SPEC §10), and a claim in between must not win. Nor
-- is a tool call of a run whose cancel was requested: its agent is about to stop (a claim that
-- read the run just before the request committed comes first in any serial order).
WITH tool_picked AS (
    SELECT s.run_id, s.task_key, s.attempt, s.sequence, s.started_at, s.step_id
    FROM agent_steps s JOIN workflow_runs r ON r.run_id = s.run_id
    WHERE s.status = 'running' AND s.queue IS NOT NULL AND s.worker_id IS NULL
      AND s.queue = ANY(%(queues)s) AND s.action = ANY(%(actions)s) AND s.deadline > %(now)s
      AND (s.schedule_deadline IS NULL OR s.schedule_deadline > %(now)s)
      AND NOT r.cancel_requested
    ORDER BY s.started_at, s.step_id
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
), picked AS (
    SELECT a.run_id, a.task_key, a.attempt, a.started_at
    FROM attempts a JOIN workflow_runs r ON r.run_id = a.run_id
    WHERE a.status = 'queued' AND a.queue = ANY(%(queues)s) AND a.action = ANY(%(actions)s)
      AND (a.schedule_deadline IS NULL OR a.schedule_deadline > %(now)s)
    ORDER BY a.started_at, a.run_id, a.task_key, a.attempt
    LIMIT %(limit)s
    FOR UPDATE OF a, r SKIP LOCKED
), chosen AS (
    SELECT w.*,
           row_number() OVER (ORDER BY w.started_at, w.rank, w.step_id, w.run_id, w.task_key,
                                       w.attempt) AS n
    FROM (
        SELECT p.started_at, 0 AS rank, p.step_id, p.run_id, p.task_key, p.attempt, p.sequence
        FROM tool_picked p
        UNION ALL
        SELECT p.started_at, 1, NULL, p.run_id, p.task_key, p.attempt, NULL FROM picked p
    ) w
    ORDER BY n
    LIMIT %(limit)s
), tool_claimed AS (
    UPDATE agent_steps s
    SET worker_id = %(worker_id)s, claimed_at = %(now)s,
        lease_expires_at = %(now)s + make_interval(secs => s.heartbeat_timeout_seconds),
        timeout_at = s.deadline, lease_token_digest = (%(digests)s::text[])[t.n]
    FROM chosen t
    WHERE t.rank = 0 AND s.run_id = t.run_id AND s.task_key = t.task_key
      AND s.attempt = t.attempt AND s.sequence = t.sequence
    RETURNING s.step_id, s.run_id, s.task_key, s.attempt, s.queue, s.action, s.request,
              s.tool_call_id, s.lease_expires_at, s.timeout_at, s.heartbeat_timeout_seconds,
              s.started_at, t.n
), stamped AS (
    SELECT c.run_id, c.task_key, c.attempt, c.started_at, c.n,
           count(*) OVER (PARTITION BY c.run_id) AS per_run,
           row_number() OVER (PARTITION BY c.run_id ORDER BY c.task_key, c.attempt) AS nth
    FROM chosen c
    WHERE c.rank = 1
), runs AS (
    UPDATE workflow_runs r
    SET revision = r.revision + 1, last_sequence = r.last_sequence + s.per_run,
        updated_at = %(now)s
    FROM (SELECT DISTINCT run_id, per_run FROM stamped) s
    WHERE r.run_id = s.run_id
    RETURNING r.run_id, r.workflow_id, r.version, r.input, r.last_sequence, r.traceparent
), claimed AS (
    UPDATE attempts a
    SET status = 'running', worker_id = %(worker_id)s, claimed_at = %(now)s,
        lease_expires_at = %(now)s + make_interval(secs => a.heartbeat_timeout_seconds),
        timeout_at = %(now)s + make_interval(secs => a.timeout_seconds),
        lease_token_digest = (%(digests)s::text[])[s.n]
    FROM stamped s
    WHERE a.run_id = s.run_id AND a.task_key = s.task_key AND a.attempt = s.attempt
    RETURNING a.run_id, a.task_key, a.attempt, a.attempt_id, a.queue, a.action,
              a.lease_expires_at, a.timeout_at, a.heartbeat_timeout_seconds, a.started_at,
              s.n, s.nth, s.per_run
), events AS (
    INSERT INTO state_events (run_id, sequence, type, occurred_at, task_key, attempt, data)
    SELECT c.run_id, r.last_sequence - c.per_run + c.nth, 'attempt.started', %(now)s,
           c.task_key, c.attempt, jsonb_build_object('worker_id', %(worker_id)s::text)
    FROM claimed c JOIN runs r ON r.run_id = c.run_id
), seen AS (
    -- The worker is recorded when it claims something, or — a request's first look only
    -- (%(record_seen)s) — is new, changed what it serves, or was last recorded SEEN_SECONDS
    -- ago: a claim that finds nothing otherwise writes nothing (it is no write transaction;
    -- woken claims that find the work taken are many).
    INSERT INTO workers (worker_id, queues, actions, first_seen_at, last_seen_at)
    SELECT %(worker_id)s, %(queues)s, %(actions)s, %(now)s, %(now)s
    WHERE EXISTS (SELECT 1 FROM chosen)
       OR %(record_seen)s AND NOT EXISTS (
           SELECT 1 FROM workers w
           WHERE w.worker_id = %(worker_id)s AND w.queues = %(queues)s
             AND w.actions = %(actions)s
             AND w.last_seen_at > %(now)s - make_interval(secs => %(seen_seconds)s))
    ON CONFLICT (worker_id) DO UPDATE
    SET queues = excluded.queues, actions = excluded.actions, last_seen_at = excluded.last_seen_at
)
SELECT 'tool_call' AS kind, c.step_id AS attempt_id, c.run_id, r.workflow_id, r.version,
       c.task_key, c.attempt, c.queue, c.action,
       coalesce(c.request -> 'arguments', '{}') AS input, r.input AS run_input,
       '{}'::jsonb AS upstream, c.lease_expires_at, c.timeout_at, c.heartbeat_timeout_seconds,
       c.n - 1 AS token_index, c.tool_call_id, c.request ->> 'tool' AS tool,
       coalesce(c.request -> 'arguments', '{}') AS arguments, c.started_at AS queued_at,
       r.traceparent
FROM tool_claimed c JOIN workflow_runs r ON r.run_id = c.run_id
UNION ALL
SELECT 'task', c.attempt_id, c.run_id, r.workflow_id, r.version, c.task_key, c.attempt, c.queue,
       c.action, coalesce(v.definition -> 'tasks' -> t.position -> 'input', '{}') AS input,
       r.input AS run_input,
       (SELECT coalesce(jsonb_object_agg(d.task_key, coalesce(d.output, '{}')), '{}')
        FROM task_runs d
        WHERE d.run_id = c.run_id AND d.task_key = ANY(t.depends_on)) AS upstream,
       c.lease_expires_at, c.timeout_at, c.heartbeat_timeout_seconds, c.n - 1 AS token_index,
       NULL, NULL, NULL, c.started_at AS queued_at, r.traceparent
FROM claimed c
JOIN runs r ON r.run_id = c.run_id
JOIN task_runs t ON t.run_id = c.run_id AND t.task_key = c.task_key
JOIN workflow_versions v ON v.workflow_id = r.workflow_id AND v.version = r.version
ORDER BY token_index

-- name: find_attempt
-- Served by attempts_by_id and the run's primary key. The run's position is read in the same
-- statement (one snapshot), so that its runner can tell whether it missed anything else.
SELECT a.run_id, a.task_key, a.attempt, a.status, a.started_at, a.finished_at, a.output,
       a.error, a.attempt_id, a.action, a.queue, a.heartbeat_timeout_seconds,
       a.timeout_seconds, a.schedule_deadline, a.worker_id, a.claimed_at, a.lease_expires_at,
       a.timeout_at, a.progress, a.report_hash, a.lease_token_digest, a.paused_at,
       a.paused_seconds, a.executed_by, r.revision AS run_revision,
       r.last_sequence AS run_last_sequence, r.updated_at AS run_updated_at
FROM attempts a JOIN workflow_runs r ON r.run_id = a.run_id
WHERE a.attempt_id = %(attempt_id)s

-- name: heartbeat
-- Renews only a lease that is held now (same token, running, neither expired nor timed out),
-- of a task attempt or of an agent's tool call (whose run's cancel was not requested: a
-- canceled run's attempts end in the request's commit, its agent's calls with the agent);
-- zero rows means nothing was written.
WITH renewed AS (
    UPDATE attempts
    SET lease_expires_at = %(now)s + make_interval(secs => heartbeat_timeout_seconds),
        progress = coalesce(%(progress)s, progress)
    WHERE attempt_id = %(attempt_id)s AND lease_token_digest = %(digest)s
      AND status = 'running' AND lease_expires_at > %(now)s AND timeout_at > %(now)s
    RETURNING worker_id, lease_expires_at
), tool_renewed AS (
    UPDATE agent_steps
    SET lease_expires_at = %(now)s + make_interval(secs => heartbeat_timeout_seconds),
        progress = coalesce(%(progress)s, progress)
    WHERE step_id = %(attempt_id)s AND lease_token_digest = %(digest)s
      AND status = 'running' AND lease_expires_at > %(now)s AND timeout_at > %(now)s
      AND NOT EXISTS (SELECT 1 FROM workflow_runs r
                      WHERE r.run_id = agent_steps.run_id AND r.cancel_requested)
    RETURNING worker_id, lease_expires_at
), held AS (
    SELECT * FROM renewed UNION ALL SELECT * FROM tool_renewed
), seen AS (
    UPDATE workers w SET last_seen_at = %(now)s
    FROM held WHERE w.worker_id = held.worker_id
)
SELECT lease_expires_at FROM held

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
       ((SELECT count(*) FROM attempts a
         WHERE a.status = 'running' AND a.worker_id = w.worker_id)
        + (SELECT count(*) FROM agent_steps s
           WHERE s.status = 'running' AND s.worker_id = w.worker_id))::int AS in_flight
FROM workers w
WHERE w.worker_id > %(after)s
ORDER BY w.worker_id
LIMIT %(limit)s

-- name: forget_workers
-- Workers not seen since %(seen_before)s that hold no work (workers_last_seen, attempts_leased,
-- agent_steps_leased): ADR 0023.
DELETE FROM workers w
WHERE w.last_seen_at < %(seen_before)s
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.status = 'running' AND a.worker_id = w.worker_id)
  AND NOT EXISTS (SELECT 1 FROM agent_steps s
                  WHERE s.status = 'running' AND s.worker_id = w.worker_id)

-- name: queue_stats
-- Task attempts from attempts_queued and attempts_leased; agents' remote tool calls from
-- agent_steps_queued and agent_steps_leased.
SELECT q.queue,
       ((SELECT count(*) FROM attempts a WHERE a.status = 'queued' AND a.queue = q.queue)
        + (SELECT count(*) FROM agent_steps s
           WHERE s.status = 'running' AND s.queue = q.queue AND s.worker_id IS NULL))::int
           AS queued,
       ((SELECT count(*) FROM attempts a
         WHERE a.status = 'running' AND a.worker_id IS NOT NULL AND a.queue = q.queue)
        + (SELECT count(*) FROM agent_steps s
           WHERE s.status = 'running' AND s.worker_id IS NOT NULL AND s.queue = q.queue))::int
           AS running,
       least((SELECT min(a.started_at) FROM attempts a
              WHERE a.status = 'queued' AND a.queue = q.queue),
             (SELECT min(s.started_at) FROM agent_steps s
              WHERE s.status = 'running' AND s.queue = q.queue AND s.worker_id IS NULL))
           AS oldest_queued_at
FROM queues q
ORDER BY q.queue

-- name: list_steps
-- One attempt's journal (the primary key).
SELECT run_id, task_key, attempt, sequence, kind, status, request, request_hash, started_at,
       response, usage, tool_call_id, finished_at, action, queue, heartbeat_timeout_seconds,
       deadline, schedule_deadline, worker_id, claimed_at, lease_expires_at, timeout_at,
       progress, report_hash, lease_end
FROM agent_steps
WHERE run_id = %(run_id)s AND task_key = %(task_key)s AND attempt = %(attempt)s
ORDER BY sequence

-- name: page_steps
-- A task's steps by (attempt, sequence) (the primary key).
SELECT run_id, task_key, attempt, sequence, kind, status, request, request_hash, started_at,
       response, usage, tool_call_id, finished_at, action, queue, heartbeat_timeout_seconds,
       deadline, schedule_deadline, worker_id, claimed_at, lease_expires_at, timeout_at,
       progress, report_hash, lease_end
FROM agent_steps
WHERE run_id = %(run_id)s AND task_key = %(task_key)s
  AND (attempt, sequence) > (%(after_attempt)s, %(after_sequence)s)
ORDER BY attempt, sequence
LIMIT %(limit)s

-- name: insert_step
-- Only while the attempt is running: FOR SHARE waits for a commit that is ending it (and
-- re-checks its status after), so a step is never added behind the commit that closes them.
INSERT INTO agent_steps (run_id, task_key, attempt, sequence, step_id, kind, status, request,
                         request_hash, started_at, tool_call_id, action, queue,
                         heartbeat_timeout_seconds, deadline, schedule_deadline)
SELECT %(run_id)s, %(task_key)s, %(attempt)s, %(sequence)s, %(step_id)s, %(kind)s, 'running',
       %(request)s, %(request_hash)s, %(started_at)s, %(tool_call_id)s, %(action)s, %(queue)s,
       %(heartbeat_timeout_seconds)s, %(deadline)s, %(schedule_deadline)s
WHERE EXISTS (SELECT 1 FROM attempts
              WHERE run_id = %(run_id)s AND task_key = %(task_key)s AND attempt = %(attempt)s
                AND status = 'running'
              FOR SHARE)
  AND (%(epoch)s::bigint IS NULL OR workload_fence(%(epoch)s))
  AND (%(shard_epoch)s::bigint IS NULL OR workload_shard_fence(%(shard)s, %(shard_epoch)s))
ON CONFLICT DO NOTHING
RETURNING run_id, task_key, attempt, sequence, kind, status, request, request_hash, started_at,
          response, usage, tool_call_id, finished_at, action, queue, heartbeat_timeout_seconds,
          deadline, schedule_deadline, worker_id, claimed_at, lease_expires_at, timeout_at,
          progress, report_hash, lease_end

-- name: lock_run_for_usage
-- Usage is added to the run row: lock it first, in the order a commit locks (run, then task,
-- then steps), so a step's end and a commit never deadlock.
SELECT 1 FROM workflow_runs WHERE run_id = %(run_id)s FOR NO KEY UPDATE

-- name: finish_step
-- Ends a running step; a worker's report only under its held lease (and not once its run's
-- cancel was requested), the reaper only past a deadline. Zero rows: nothing was written.
UPDATE agent_steps s
SET status = %(status)s, response = %(response)s, usage = %(usage)s,
    finished_at = %(finished_at)s, report_hash = %(report_hash)s, lease_end = %(lease_end)s
WHERE s.run_id = %(run_id)s AND s.task_key = %(task_key)s AND s.attempt = %(attempt)s
  AND s.sequence = %(sequence)s AND s.status = 'running'
  AND (%(digest)s::text IS NULL
       OR (s.lease_token_digest = %(digest)s AND s.lease_expires_at > %(finished_at)s
           AND s.timeout_at > %(finished_at)s
           AND NOT EXISTS (SELECT 1 FROM workflow_runs r
                           WHERE r.run_id = s.run_id AND r.cancel_requested)))
  AND (NOT %(deadline_passed)s
       OR s.lease_expires_at <= %(finished_at)s OR s.timeout_at <= %(finished_at)s
       OR (s.worker_id IS NULL AND s.schedule_deadline <= %(finished_at)s))
  AND (%(epoch)s::bigint IS NULL OR workload_fence(%(epoch)s))
  AND (%(shard_epoch)s::bigint IS NULL OR workload_shard_fence(%(shard)s, %(shard_epoch)s))
RETURNING run_id, task_key, attempt, sequence, kind, status, request, request_hash, started_at,
          response, usage, tool_call_id, finished_at, action, queue, heartbeat_timeout_seconds,
          deadline, schedule_deadline, worker_id, claimed_at, lease_expires_at, timeout_at,
          progress, report_hash, lease_end,
          CASE WHEN %(announce)s THEN pg_notify(%(channel)s, %(payload)s) END AS notified

-- name: add_task_usage
UPDATE task_runs
SET model_calls = model_calls + %(model_calls)s, tool_calls = tool_calls + %(tool_calls)s,
    input_tokens = input_tokens + %(input_tokens)s,
    output_tokens = output_tokens + %(output_tokens)s
WHERE run_id = %(run_id)s AND task_key = %(task_key)s

-- name: add_run_usage
UPDATE workflow_runs
SET model_calls = model_calls + %(model_calls)s, tool_calls = tool_calls + %(tool_calls)s,
    input_tokens = input_tokens + %(input_tokens)s,
    output_tokens = output_tokens + %(output_tokens)s
WHERE run_id = %(run_id)s

-- name: close_steps
-- A commit ended an agent attempt: its running steps end failed (their workers learn it at
-- their next report: canceled or timed_out with their attempt, else finished), and what they
-- count is added to the task and the run. Returns the
-- remote tool calls it closed (their ends are counted once the commit is, SPEC §12).
WITH closed AS (
    UPDATE agent_steps
    SET status = 'failed', finished_at = %(finished_at)s,
        response = jsonb_build_object('error', 'the attempt ended (' || %(attempt_status)s || ')'),
        lease_end = CASE WHEN %(attempt_status)s IN ('canceled', 'timed_out')
                         THEN %(attempt_status)s ELSE 'finished' END
    WHERE run_id = %(run_id)s AND task_key = %(task_key)s AND attempt = %(attempt)s
      AND status = 'running'
    RETURNING run_id, task_key, attempt, sequence, kind, status, request, request_hash,
              started_at, response, usage, tool_call_id, finished_at, action, queue,
              heartbeat_timeout_seconds, deadline, schedule_deadline, worker_id, claimed_at,
              lease_expires_at, timeout_at, progress, report_hash, lease_end
), counted AS (
    SELECT count(*) FILTER (WHERE kind = 'model_call') AS model_calls,
           count(*) FILTER (WHERE kind = 'tool_call') AS tool_calls
    FROM closed
), tasks AS (
    UPDATE task_runs t
    SET model_calls = t.model_calls + c.model_calls, tool_calls = t.tool_calls + c.tool_calls
    FROM counted c
    WHERE t.run_id = %(run_id)s AND t.task_key = %(task_key)s
      AND c.model_calls + c.tool_calls > 0
), runs AS (
    UPDATE workflow_runs r
    SET model_calls = r.model_calls + c.model_calls, tool_calls = r.tool_calls + c.tool_calls
    FROM counted c
    WHERE r.run_id = %(run_id)s AND c.model_calls + c.tool_calls > 0
)
SELECT * FROM closed WHERE kind = 'tool_call' AND queue IS NOT NULL ORDER BY sequence

-- name: find_tool_call
-- Served by agent_steps_by_id.
SELECT run_id, task_key, attempt, sequence, kind, status, request, request_hash, started_at,
       response, usage, tool_call_id, finished_at, action, queue, heartbeat_timeout_seconds,
       deadline, schedule_deadline, worker_id, claimed_at, lease_expires_at, timeout_at,
       progress, report_hash, lease_end, lease_token_digest,
       (SELECT r.cancel_requested FROM workflow_runs r WHERE r.run_id = s.run_id)
           AS cancel_requested
FROM agent_steps s WHERE step_id = %(step_id)s AND queue IS NOT NULL

-- name: due_tool_calls
-- Served by agent_steps_lease_due, agent_steps_timeout_due and agent_steps_schedule_due.
SELECT s.run_id, s.task_key, s.attempt, s.sequence, s.kind, s.status, s.request,
       s.request_hash, s.started_at, s.response, s.usage, s.tool_call_id, s.finished_at,
       s.action, s.queue, s.heartbeat_timeout_seconds, s.deadline, s.schedule_deadline,
       s.worker_id, s.claimed_at, s.lease_expires_at, s.timeout_at, s.progress, s.report_hash,
       s.lease_end
FROM agent_steps s JOIN (
    SELECT step_id, min(due) AS due FROM (
        (SELECT step_id, lease_expires_at AS due FROM agent_steps
         WHERE status = 'running' AND lease_expires_at <= %(now)s
         ORDER BY lease_expires_at LIMIT %(limit)s)
        UNION ALL
        (SELECT step_id, timeout_at FROM agent_steps
         WHERE status = 'running' AND timeout_at <= %(now)s
         ORDER BY timeout_at LIMIT %(limit)s)
        UNION ALL
        (SELECT step_id, schedule_deadline FROM agent_steps
         WHERE status = 'running' AND worker_id IS NULL AND schedule_deadline <= %(now)s
         ORDER BY schedule_deadline LIMIT %(limit)s)
    ) AS passed
    GROUP BY step_id
    ORDER BY min(due), step_id
    LIMIT %(limit)s
) d ON d.step_id = s.step_id
ORDER BY d.due, s.step_id


-- name: live_approvals
-- Served by approvals_by_attempt: the approvals of the run's live attempts.
SELECT p.approval_id, p.run_id, p.task_key, p.attempt, p.tool, p.tool_call_id, p.arguments,
       p.arguments_digest, p.status, p.requested_at, p.expires_at, p.decided_by, p.decided_at,
       p.comment
FROM approvals p JOIN attempts a
  ON a.run_id = p.run_id AND a.task_key = p.task_key AND a.attempt = p.attempt
WHERE p.run_id = %(run_id)s AND a.status IN ('queued', 'running')

-- name: upsert_approval
-- A commit asks for an approval or decides one: a decision only of a pending approval.
INSERT INTO approvals (approval_id, run_id, task_key, attempt, tool, tool_call_id, arguments,
                       arguments_digest, status, requested_at, expires_at, decided_by,
                       decided_at, comment)
VALUES (%(approval_id)s, %(run_id)s, %(task_key)s, %(attempt)s, %(tool)s, %(tool_call_id)s,
        %(arguments)s, %(arguments_digest)s, %(status)s, %(requested_at)s, %(expires_at)s,
        %(decided_by)s, %(decided_at)s, %(comment)s)
ON CONFLICT (approval_id) DO UPDATE
SET status = excluded.status, decided_by = excluded.decided_by,
    decided_at = excluded.decided_at, comment = excluded.comment
WHERE approvals.status = 'pending'

-- name: find_approval
SELECT approval_id, run_id, task_key, attempt, tool, tool_call_id, arguments, arguments_digest,
       status, requested_at, expires_at, decided_by, decided_at, comment
FROM approvals WHERE approval_id = %(approval_id)s

-- name: page_approvals
-- Served by approvals_keyset.
SELECT approval_id, run_id, task_key, attempt, tool, tool_call_id, arguments, arguments_digest,
       status, requested_at, expires_at, decided_by, decided_at, comment
FROM approvals
WHERE (requested_at, approval_id) > (%(after_at)s, %(after_id)s)
ORDER BY requested_at, approval_id
LIMIT %(limit)s

-- name: page_approvals_by_status
-- Served by approvals_by_status.
SELECT approval_id, run_id, task_key, attempt, tool, tool_call_id, arguments, arguments_digest,
       status, requested_at, expires_at, decided_by, decided_at, comment
FROM approvals
WHERE status = %(status)s AND (requested_at, approval_id) > (%(after_at)s, %(after_id)s)
ORDER BY requested_at, approval_id
LIMIT %(limit)s

-- name: due_approvals
-- Served by approvals_due.
SELECT approval_id, run_id, task_key, attempt, tool, tool_call_id, arguments, arguments_digest,
       status, requested_at, expires_at, decided_by, decided_at, comment
FROM approvals
WHERE status = 'pending' AND expires_at <= %(now)s
ORDER BY expires_at, approval_id
LIMIT %(limit)s

-- name: insert_draft
INSERT INTO drafts (draft_id, status, prompt, model, script, requested_workflow_id, workflow_id,
                    created_by, created_at, updated_at)
VALUES (%(draft_id)s, %(status)s, %(prompt)s, %(model)s, %(script)s, %(requested_workflow_id)s,
        %(workflow_id)s, %(created_by)s, %(created_at)s, %(updated_at)s)

-- name: find_draft
SELECT draft_id, status, prompt, model, script, requested_workflow_id, workflow_id, definition,
       definition_hash, problems, model_calls, input_tokens, output_tokens, version, created_by,
       created_at, updated_at
FROM drafts WHERE draft_id = %(draft_id)s

-- name: lock_draft
SELECT draft_id, status, prompt, model, script, requested_workflow_id, workflow_id, definition,
       definition_hash, problems, model_calls, input_tokens, output_tokens, version, created_by,
       created_at, updated_at
FROM drafts WHERE draft_id = %(draft_id)s
FOR UPDATE

-- name: page_drafts
-- Served by drafts_keyset.
SELECT draft_id, status, prompt, model, script, requested_workflow_id, workflow_id, definition,
       definition_hash, problems, model_calls, input_tokens, output_tokens, version, created_by,
       created_at, updated_at
FROM drafts
WHERE (created_at, draft_id) > (%(after_at)s, %(after_id)s)
ORDER BY created_at, draft_id
LIMIT %(limit)s

-- name: generating_drafts
-- Served by drafts_generating.
SELECT draft_id FROM drafts WHERE status = 'generating' ORDER BY draft_id

-- name: finish_draft
-- A generation's end, written once (only while the draft is still generating).
UPDATE drafts
SET status = %(status)s, workflow_id = %(workflow_id)s, definition = %(definition)s,
    definition_hash = %(definition_hash)s, problems = %(problems)s,
    model_calls = %(model_calls)s, input_tokens = %(input_tokens)s,
    output_tokens = %(output_tokens)s, updated_at = %(updated_at)s
WHERE draft_id = %(draft_id)s AND status = 'generating'
RETURNING draft_id

-- name: settle_draft
-- Approved (with its version) or rejected; the caller holds the row lock (lock_draft).
UPDATE drafts
SET status = %(status)s, version = %(version)s, workflow_id = %(workflow_id)s,
    updated_at = %(updated_at)s
WHERE draft_id = %(draft_id)s

-- name: activity
-- Runs not yet terminal from workflow_runs_unfinished; workers seen lately, or holding work
-- now (attempts_leased, agent_steps_leased), as worker_status says; pending approvals, and
-- the oldest one's request time, from approvals_due (the partial index of the pending ones).
SELECT (SELECT count(*) FROM workflow_runs
        WHERE status IN ('pending', 'running', 'waiting_retry', 'waiting_approval'))::int AS runs_active,
       (SELECT count(*) FROM workers w
        WHERE w.last_seen_at >= %(since)s
           OR EXISTS (SELECT 1 FROM attempts a
                      WHERE a.status = 'running' AND a.worker_id = w.worker_id)
           OR EXISTS (SELECT 1 FROM agent_steps s
                      WHERE s.status = 'running' AND s.worker_id = w.worker_id))::int
           AS workers_active,
       (SELECT count(*) FROM approvals WHERE status = 'pending')::int AS approvals_pending,
       (SELECT min(requested_at) FROM approvals WHERE status = 'pending')
           AS oldest_approval_requested_at

-- name: fence
-- Whether ``epoch`` is still the current coordinator epoch (after a fenced write wrote nothing).
SELECT workload_fence(%(epoch)s) AS current

-- name: shard_fence
-- Whether ``epoch`` is still shard ``shard``'s current epoch (after a fenced write wrote nothing).
SELECT workload_shard_fence(%(shard)s, %(epoch)s) AS current

-- name: cluster_members
-- The live replicas (their session alive and their lease running) with the shards they hold,
-- and the number of shards (GET /api/v1/cluster, SPEC §16).
SELECT c.shards_total, r.replica_id, r.started_at, r.last_seen_at,
       coalesce((SELECT array_agg(s.shard ORDER BY s.shard) FROM shards s
                 WHERE s.owner = r.replica_id AND s.lease_expires_at > now()), '{}') AS shards
FROM cluster c
LEFT JOIN replicas r ON r.lease_expires_at > now()
     AND EXISTS (SELECT 1 FROM pg_stat_activity a
                 WHERE a.pid = r.backend_pid AND a.backend_start = r.backend_start)
ORDER BY r.replica_id

-- name: cluster_leader
-- A coordinator leading by itself (§7, §14): seen from outside as the one member.
SELECT leader, since, renewed_at FROM coordinator
WHERE leader IS NOT NULL AND lease_expires_at > now()

-- name: lock_latest_version
-- A workflow's row, locked (applies of one workflow queue on it), and its latest version's hash.
SELECT w.latest_version, v.definition_hash
FROM workflows w
JOIN workflow_versions v ON v.workflow_id = w.workflow_id AND v.version = w.latest_version
WHERE w.workflow_id = %(workflow_id)s
FOR UPDATE OF w

-- name: sweep_console_sessions
DELETE FROM console_sessions WHERE coalesce(revoked_at, expires_at) < %(before)s

-- name: insert_console_session
INSERT INTO console_sessions
    (session_id, digest, principal_id, created_at, expires_at, revoked_at)
VALUES (%(session_id)s, %(digest)s, %(principal_id)s, %(created_at)s, %(expires_at)s,
        %(revoked_at)s)

-- name: find_console_session
SELECT session_id, digest, principal_id, created_at, expires_at, revoked_at
FROM console_sessions WHERE digest = %(digest)s

-- name: live_console_sessions
SELECT session_id, digest, principal_id, created_at, expires_at, revoked_at
FROM console_sessions WHERE revoked_at IS NULL AND expires_at > %(now)s
ORDER BY created_at DESC, session_id DESC

-- name: revoke_console_session
UPDATE console_sessions SET revoked_at = %(now)s
WHERE session_id = %(session_id)s AND revoked_at IS NULL AND expires_at > %(now)s
