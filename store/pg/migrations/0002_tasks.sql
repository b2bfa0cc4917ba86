-- Durable tasks of urn:xmpp:agent-task:0 (package tasks, driver taskpg): the
-- PostgreSQL twin of tasks/tasksqlite/migrations/0002_tasks.sql and
-- 0005_delegation_depth.sql, with the same guards. Times are Unix
-- nanoseconds (UTC); caller-supplied instants are also kept as their
-- canonical XEP-0082 text. The schema enforces what it can: state names,
-- the allowed transitions, revision +1 per update, immutable terminal
-- states, one pending input per task, an event at exactly the task's
-- current revision, and one replay record per (caller, endpoint, request
-- ID) — the unique key that decides a replay even when two instances
-- admit the same request at once.
-- Text keys use the "C" collation: byte order, as SQLite compares.
CREATE TABLE tasks (
    id               text COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 22 AND 128),
    caller           text COLLATE "C" NOT NULL CHECK (length(caller) BETWEEN 1 AND 3071),
    route            text NOT NULL CHECK (length(route) BETWEEN 1 AND 3071),
    endpoint         text COLLATE "C" NOT NULL CHECK (length(endpoint) BETWEEN 1 AND 3071),
    request_id       text COLLATE "C" NOT NULL CHECK (length(request_id) BETWEEN 22 AND 128),
    tool             text NOT NULL CHECK (length(tool) >= 1),
    api_version      text COLLATE "C" NOT NULL CHECK (length(api_version) BETWEEN 1 AND 64),
    manifest_hash    text NOT NULL,
    arguments        bytea NOT NULL,
    fingerprint      bytea NOT NULL CHECK (length(fingerprint) = 32),
    deadline         text,
    deadline_ns      bigint,
    state            text NOT NULL CHECK (state IN ('accepted', 'running', 'input_required', 'cancelling', 'completed', 'failed', 'cancelled')),
    revision         bigint NOT NULL CHECK (revision >= 0),
    dispatched       boolean NOT NULL,
    created_ns       bigint NOT NULL,
    updated_ns       bigint NOT NULL,
    retain_until_ns  bigint NOT NULL,
    purge_after_ns   bigint NOT NULL,
    input_request_id text,
    result           bytea,
    cancel_key       bytea CHECK (cancel_key IS NULL OR length(cancel_key) = 32),
    cancel_revision  bigint,
    delegation_depth integer NOT NULL DEFAULT 0 CHECK (delegation_depth >= 0),
    UNIQUE (caller, endpoint, request_id),
    CHECK ((state = 'accepted') = (revision = 0)),
    CHECK ((state IN ('completed', 'failed', 'cancelled')) = (result IS NOT NULL)),
    CHECK ((state = 'input_required') = (input_request_id IS NOT NULL)),
    CHECK ((deadline IS NULL) = (deadline_ns IS NULL)),
    CHECK ((cancel_key IS NULL) = (cancel_revision IS NULL))
);

-- A task is terminal exactly when result is set (CHECK above).
CREATE INDEX tasks_unsettled ON tasks (created_ns, id) WHERE result IS NULL;
CREATE INDEX tasks_purge ON tasks (purge_after_ns) WHERE result IS NOT NULL;
CREATE INDEX tasks_version ON tasks (endpoint, api_version);

-- Every committed change is one revision, and terminal states never change.
CREATE FUNCTION tasks_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
CREATE TRIGGER tasks_guard BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION tasks_guard();

CREATE TABLE task_events (
    task_id    text COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    revision   bigint NOT NULL CHECK (revision >= 1),
    event_id   text NOT NULL UNIQUE CHECK (length(event_id) BETWEEN 22 AND 128),
    type       text NOT NULL CHECK (type IN ('status', 'progress', 'input_required', 'completed', 'failed', 'cancelled')),
    payload    bytea NOT NULL,
    created_ns bigint NOT NULL,
    PRIMARY KEY (task_id, revision)
);

-- An event is appended after its task update, at exactly that revision.
CREATE FUNCTION task_events_at_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revision <> (SELECT revision FROM tasks WHERE id = NEW.task_id) THEN
        RAISE EXCEPTION 'tasks: event revision differs from the task revision';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_events_at_revision BEFORE INSERT ON task_events FOR EACH ROW EXECUTE FUNCTION task_events_at_revision();

CREATE TABLE task_inputs (
    task_id          text COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    request_id       text COLLATE "C" NOT NULL CHECK (length(request_id) BETWEEN 22 AND 128),
    status           text NOT NULL CHECK (status IN ('pending', 'answered', 'expired', 'superseded')),
    request          bytea NOT NULL,
    expires_at       text,
    created_revision bigint NOT NULL CHECK (created_revision >= 1),
    accept_key       bytea CHECK (accept_key IS NULL OR length(accept_key) = 32),
    accept_revision  bigint,
    PRIMARY KEY (task_id, request_id),
    CHECK ((status = 'answered') = (accept_key IS NOT NULL)),
    CHECK ((accept_key IS NULL) = (accept_revision IS NULL))
);

CREATE UNIQUE INDEX task_inputs_one_pending ON task_inputs (task_id) WHERE status = 'pending';

-- A disposition is final: only a pending request changes.
CREATE FUNCTION task_inputs_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'pending' THEN
        RAISE EXCEPTION 'tasks: input disposition is final';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER task_inputs_guard BEFORE UPDATE ON task_inputs FOR EACH ROW EXECUTE FUNCTION task_inputs_guard();
