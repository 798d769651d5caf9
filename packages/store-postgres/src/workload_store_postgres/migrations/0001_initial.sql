-- 0001: the whole schema of SPEC §5. Every status column has a CHECK; keys and foreign keys
-- make orphan tasks, attempts and events impossible. Each index names the query it serves.

CREATE TABLE workflows (
    workflow_id    text        PRIMARY KEY CHECK (workflow_id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    latest_version integer     NOT NULL CHECK (latest_version >= 1),
    description    text        NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
-- GET /workflows: keyset order (created_at, workflow_id).
CREATE INDEX workflows_keyset ON workflows (created_at, workflow_id);

CREATE TABLE workflow_versions (
    workflow_id     text        NOT NULL REFERENCES workflows (workflow_id),
    version         integer     NOT NULL CHECK (version >= 1),
    definition_hash text        NOT NULL CHECK (definition_hash ~ '^sha256:[0-9a-f]{64}$'),
    task_count      integer     NOT NULL CHECK (task_count BETWEEN 1 AND 1000),
    definition      jsonb       NOT NULL CHECK (jsonb_typeof(definition) = 'object'),
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, version)  -- also serves GET …/versions by number
);

CREATE TABLE workflow_runs (
    run_id           uuid        PRIMARY KEY,
    workflow_id      text        NOT NULL,
    version          integer     NOT NULL,
    status           text        NOT NULL CHECK (status IN
                         ('pending', 'running', 'waiting_retry', 'succeeded', 'failed', 'canceled')),
    revision         bigint      NOT NULL CHECK (revision >= 1),
    last_sequence    bigint      NOT NULL CHECK (last_sequence >= 1),
    input            jsonb       NOT NULL CHECK (jsonb_typeof(input) = 'object'),
    cancel_requested boolean     NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    started_at       timestamptz,
    finished_at      timestamptz,
    FOREIGN KEY (workflow_id, version) REFERENCES workflow_versions (workflow_id, version),
    CHECK ((status IN ('succeeded', 'failed', 'canceled')) = (finished_at IS NOT NULL))
);
-- GET /runs: keyset order (created_at, run_id), unfiltered.
CREATE INDEX workflow_runs_keyset ON workflow_runs (created_at, run_id);
-- GET /runs?workflow_id=… (and the foreign key's lookups from workflow_versions).
CREATE INDEX workflow_runs_by_workflow ON workflow_runs (workflow_id, created_at, run_id);
-- GET /runs?status=….
CREATE INDEX workflow_runs_by_status ON workflow_runs (status, created_at, run_id);
-- Start-up recovery: page through non-terminal runs by id.
CREATE INDEX workflow_runs_unfinished ON workflow_runs (run_id)
    WHERE status IN ('pending', 'running', 'waiting_retry');

CREATE TABLE task_runs (
    run_id          uuid        NOT NULL REFERENCES workflow_runs (run_id),
    task_key        text        NOT NULL,
    position        integer     NOT NULL CHECK (position BETWEEN 0 AND 999),
    status          text        NOT NULL CHECK (status IN
                        ('pending', 'running', 'waiting_retry', 'succeeded', 'failed', 'canceled',
                         'skipped')),
    depends_on      text[]      NOT NULL,
    attempt_count   integer     NOT NULL CHECK (attempt_count >= 0),
    max_attempts    integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
    next_attempt_at timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    output          jsonb       CHECK (output IS NULL OR jsonb_typeof(output) = 'object'),
    error           jsonb       CHECK (error IS NULL OR jsonb_typeof(error) = 'object'),
    PRIMARY KEY (run_id, task_key),
    -- GET …/tasks in definition order.
    UNIQUE (run_id, position),
    CHECK (attempt_count <= max_attempts),
    CHECK ((status = 'waiting_retry') = (next_attempt_at IS NOT NULL))
);

CREATE TABLE attempts (
    run_id      uuid        NOT NULL,
    task_key    text        NOT NULL,
    attempt     integer     NOT NULL CHECK (attempt BETWEEN 1 AND 100),
    status      text        NOT NULL CHECK (status IN
                    ('running', 'succeeded', 'failed', 'timed_out', 'canceled', 'interrupted')),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    output      jsonb       CHECK (output IS NULL OR jsonb_typeof(output) = 'object'),
    error       jsonb       CHECK (error IS NULL OR jsonb_typeof(error) = 'object'),
    PRIMARY KEY (run_id, task_key, attempt),  -- GET …/attempts by number
    FOREIGN KEY (run_id, task_key) REFERENCES task_runs (run_id, task_key),
    CHECK ((status = 'running') = (finished_at IS NULL))
);
-- load_run: a run's running attempts; start-up: the runs whose attempts were left running.
CREATE INDEX attempts_running ON attempts (run_id) WHERE status = 'running';

CREATE TABLE state_events (
    run_id      uuid        NOT NULL REFERENCES workflow_runs (run_id),
    sequence    bigint      NOT NULL CHECK (sequence >= 1),
    type        text        NOT NULL CHECK (type IN
                    ('run.created', 'run.started', 'run.cancel_requested', 'run.succeeded',
                     'run.failed', 'run.canceled', 'run.recovered', 'attempt.started',
                     'attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                     'attempt.canceled', 'attempt.interrupted', 'task.waiting_retry',
                     'task.succeeded', 'task.failed', 'task.skipped', 'task.canceled')),
    occurred_at timestamptz NOT NULL,
    task_key    text,
    attempt     integer,
    data        jsonb       NOT NULL CHECK (jsonb_typeof(data) = 'object'),
    PRIMARY KEY (run_id, sequence)  -- GET …/events by sequence
);

CREATE TABLE idempotency_records (
    principal       text        NOT NULL,
    idempotency_key text        NOT NULL CHECK (idempotency_key ~ '^[!-~]{1,255}$'),
    operation       text        NOT NULL,
    request_hash    text        NOT NULL,
    status_code     integer     NOT NULL CHECK (status_code BETWEEN 200 AND 599),
    response        jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (principal, idempotency_key)
);
-- Purge of records older than the retention.
CREATE INDEX idempotency_records_created ON idempotency_records (created_at);

-- Secrets the service keeps in its database, e.g. the cursor HMAC key (so cursors survive
-- restarts). Rows are created by the service with a random value on first use.
CREATE TABLE service_secrets (
    name       text        PRIMARY KEY,
    secret     bytea       NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL
);
