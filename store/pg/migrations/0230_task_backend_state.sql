-- The state a backend commits with a running task so that its call can be
-- re-attached after a restart (docs/mcp-bridge.md, "Tasks"): for an MCP
-- server's task, the remote task id and the session it lives in. One row
-- per task at most, written by the engine's committer, read at recovery
-- (also by a member that takes the task over), deleted with the task.
CREATE TABLE task_backend_state (
    task_id    text COLLATE "C" NOT NULL PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    data       bytea NOT NULL
);
