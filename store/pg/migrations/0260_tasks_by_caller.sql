-- A caller's own tasks, newest first: the task-list extension
-- (urn:agentgw:task-list:0, docs/task-list.md) pages them by
-- (created_ns, id) descending.
CREATE INDEX tasks_caller_created ON tasks (caller, created_ns, id);
