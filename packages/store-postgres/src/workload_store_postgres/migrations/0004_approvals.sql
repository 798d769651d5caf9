-- 0004: approvals of agents' tool calls (SPEC §11): the waiting_approval statuses, the
-- approval events, the approvals themselves (written by the run's commits), and the time an
-- agent attempt spent waiting for them. Each index names the query it serves.

ALTER TABLE workflow_runs DROP CONSTRAINT workflow_runs_status_check;
ALTER TABLE workflow_runs ADD CONSTRAINT workflow_runs_status_check CHECK (status IN
    ('pending', 'running', 'waiting_retry', 'waiting_approval', 'succeeded', 'failed',
     'canceled'));
ALTER TABLE task_runs DROP CONSTRAINT task_runs_status_check;
ALTER TABLE task_runs ADD CONSTRAINT task_runs_status_check CHECK (status IN
    ('pending', 'running', 'waiting_retry', 'waiting_approval', 'succeeded', 'failed',
     'canceled', 'skipped'));
-- Start-up recovery and the ownership sweep: a run waiting for a person is unfinished too.
DROP INDEX workflow_runs_unfinished;
CREATE INDEX workflow_runs_unfinished ON workflow_runs (run_id)
    WHERE status IN ('pending', 'running', 'waiting_retry', 'waiting_approval');

ALTER TABLE state_events DROP CONSTRAINT state_events_type_check;
ALTER TABLE state_events ADD CONSTRAINT state_events_type_check CHECK (type IN
    ('run.created', 'run.started', 'run.cancel_requested', 'run.succeeded', 'run.failed',
     'run.canceled', 'run.recovered', 'attempt.queued', 'attempt.started', 'attempt.succeeded',
     'attempt.failed', 'attempt.timed_out', 'attempt.canceled', 'attempt.interrupted',
     'task.waiting_retry', 'task.succeeded', 'task.failed', 'task.skipped', 'task.canceled',
     'task.waiting_approval', 'approval.requested', 'approval.approved', 'approval.rejected',
     'approval.expired', 'approval.canceled'));

ALTER TABLE attempts
    ADD COLUMN paused_at      timestamptz,
    ADD COLUMN paused_seconds double precision NOT NULL DEFAULT 0 CHECK (paused_seconds >= 0);

CREATE TABLE approvals (
    approval_id      uuid        PRIMARY KEY,
    run_id           uuid        NOT NULL,
    task_key         text        NOT NULL,
    attempt          integer     NOT NULL,
    tool             text        NOT NULL,
    tool_call_id     text,
    arguments        jsonb       NOT NULL CHECK (jsonb_typeof(arguments) = 'object'),
    arguments_digest text        NOT NULL CHECK (arguments_digest ~ '^sha256:[0-9a-f]{64}$'),
    status           text        NOT NULL
        CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'canceled')),
    requested_at     timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    decided_by       text,
    decided_at       timestamptz,
    comment          text,
    FOREIGN KEY (run_id, task_key, attempt) REFERENCES attempts ON DELETE CASCADE,
    CHECK ((status = 'pending') = (decided_at IS NULL)),
    CHECK (status IN ('approved', 'rejected') OR decided_by IS NULL)
);
-- load_run: the approvals of a run's attempts.
CREATE INDEX approvals_by_attempt ON approvals (run_id, task_key, attempt);
-- GET /approvals (keyset order), and ?status=….
CREATE INDEX approvals_keyset ON approvals (requested_at, approval_id);
CREATE INDEX approvals_by_status ON approvals (status, requested_at, approval_id);
-- The coordinator's expiry of pending approvals.
CREATE INDEX approvals_due ON approvals (expires_at) WHERE status = 'pending';
