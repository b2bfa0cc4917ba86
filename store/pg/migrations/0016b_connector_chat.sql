-- xAgent IM Profile v2 queues of the connector bridge (package
-- connectorbridge/chatpg), the PostgreSQL twin of
-- connectorbridge/chatsqlite/migrations/0016b_connector_chat.sql. One row per
-- accepted chat message and direction, pending until delivered, expired or
-- failed; terminal rows stay until purged so redeliveries are recognised.
-- Times are Unix milliseconds, as in SQLite.
CREATE TABLE connector_chat_queue (
    endpoint     text COLLATE "C" NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 3071),
    direction    text NOT NULL CHECK (direction IN ('in', 'out')),
    message_id   text COLLATE "C" NOT NULL CHECK (length(message_id) BETWEEN 1 AND 256),
    channel_id   text NOT NULL DEFAULT '' CHECK (length(channel_id) <= 256),
    conversation text COLLATE "C" NOT NULL DEFAULT '' CHECK (length(conversation) <= 256),
    payload      bytea NOT NULL CHECK (length(payload) <= 262144),
    expires_at   bigint NOT NULL,
    created_at   bigint NOT NULL,
    state        text NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'delivered', 'expired', 'failed')),
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- insertion order across instances (SQLite's max(seq) + 1 under its one
    -- writer; here a sequence, which concurrent writers cannot collide on)
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (endpoint, direction, message_id)
);
CREATE INDEX connector_chat_pending
    ON connector_chat_queue (endpoint, direction, state, seq);
