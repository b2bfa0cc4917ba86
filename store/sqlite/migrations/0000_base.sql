-- A single-row counter that every committed directory or trust change bumps,
-- so that a running gateway notices changes made by `agentgw admin` and
-- `agentgw trust` in another process.
CREATE TABLE IF NOT EXISTS change_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
) STRICT;
INSERT OR IGNORE INTO change_generation (id, generation) VALUES (1, 0);
