-- The OpenAgentNetwork bridge (package oanbridge/oanpg), the PostgreSQL twin
-- of oanbridge/oansqlite/migrations/0018_oan.sql. No API key is stored:
-- key_id is a fingerprint.
CREATE TABLE oan_accounts (
    account text COLLATE "C" PRIMARY KEY,
    cursor  bigint,                      -- largest seq processed; NULL: none yet
    status  text NOT NULL DEFAULT 'ok',
    key_id  text NOT NULL DEFAULT ''
);
CREATE TABLE oan_events (
    account  text COLLATE "C" NOT NULL,
    event_id text COLLATE "C" NOT NULL,
    seq      bigint NOT NULL,
    type     text NOT NULL,
    PRIMARY KEY (account, event_id)
);
CREATE TABLE oan_items (
    account    text COLLATE "C" NOT NULL,
    event_id   text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    kind       text NOT NULL,
    gofer_id   text NOT NULL,
    reply_path text NOT NULL,
    envelope   bytea NOT NULL,
    state      text NOT NULL,
    decision   text NOT NULL DEFAULT '',
    PRIMARY KEY (account, event_id)
);
CREATE INDEX oan_items_state ON oan_items (account, state, seq);
CREATE TABLE oan_outbound (
    account   text COLLATE "C" NOT NULL,
    id        text COLLATE "C" NOT NULL,
    n         bigint NOT NULL,
    gofer_id  text NOT NULL,
    body      text NOT NULL,
    delivered boolean NOT NULL DEFAULT false,
    PRIMARY KEY (account, id)
);
CREATE TABLE oan_conversations (
    account         text COLLATE "C" NOT NULL,
    conversation_id text COLLATE "C" NOT NULL,
    gofer_id        text NOT NULL,
    PRIMARY KEY (account, conversation_id)
);
