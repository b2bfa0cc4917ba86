-- agent-control-center (accbridge). Enrolled connectors, known by their
-- client certificate fingerprint; no token or key is stored.
CREATE TABLE IF NOT EXISTS acc_connectors (
    name        TEXT NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    id          TEXT NOT NULL UNIQUE CHECK (length(id) BETWEEN 1 AND 64),
    cert_sha256 TEXT NOT NULL CHECK (length(cert_sha256) = 64),
    created_at  TEXT NOT NULL,
    revoked_at  TEXT NOT NULL DEFAULT ''
) STRICT;

-- One run per task, ever: task_id is the primary key.
CREATE TABLE IF NOT EXISTS acc_runs (
    task_id      TEXT NOT NULL PRIMARY KEY,
    run_id       TEXT NOT NULL UNIQUE,
    connector_id TEXT NOT NULL,
    agent_id     TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('created', 'accepted', 'done', 'orphaned'))
) STRICT;
CREATE INDEX IF NOT EXISTS acc_runs_open ON acc_runs (connector_id) WHERE state <> 'done';
