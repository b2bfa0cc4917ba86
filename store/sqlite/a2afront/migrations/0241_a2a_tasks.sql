-- The A2A front's task index (ListTasks and context ids across restarts).
CREATE TABLE a2a_front_tasks (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    context_id  TEXT NOT NULL DEFAULT '',
    seq         INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX a2a_front_tasks_updated ON a2a_front_tasks (updated_at DESC, seq DESC);
