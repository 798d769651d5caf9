-- 0012: an idempotent replay answers the original body again (SPEC §6), byte for byte. JSONB
-- keeps an object's keys in its own order (shortest first), so a run whose input was
-- {"b": 1, "a": 2} was answered {"a": 2, "b": 1} on a replay; JSON keeps the text as written.
-- Records live a day (the purge); the rewrite holds the table (about 11 s per million rows on
-- two cores: docs/deploy.md, Upgrades), and gives up rather than wait behind a long transaction
-- with every write queued behind it. The bodies already stored keep the order JSONB gave them.

SET LOCAL lock_timeout = '10s';
ALTER TABLE idempotency_records ALTER COLUMN response TYPE json USING response::json;
