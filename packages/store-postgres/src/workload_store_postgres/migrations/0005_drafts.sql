-- 0005: drafts (SPEC §11): workflows written by a model, kept until a person approves exactly
-- their definition hash (and then, in the same transaction, become a version).

CREATE TABLE drafts (
    draft_id              uuid        PRIMARY KEY,
    status                text        NOT NULL
        CHECK (status IN ('generating', 'ready', 'invalid', 'approved', 'rejected')),
    prompt                text        NOT NULL,
    model                 text        NOT NULL,
    script                jsonb       CHECK (script IS NULL OR jsonb_typeof(script) = 'array'),
    requested_workflow_id text        CHECK (requested_workflow_id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    workflow_id           text        CHECK (workflow_id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    definition            jsonb       CHECK (definition IS NULL OR jsonb_typeof(definition) = 'object'),
    definition_hash       text        CHECK (definition_hash ~ '^sha256:[0-9a-f]{64}$'),
    problems              jsonb       NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(problems) = 'array'),
    model_calls           bigint      NOT NULL DEFAULT 0 CHECK (model_calls >= 0),
    input_tokens          bigint      NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens         bigint      NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    version               integer,
    created_by            text        NOT NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    CHECK ((definition IS NULL) = (definition_hash IS NULL)),
    CHECK (status NOT IN ('ready', 'approved') OR definition IS NOT NULL),
    CHECK ((status = 'approved') = (version IS NOT NULL))
);
-- GET /drafts: keyset order.
CREATE INDEX drafts_keyset ON drafts (created_at, draft_id);
-- Start-up: drafts whose generation a stopped coordinator left unfinished.
CREATE INDEX drafts_generating ON drafts (draft_id) WHERE status = 'generating';
