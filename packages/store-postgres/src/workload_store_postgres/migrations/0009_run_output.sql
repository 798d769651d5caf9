-- 0009: a run's result (SPEC §6, amended 2026-12-01). Once a run has succeeded, its `output`
-- is `{task_key: output}` of its sink tasks (those no other task depends on), written by the
-- commit that ends it; null before, and for a run that did not succeed. Runs that succeeded
-- before this migration get theirs from their tasks.

ALTER TABLE workflow_runs ADD COLUMN output jsonb CHECK (jsonb_typeof(output) = 'object');
ALTER TABLE workflow_runs ADD CONSTRAINT workflow_runs_output_only_succeeded
    CHECK (output IS NULL OR status = 'succeeded');

UPDATE workflow_runs r
SET output = (
    SELECT coalesce(jsonb_object_agg(t.task_key, coalesce(t.output, '{}'::jsonb)), '{}'::jsonb)
    FROM task_runs t
    WHERE t.run_id = r.run_id
      AND NOT EXISTS (SELECT 1 FROM task_runs d
                      WHERE d.run_id = r.run_id AND t.task_key = ANY(d.depends_on))
)
WHERE r.status = 'succeeded';
