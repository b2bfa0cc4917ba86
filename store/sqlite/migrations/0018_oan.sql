-- The OpenAgentNetwork bridge (oanbridge/oansqlite). No API key is stored:
-- key_id is a fingerprint.
CREATE TABLE oan_accounts (
    account TEXT PRIMARY KEY,
    cursor  INTEGER,                     -- largest seq processed; NULL: none yet
    status  TEXT NOT NULL DEFAULT 'ok',
    key_id  TEXT NOT NULL DEFAULT ''
);
CREATE TABLE oan_events (
    account  TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    type     TEXT NOT NULL,
    PRIMARY KEY (account, event_id)
);
CREATE TABLE oan_items (
    account    TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    gofer_id   TEXT NOT NULL,
    reply_path TEXT NOT NULL,
    envelope   BLOB NOT NULL,
    state      TEXT NOT NULL,
    decision   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (account, event_id)
);
CREATE INDEX oan_items_state ON oan_items (account, state, seq);
CREATE TABLE oan_outbound (
    account   TEXT NOT NULL,
    id        TEXT NOT NULL,
    n         INTEGER NOT NULL,
    gofer_id  TEXT NOT NULL,
    body      TEXT NOT NULL,
    delivered INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (account, id)
);
CREATE TABLE oan_conversations (
    account         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    gofer_id        TEXT NOT NULL,
    PRIMARY KEY (account, conversation_id)
);
