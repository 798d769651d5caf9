"""The invariants of SPEC §4–§5, each one SQL query that returns the rows violating it.

Every query reads the service's database (schema: migration ``0001_initial.sql``) and returns
one row per violation, the run id first. Commits are inferred from the events: one commit
appends one or more events, all with the commit's ``occurred_at``, so a run's commits are the
runs of consecutive events (by sequence) sharing one ``occurred_at``; there must be exactly
``revision`` of them.
"""

from __future__ import annotations

__all__ = ["EXERCISED", "INVARIANTS"]

_TERMINAL = "('succeeded', 'failed', 'canceled')"

# How much of the interesting paths the soak went through: events by type (one row each).
EXERCISED = """
    SELECT type, count(*), count(DISTINCT run_id) FROM state_events
     WHERE type IN ('run.recovered', 'attempt.interrupted', 'attempt.canceled', 'attempt.timed_out',
                    'task.waiting_retry', 'task.skipped', 'task.failed')
     GROUP BY type ORDER BY type"""

INVARIANTS: dict[str, str] = {
    # Each run's events are numbered exactly 1..last_sequence.
    "events_not_contiguous": """
        SELECT r.run_id::text, r.last_sequence, count(e.sequence), min(e.sequence),
               max(e.sequence)
          FROM workflow_runs r LEFT JOIN state_events e USING (run_id)
         GROUP BY r.run_id, r.last_sequence
        HAVING count(e.sequence) <> r.last_sequence OR coalesce(min(e.sequence), 0) <> 1
            OR coalesce(max(e.sequence), 0) <> r.last_sequence""",
    # revision ≥ 1, ≤ last_sequence, and equal to the number of commits the events show.
    "revision_not_commit_count": """
        WITH e AS (
            SELECT run_id, occurred_at,
                   lag(occurred_at) OVER (PARTITION BY run_id ORDER BY sequence) AS previous
              FROM state_events),
        c AS (
            SELECT run_id,
                   count(*) FILTER (WHERE previous IS NULL OR previous <> occurred_at) AS commits
              FROM e GROUP BY run_id)
        SELECT r.run_id::text, r.revision, r.last_sequence, coalesce(c.commits, 0)
          FROM workflow_runs r LEFT JOIN c USING (run_id)
         WHERE r.revision < 1 OR r.revision > r.last_sequence
            OR r.revision <> coalesce(c.commits, 0)""",
    # A terminal run's last event is its own terminal run.* event, and there is only one.
    "terminal_run_last_event": f"""
        SELECT r.run_id::text, r.status, e.type
          FROM workflow_runs r
          LEFT JOIN state_events e ON e.run_id = r.run_id AND e.sequence = r.last_sequence
         WHERE r.status IN {_TERMINAL} AND e.type IS DISTINCT FROM 'run.' || r.status""",
    "terminal_event_count": f"""
        SELECT r.run_id::text, r.status, count(e.sequence)
          FROM workflow_runs r
          LEFT JOIN state_events e ON e.run_id = r.run_id
               AND e.type IN ('run.succeeded', 'run.failed', 'run.canceled')
         GROUP BY r.run_id, r.status
        HAVING count(e.sequence) <> CASE WHEN r.status IN {_TERMINAL} THEN 1 ELSE 0 END""",
    # finished_at exactly on terminal runs (the schema's CHECK says so too).
    "finished_at_mismatch": f"""
        SELECT run_id::text, status, finished_at FROM workflow_runs
         WHERE (status IN {_TERMINAL}) <> (finished_at IS NOT NULL)""",
    # At most one live attempt per task (queued for a worker, or running anywhere).
    "several_running_attempts": """
        SELECT run_id::text, task_key, count(*) FROM attempts
         WHERE status IN ('queued', 'running')
         GROUP BY run_id, task_key HAVING count(*) > 1""",
    "running_attempt_in_terminal_run": f"""
        SELECT a.run_id::text, a.task_key, a.attempt, r.status
          FROM attempts a JOIN workflow_runs r USING (run_id)
         WHERE a.status IN ('queued', 'running') AND r.status IN {_TERMINAL}""",
    # Each attempt's outcome is recorded once: a late report (a frozen worker's, a fenced
    # process's) never adds a second one.
    "attempt_outcome_recorded_twice": """
        SELECT run_id::text, task_key, attempt, count(*) FROM state_events
         WHERE type IN ('attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                        'attempt.canceled', 'attempt.interrupted')
         GROUP BY run_id, task_key, attempt HAVING count(*) > 1""",
    # The epoch a run's events were written in never goes back (SPEC §14, §16): no write of a
    # deposed leader or of a replica whose shard was taken lands after its successor's.
    "event_epoch_went_back": """
        WITH e AS (
            SELECT run_id, sequence, type, epoch,
                   max(epoch) OVER (PARTITION BY run_id ORDER BY sequence
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
              FROM state_events WHERE epoch IS NOT NULL)
        SELECT run_id::text, sequence, type, epoch, before FROM e WHERE epoch < before""",
    # Two processes never execute one in-process task at once: an attempt of a mock or agent
    # task starts only once the one before it has ended (interrupted by its successor's
    # takeover, or finished), whichever processes ran them (``executed_by``).
    "in_process_attempts_overlap": """
        SELECT a.run_id::text, a.task_key, a.attempt, a.executed_by, b.executed_by,
               a.finished_at, b.started_at
          FROM attempts a JOIN attempts b ON b.run_id = a.run_id AND b.task_key = a.task_key
               AND b.attempt = a.attempt + 1
         WHERE a.action IN ('mock', 'agent')
           AND (a.finished_at IS NULL OR b.started_at < a.finished_at)""",
    # Attempts of a task are numbered exactly 1..attempt_count.
    "attempts_not_contiguous": """
        SELECT t.run_id::text, t.task_key, t.attempt_count, count(a.attempt), min(a.attempt),
               max(a.attempt)
          FROM task_runs t LEFT JOIN attempts a USING (run_id, task_key)
         GROUP BY t.run_id, t.task_key, t.attempt_count
        HAVING count(a.attempt) <> t.attempt_count
            OR coalesce(max(a.attempt), 0) <> t.attempt_count
            OR (count(a.attempt) > 0 AND min(a.attempt) <> 1)""",
    "terminal_run_with_unfinished_task": f"""
        SELECT t.run_id::text, r.status, t.task_key, t.status
          FROM task_runs t JOIN workflow_runs r USING (run_id)
         WHERE r.status IN {_TERMINAL} AND t.status NOT IN
               ('succeeded', 'failed', 'canceled', 'skipped')""",
    "succeeded_run_with_unsucceeded_task": """
        SELECT t.run_id::text, t.task_key, t.status
          FROM task_runs t JOIN workflow_runs r USING (run_id)
         WHERE r.status = 'succeeded' AND t.status <> 'succeeded'""",
    "failed_run_without_failed_task": """
        SELECT r.run_id::text FROM workflow_runs r
         WHERE r.status = 'failed' AND NOT EXISTS (
               SELECT 1 FROM task_runs t WHERE t.run_id = r.run_id AND t.status = 'failed')""",
    "succeeded_task_without_succeeded_attempt": """
        SELECT t.run_id::text, t.task_key, a.status
          FROM task_runs t
          LEFT JOIN attempts a ON a.run_id = t.run_id AND a.task_key = t.task_key
               AND a.attempt = t.attempt_count
         WHERE t.status = 'succeeded' AND a.status IS DISTINCT FROM 'succeeded'""",
    # A canceled run: tasks canceled or succeeded — or failed/skipped before the cancel was
    # requested (cancellation never produces them); no attempt still running.
    "canceled_run_task_status": """
        SELECT t.run_id::text, t.task_key, t.status
          FROM task_runs t JOIN workflow_runs r USING (run_id)
         WHERE r.status = 'canceled'
           AND t.status NOT IN ('canceled', 'succeeded', 'failed', 'skipped')""",
    "canceled_run_attempt_status": """
        SELECT a.run_id::text, a.task_key, a.attempt, a.status
          FROM attempts a JOIN workflow_runs r USING (run_id)
         WHERE r.status = 'canceled' AND a.status NOT IN
               ('canceled', 'succeeded', 'failed', 'timed_out', 'interrupted')""",
    "skipped_or_failed_after_cancel_request": """
        SELECT t.run_id::text, t.task_key, t.status, done.sequence, asked.sequence
          FROM task_runs t JOIN workflow_runs r USING (run_id)
          LEFT JOIN state_events asked ON asked.run_id = t.run_id
               AND asked.type = 'run.cancel_requested'
          LEFT JOIN state_events done ON done.run_id = t.run_id AND done.task_key = t.task_key
               AND done.type = 'task.' || t.status
         WHERE r.status = 'canceled' AND t.status IN ('skipped', 'failed')
           AND (done.sequence IS NULL OR asked.sequence IS NULL
                OR done.sequence > asked.sequence)""",
    # Interruption is not cancellation: nothing canceled without a cancel request.
    "canceled_without_cancel_request": """
        SELECT DISTINCT r.run_id::text, r.status
          FROM workflow_runs r JOIN state_events e USING (run_id)
         WHERE NOT r.cancel_requested
           AND (e.type IN ('run.canceled', 'task.canceled', 'attempt.canceled')
                OR r.status = 'canceled')""",
    "cancel_requested_not_canceled": f"""
        SELECT run_id::text, status FROM workflow_runs
         WHERE cancel_requested AND status IN {_TERMINAL} AND status <> 'canceled'""",
    "cancel_request_without_event": """
        SELECT r.run_id::text FROM workflow_runs r
         WHERE r.cancel_requested AND NOT EXISTS (
               SELECT 1 FROM state_events e
                WHERE e.run_id = r.run_id AND e.type = 'run.cancel_requested')""",
}
