-- Cluster-wide limits and durable notices (docs/cluster.md, "Cluster-wide
-- limits"). task_signals is the queue of notices from one instance to a
-- task's owner (cancel, input answer, "dispatch this"), written in the
-- transaction of the commit it announces and taken exactly once by the
-- owner, on a NOTIFY hint or at its periodic sweep. Rows of a dead or
-- restarted owner are dropped with its takeover or rejoin.
CREATE TABLE task_signals (
    id      bigserial PRIMARY KEY,
    owner   text COLLATE "C" NOT NULL CHECK (length(owner) BETWEEN 1 AND 255),
    payload bytea NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_signals_owner ON task_signals (owner, id);

-- The counts behind the limits: non-terminal tasks per caller, and the
-- dispatched ones per endpoint (max_running_per_backend).
CREATE INDEX tasks_active_caller ON tasks (caller) WHERE result IS NULL;
CREATE INDEX tasks_running_endpoint ON tasks (endpoint) WHERE result IS NULL AND dispatched;
