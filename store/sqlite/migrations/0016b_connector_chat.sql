-- xAgent IM Profile v2 queues of the connector bridge (connectorbridge/chatdb).
-- One row per accepted chat message and direction, pending until delivered,
-- expired or failed; terminal rows stay until purged so redeliveries are
-- recognised. Times are Unix milliseconds.
CREATE TABLE IF NOT EXISTS connector_chat_queue (
    endpoint     TEXT NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 3071),
    direction    TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    message_id   TEXT NOT NULL CHECK (length(message_id) BETWEEN 1 AND 256),
    channel_id   TEXT NOT NULL DEFAULT '' CHECK (length(channel_id) <= 256),
    conversation TEXT NOT NULL DEFAULT '' CHECK (length(conversation) <= 256),
    payload      BLOB NOT NULL CHECK (length(payload) <= 262144),
    expires_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'delivered', 'expired', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    seq          INTEGER NOT NULL,
    PRIMARY KEY (endpoint, direction, message_id)
) STRICT;
CREATE INDEX IF NOT EXISTS connector_chat_pending
    ON connector_chat_queue (endpoint, direction, state, seq);
