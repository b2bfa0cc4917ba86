-- xAgent Connector state (package connectorbridge/bindingpg), the PostgreSQL
-- twin of connectorbridge/bindingsqlite/migrations/0004_connector.sql. One
-- row per agent endpoint and Connector Card: the ownership index endpoint +
-- connector_card_id + connector_channel_id, the last connector_id, the
-- Card and Skill snapshots and the last health state. Target-system tokens,
-- form secrets and the system API key are never stored.
CREATE TABLE connector_bindings (
    endpoint             text COLLATE "C" NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 3071),
    connector_card_id    text COLLATE "C" NOT NULL CHECK (length(connector_card_id) BETWEEN 1 AND 128),
    connector_id         text NOT NULL DEFAULT '' CHECK (length(connector_id) <= 256),
    connector_channel_id text NOT NULL DEFAULT '' CHECK (length(connector_channel_id) <= 256),
    auth_state           text NOT NULL DEFAULT 'unauthenticated'
                         CHECK (auth_state IN ('unauthenticated', 'authenticated')),
    card_json            bytea,
    skill_md             text,
    health               text NOT NULL DEFAULT 'unknown'
                         CHECK (health IN ('unknown', 'ok', 'degraded', 'offline', 'unauthorized', 'incompatible')),
    last_error           text NOT NULL DEFAULT '' CHECK (length(last_error) <= 512),
    -- bumped by every binding change (channel id or auth state), from any
    -- instance or from `agentgw connector auth`, so running gateways notice.
    generation           bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, connector_card_id),
    -- an authenticated binding always names its channel
    CHECK (auth_state = 'unauthenticated' OR connector_channel_id <> '')
);
