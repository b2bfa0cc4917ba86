-- Cluster-wide limits and durable notices (docs/cluster.md, "Cluster-wide
-- limits").
--
-- task_signals is the queue of notices from one instance to a task's owner
-- (cancel, input answer, "dispatch this"), written in the transaction of
-- the commit it announces and taken exactly once by the owner, on a NOTIFY
-- hint or at its periodic sweep. Rows of a dead or restarted owner are
-- dropped with its takeover or rejoin.
CREATE TABLE task_signals (
    id      bigserial PRIMARY KEY,
    owner   text COLLATE "C" NOT NULL CHECK (length(owner) BETWEEN 1 AND 255),
    payload bytea NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_signals_owner ON task_signals (owner, id);

-- task_counts holds the counts behind the admission limits, kept by a
-- trigger in the transaction of every task write, so that reading them is
-- one index lookup: non-terminal tasks in all ('all', ''), per caller
-- ('caller', bare JID), per caller domain ('domain', the part after the
-- last '@', lower case), and dispatched non-terminal tasks per endpoint
-- ('running', endpoint). Cluster members read and write them under the
-- cluster commit lock (pg.LimitsLock), so the counts they compare with the
-- limits are exact for the whole cluster.
CREATE TABLE task_counts (
    kind text NOT NULL CHECK (kind IN ('all', 'caller', 'domain', 'running')),
    key  text COLLATE "C" NOT NULL,
    n    bigint NOT NULL,
    PRIMARY KEY (kind, key)
);

INSERT INTO task_counts (kind, key, n)
    SELECT 'all', '', count(*) FROM tasks WHERE result IS NULL;
INSERT INTO task_counts (kind, key, n)
    SELECT 'caller', caller, count(*) FROM tasks WHERE result IS NULL GROUP BY caller;
INSERT INTO task_counts (kind, key, n)
    SELECT 'domain', d, count(*) FROM (SELECT lower(substring(caller from '[^@]*$')) AS d FROM tasks WHERE result IS NULL) s GROUP BY d;
INSERT INTO task_counts (kind, key, n)
    SELECT 'running', endpoint, count(*) FROM tasks WHERE result IS NULL AND dispatched GROUP BY endpoint;

CREATE FUNCTION task_counts_add(k text, ky text, d bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO task_counts (kind, key, n) VALUES (k, ky, d)
    ON CONFLICT (kind, key) DO UPDATE SET n = task_counts.n + EXCLUDED.n;
$$;

CREATE FUNCTION tasks_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_active boolean := false;
    is_active  boolean := false;
    was_run    boolean := false;
    is_run     boolean := false;
    r          tasks%ROWTYPE;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        was_active := OLD.result IS NULL;
        was_run := OLD.result IS NULL AND OLD.dispatched;
        r := OLD;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        is_active := NEW.result IS NULL;
        is_run := NEW.result IS NULL AND NEW.dispatched;
        r := NEW;
    END IF;
    IF was_active <> is_active THEN
        PERFORM task_counts_add('all', '', CASE WHEN is_active THEN 1 ELSE -1 END);
        PERFORM task_counts_add('caller', r.caller, CASE WHEN is_active THEN 1 ELSE -1 END);
        PERFORM task_counts_add('domain', lower(substring(r.caller from '[^@]*$')), CASE WHEN is_active THEN 1 ELSE -1 END);
    END IF;
    IF was_run <> is_run THEN
        PERFORM task_counts_add('running', r.endpoint, CASE WHEN is_run THEN 1 ELSE -1 END);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER tasks_count AFTER INSERT OR UPDATE OR DELETE ON tasks
    FOR EACH ROW EXECUTE FUNCTION tasks_count();
