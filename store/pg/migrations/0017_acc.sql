-- agent-control-center (package accbridge/accpg), the PostgreSQL twin of
-- accbridge/accsqlite/migrations/0017_acc.sql. Enrolled connectors, known
-- by their client certificate fingerprint; no token or key is stored.
CREATE TABLE acc_connectors (
    name        text COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    id          text COLLATE "C" NOT NULL UNIQUE CHECK (length(id) BETWEEN 1 AND 64),
    cert_sha256 text NOT NULL CHECK (length(cert_sha256) = 64),
    created_at  text NOT NULL,
    revoked_at  text NOT NULL DEFAULT ''
);

-- One run per task, ever: task_id is the primary key.
CREATE TABLE acc_runs (
    task_id      text COLLATE "C" NOT NULL PRIMARY KEY,
    run_id       text COLLATE "C" NOT NULL UNIQUE,
    connector_id text COLLATE "C" NOT NULL,
    agent_id     text NOT NULL,
    state        text NOT NULL CHECK (state IN ('created', 'accepted', 'done', 'orphaned'))
);
CREATE INDEX acc_runs_open ON acc_runs (connector_id) WHERE state <> 'done';
