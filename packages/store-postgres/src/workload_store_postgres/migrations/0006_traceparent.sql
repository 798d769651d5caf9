-- 0006: observability (SPEC §12). A run keeps the W3C trace context of the request that
-- created it: its span continues that trace, and workers receive it with the run's attempts.


ALTER TABLE workflow_runs
    ADD COLUMN traceparent text CHECK (
        traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
    );

-- /metrics and /status count the workers seen lately (workload_workers_active).
CREATE INDEX workers_last_seen ON workers (last_seen_at);
