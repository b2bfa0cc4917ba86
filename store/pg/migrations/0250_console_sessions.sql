-- The operator console's logins (console/sessiondb), the PostgreSQL twin
-- of store/sqlite/migrations/0250_console_sessions.sql: shared by the
-- members of a cluster, stored by the SHA-256 of the session ID.
CREATE TABLE console_sessions (
    id_hash  text COLLATE "C" PRIMARY KEY CHECK (length(id_hash) = 64),
    operator text NOT NULL,
    by_token boolean NOT NULL,
    expires  timestamptz NOT NULL,
    note     text NOT NULL DEFAULT '',
    note_ok  boolean NOT NULL DEFAULT false
);
CREATE INDEX console_sessions_expires ON console_sessions (expires);
