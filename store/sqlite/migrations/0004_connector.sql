-- xAgent Connector state (connectorbridge). One row per agent endpoint and
-- Connector Card: the ownership index endpoint + connector_card_id +
-- connector_channel_id, the last connector_id (runtime instance, reused on
-- reconnect), the Card and Skill snapshots and the last health state.
-- Target-system tokens, form secrets and the system API key are never stored.
CREATE TABLE IF NOT EXISTS connector_bindings (
    endpoint             TEXT NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 3071),
    connector_card_id    TEXT NOT NULL CHECK (length(connector_card_id) BETWEEN 1 AND 128),
    connector_id         TEXT NOT NULL DEFAULT '' CHECK (length(connector_id) <= 256),
    connector_channel_id TEXT NOT NULL DEFAULT '' CHECK (length(connector_channel_id) <= 256),
    auth_state           TEXT NOT NULL DEFAULT 'unauthenticated'
                         CHECK (auth_state IN ('unauthenticated', 'authenticated')),
    card_json            BLOB,
    skill_md             TEXT,
    health               TEXT NOT NULL DEFAULT 'unknown'
                         CHECK (health IN ('unknown', 'ok', 'degraded', 'offline', 'unauthorized', 'incompatible')),
    last_error           TEXT NOT NULL DEFAULT '' CHECK (length(last_error) <= 512),
    -- bumped by every binding change (channel id or auth state), from the
    -- gateway or from `agentgw connector auth`, so a running gateway notices.
    generation           INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
    updated_at           TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (endpoint, connector_card_id),
    -- an authenticated binding always names its channel
    CHECK (auth_state = 'unauthenticated' OR connector_channel_id <> '')
) STRICT;
