-- The A2A front's own file (agentgw a2a --push-outbox): push notification
-- configs and the outbox of undelivered notifications. Not part of the
-- gateway's store: the front is an XMPP client process.
CREATE TABLE a2a_push_configs (
    task_id     TEXT NOT NULL,
    config_id   TEXT NOT NULL,
    agent       TEXT NOT NULL,
    body        BLOB NOT NULL,
    done        INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1)),
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (task_id, config_id)
) STRICT;

CREATE TABLE a2a_push_outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT NOT NULL,
    config_id   TEXT NOT NULL,
    config      BLOB NOT NULL,
    body        BLOB NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at  INTEGER NOT NULL,
    next_at     INTEGER NOT NULL
) STRICT;

CREATE INDEX a2a_push_outbox_due ON a2a_push_outbox (next_at, id);
CREATE INDEX a2a_push_outbox_config ON a2a_push_outbox (task_id, config_id);
