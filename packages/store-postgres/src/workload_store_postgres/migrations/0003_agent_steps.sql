-- 0003: the agent runtime (SPEC §11): the step journal of agent attempts, the leases of remote
-- tool calls, and usage totals on tasks and runs. Each index names the query it serves.

-- Usage: written by the journal (finish_step) in the step's transaction, never by a commit.
ALTER TABLE task_runs
    ADD COLUMN model_calls   bigint NOT NULL DEFAULT 0 CHECK (model_calls >= 0),
    ADD COLUMN tool_calls    bigint NOT NULL DEFAULT 0 CHECK (tool_calls >= 0),
    ADD COLUMN input_tokens  bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0);
ALTER TABLE workflow_runs
    ADD COLUMN model_calls   bigint NOT NULL DEFAULT 0 CHECK (model_calls >= 0),
    ADD COLUMN tool_calls    bigint NOT NULL DEFAULT 0 CHECK (tool_calls >= 0),
    ADD COLUMN input_tokens  bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0);

CREATE TABLE agent_steps (
    run_id       uuid        NOT NULL,
    task_key     text        NOT NULL,
    attempt      integer     NOT NULL,
    sequence     integer     NOT NULL CHECK (sequence >= 1),
    step_id      uuid        NOT NULL,
    kind         text        NOT NULL CHECK (kind IN ('model_call', 'tool_call')),
    status       text        NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    request      jsonb       NOT NULL CHECK (jsonb_typeof(request) = 'object'),
    request_hash text        NOT NULL,
    response     jsonb       CHECK (response IS NULL OR jsonb_typeof(response) = 'object'),
    usage        jsonb       CHECK (usage IS NULL OR jsonb_typeof(usage) = 'object'),
    tool_call_id text,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    -- A tool call executed by a worker: its queue and action, then its lease once claimed.
    action                    text CHECK (length(action) BETWEEN 1 AND 128),
    queue                     text CHECK (queue ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    heartbeat_timeout_seconds double precision
        CHECK (heartbeat_timeout_seconds > 0 AND heartbeat_timeout_seconds <= 3600),
    deadline                  timestamptz,
    schedule_deadline         timestamptz,
    worker_id                 text CHECK (worker_id ~ '^[A-Za-z0-9._-]{1,128}$'),
    claimed_at                timestamptz,
    lease_expires_at          timestamptz,
    timeout_at                timestamptz,
    lease_token_digest        text CHECK (lease_token_digest ~ '^[0-9a-f]{64}$'),
    progress                  jsonb CHECK (progress IS NULL OR jsonb_typeof(progress) = 'object'),
    report_hash               text,
    lease_end                 text
        CHECK (lease_end IN ('expired', 'canceled', 'finished', 'timed_out', 'unknown')),
    PRIMARY KEY (run_id, task_key, attempt, sequence),
    FOREIGN KEY (run_id, task_key, attempt) REFERENCES attempts ON DELETE CASCADE,
    CHECK ((status = 'running') = (finished_at IS NULL)),
    CHECK ((kind = 'tool_call') OR (queue IS NULL AND tool_call_id IS NULL)),
    -- A remote tool call has its action, lease length and deadline from the start.
    CHECK ((queue IS NULL) = (action IS NULL)
           AND (queue IS NULL) = (heartbeat_timeout_seconds IS NULL)
           AND (queue IS NULL) = (deadline IS NULL)),
    -- A lease is all of it or none of it.
    CHECK ((worker_id IS NULL) = (claimed_at IS NULL)
           AND (claimed_at IS NULL) = (lease_expires_at IS NULL)
           AND (lease_expires_at IS NULL) = (lease_token_digest IS NULL)
           AND (lease_expires_at IS NULL) = (timeout_at IS NULL)
           AND (worker_id IS NULL OR queue IS NOT NULL))
);

-- Heartbeat, complete and fail address a remote tool call by its step id.
CREATE UNIQUE INDEX agent_steps_by_id ON agent_steps (step_id);
-- Claims: queued tool calls oldest first, FOR UPDATE SKIP LOCKED.
CREATE INDEX agent_steps_queued ON agent_steps (started_at, step_id)
    WHERE status = 'running' AND queue IS NOT NULL AND worker_id IS NULL;
-- The lease reaper: leases run out, start-to-close deadlines, schedule-to-start deadlines.
CREATE INDEX agent_steps_lease_due ON agent_steps (lease_expires_at)
    WHERE status = 'running' AND lease_expires_at IS NOT NULL;
CREATE INDEX agent_steps_timeout_due ON agent_steps (timeout_at)
    WHERE status = 'running' AND timeout_at IS NOT NULL;
CREATE INDEX agent_steps_schedule_due ON agent_steps (schedule_deadline)
    WHERE status = 'running' AND worker_id IS NULL AND schedule_deadline IS NOT NULL;
-- GET /workers (in_flight) and GET /queues (queued and running tool calls per queue).
CREATE INDEX agent_steps_leased ON agent_steps (worker_id)
    WHERE status = 'running' AND worker_id IS NOT NULL;
