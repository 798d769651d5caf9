-- 0010: web console sessions kept on the server (ADR 0022). A sign-in adds a row; its cookie
-- carries a random secret of which only the SHA-256 digest is kept here, so reading this table
-- does not let anyone make a cookie. Sign-out (or an operator) sets revoked_at; a row is a
-- session while it is not revoked and expires_at is ahead.

CREATE TABLE console_sessions (
    session_id   text        PRIMARY KEY,
    digest       text        NOT NULL UNIQUE CHECK (digest ~ '^[0-9a-f]{64}$'),
    principal_id text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL CHECK (expires_at > created_at),
    revoked_at   timestamptz
);
-- The live sessions, newest first (listing); the sweep of ended ones at each sign-in.
CREATE INDEX console_sessions_created ON console_sessions (created_at DESC, session_id DESC);
CREATE INDEX console_sessions_ended ON console_sessions (coalesce(revoked_at, expires_at));

-- Cookies signed before this migration named no session: they are void. A fresh signing key is
-- made on first use (unless WORKLOAD_CONSOLE_SESSION_KEY configures one).
DELETE FROM service_secrets WHERE name = 'console_session';
