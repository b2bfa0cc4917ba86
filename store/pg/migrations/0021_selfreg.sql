-- Self Registration (package directory/selfregpg), the PostgreSQL twin of
-- directory/selfregsqlite/migrations/0021_selfreg.sql: endpoints a C2S
-- account registered for its own bare JID, and operator bans. Times are
-- Unix nanoseconds (exact, as SQLite's RFC 3339 text with nanoseconds).
CREATE TABLE selfreg_endpoints (
    endpoint text COLLATE "C" PRIMARY KEY,
    first_at bigint NOT NULL,
    last_at  bigint NOT NULL
);
CREATE TABLE selfreg_bans (
    endpoint text COLLATE "C" PRIMARY KEY,
    reason   text NOT NULL,
    at       bigint NOT NULL
);
