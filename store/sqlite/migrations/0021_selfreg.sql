-- Self Registration: endpoints a C2S account registered for its own bare
-- JID, and operator bans. Times are RFC 3339 UTC with nanoseconds.
CREATE TABLE IF NOT EXISTS selfreg_endpoints (
    endpoint TEXT PRIMARY KEY,
    first_at TEXT NOT NULL,
    last_at  TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS selfreg_bans (
    endpoint TEXT PRIMARY KEY,
    reason   TEXT NOT NULL,
    at       TEXT NOT NULL
) STRICT;
