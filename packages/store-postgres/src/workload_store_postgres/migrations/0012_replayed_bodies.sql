-- 0012: an idempotent replay answers the original body again (SPEC §6), byte for byte. JSONB
-- keeps an object's keys in its own order (shortest first), so a run whose input was
-- {"b": 1, "a": 2} was answered {"a": 2, "b": 1} on a replay; JSON keeps the text as written.
-- Records live a day (the purge), so the rewrite of the table is short; the bodies already
-- stored keep the order JSONB gave them.

ALTER TABLE idempotency_records ALTER COLUMN response TYPE json USING response::json;
