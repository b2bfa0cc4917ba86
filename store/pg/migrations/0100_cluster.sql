-- Cluster mode (docs/cluster.md): every non-terminal task is owned by the
-- gateway instance that executes it, and every instance holds a renewable
-- lease here, in the same database as its tasks, so that a survivor's
-- takeover of an expired instance's tasks is one guarded transaction.
-- Lease times are the database's clock (now()), never an instance's.
ALTER TABLE tasks ADD COLUMN owner text COLLATE "C" NOT NULL DEFAULT '' CHECK (length(owner) <= 255);
CREATE INDEX tasks_owner ON tasks (owner, created_ns, id) WHERE result IS NULL;

CREATE TABLE instances (
    name    text COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 255),
    joined  timestamptz NOT NULL,
    expires timestamptz NOT NULL
);

CREATE OR REPLACE FUNCTION tasks_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A takeover moves the owner and nothing else: no revision, no event.
    IF NEW.owner <> OLD.owner THEN
        IF OLD.state IN ('completed', 'failed', 'cancelled') OR NEW.state <> OLD.state
           OR NEW.revision <> OLD.revision OR NEW.updated_ns <> OLD.updated_ns THEN
            RAISE EXCEPTION 'tasks: an owner change is a takeover alone';
        END IF;
        RETURN NEW;
    END IF;
    IF OLD.state IN ('completed', 'failed', 'cancelled') THEN
        RAISE EXCEPTION 'tasks: terminal state is immutable';
    END IF;
    IF NEW.revision <> OLD.revision + 1 THEN
        RAISE EXCEPTION 'tasks: revision must grow by exactly one';
    END IF;
    IF NEW.id <> OLD.id OR NEW.caller <> OLD.caller OR NEW.endpoint <> OLD.endpoint
       OR NEW.request_id <> OLD.request_id OR NEW.fingerprint <> OLD.fingerprint
       OR NEW.created_ns <> OLD.created_ns OR NEW.retain_until_ns <> OLD.retain_until_ns
       OR NEW.delegation_depth <> OLD.delegation_depth THEN
        RAISE EXCEPTION 'tasks: identity is immutable';
    END IF;
    IF NOT (
           (OLD.state = 'accepted' AND NEW.state IN ('running', 'input_required', 'cancelling', 'completed', 'failed', 'cancelled'))
        OR (OLD.state = 'running' AND NEW.state IN ('running', 'input_required', 'cancelling', 'completed', 'failed', 'cancelled'))
        OR (OLD.state = 'input_required' AND NEW.state IN ('input_required', 'running', 'cancelling', 'completed', 'failed', 'cancelled'))
        OR (OLD.state = 'cancelling' AND NEW.state IN ('cancelling', 'completed', 'failed', 'cancelled'))) THEN
        RAISE EXCEPTION 'tasks: transition not allowed';
    END IF;
    RETURN NEW;
END;
$$;
