-- A single-row counter that every committed directory or trust change bumps,
-- so that running gateways notice changes made by another instance or by
-- `agentgw admin` and `agentgw trust` (the PostgreSQL twin of
-- internal/store/migrations/0000_base.sql).
CREATE TABLE IF NOT EXISTS change_generation (
    id         integer PRIMARY KEY CHECK (id = 1),
    generation bigint  NOT NULL
);
INSERT INTO change_generation (id, generation) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
