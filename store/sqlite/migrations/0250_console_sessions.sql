-- The operator console's logins (console/sessiondb): stored by the SHA-256
-- of the session ID (never the ID), so a restart keeps them.
CREATE TABLE IF NOT EXISTS console_sessions (
    id_hash  TEXT PRIMARY KEY CHECK (length(id_hash) = 64),
    operator TEXT NOT NULL,
    by_token INTEGER NOT NULL CHECK (by_token IN (0, 1)),
    expires  INTEGER NOT NULL,        -- Unix nanoseconds
    note     TEXT NOT NULL DEFAULT '',
    note_ok  INTEGER NOT NULL DEFAULT 0 CHECK (note_ok IN (0, 1))
) STRICT;
CREATE INDEX IF NOT EXISTS console_sessions_expires ON console_sessions (expires);
