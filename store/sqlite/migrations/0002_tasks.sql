-- Durable tasks of urn:xmpp:agent-task:0 (package tasks, driver tasksqlite).
-- Times are Unix nanoseconds (UTC). Caller-supplied instants are also kept as
-- their canonical XEP-0082 text, so comparisons keep every fractional digit.
-- The schema enforces what it can: state names, the allowed transitions,
-- revision +1 per update, immutable terminal states, one pending input per
-- task, an event at exactly the task's current revision, and one replay
-- record per (caller, endpoint, request ID).
CREATE TABLE tasks (
    id               TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 22 AND 128),
    caller           TEXT NOT NULL CHECK (length(caller) BETWEEN 1 AND 3071),
    route            TEXT NOT NULL CHECK (length(route) BETWEEN 1 AND 3071),
    endpoint         TEXT NOT NULL CHECK (length(endpoint) BETWEEN 1 AND 3071),
    request_id       TEXT NOT NULL CHECK (length(request_id) BETWEEN 22 AND 128),
    tool             TEXT NOT NULL CHECK (length(tool) >= 1),
    api_version      TEXT NOT NULL CHECK (length(api_version) BETWEEN 1 AND 64),
    manifest_hash    TEXT NOT NULL,
    arguments        BLOB NOT NULL,
    fingerprint      BLOB NOT NULL CHECK (length(fingerprint) = 32),
    deadline         TEXT,
    deadline_ns      INTEGER,
    state            TEXT NOT NULL CHECK (state IN ('accepted', 'running', 'input_required', 'cancelling', 'completed', 'failed', 'cancelled')),
    revision         INTEGER NOT NULL CHECK (revision >= 0),
    dispatched       INTEGER NOT NULL CHECK (dispatched IN (0, 1)),
    created_ns       INTEGER NOT NULL,
    updated_ns       INTEGER NOT NULL,
    retain_until_ns  INTEGER NOT NULL,
    purge_after_ns   INTEGER NOT NULL,
    input_request_id TEXT,
    result           BLOB,
    cancel_key       BLOB CHECK (cancel_key IS NULL OR length(cancel_key) = 32),
    cancel_revision  INTEGER,
    UNIQUE (caller, endpoint, request_id),
    CHECK ((state = 'accepted') = (revision = 0)),
    CHECK ((state IN ('completed', 'failed', 'cancelled')) = (result IS NOT NULL)),
    CHECK ((state = 'input_required') = (input_request_id IS NOT NULL)),
    CHECK ((deadline IS NULL) = (deadline_ns IS NULL)),
    CHECK ((cancel_key IS NULL) = (cancel_revision IS NULL))
) STRICT;

-- A task is terminal exactly when result is set (CHECK above). Keying the
-- partial indexes on result rather than state means only settlement touches
-- them, not every transition.
CREATE INDEX tasks_unsettled ON tasks (created_ns) WHERE result IS NULL;
CREATE INDEX tasks_purge ON tasks (purge_after_ns) WHERE result IS NOT NULL;
CREATE INDEX tasks_version ON tasks (endpoint, api_version);

-- Every committed change is one revision, and terminal states never change.
CREATE TRIGGER tasks_guard BEFORE UPDATE ON tasks
BEGIN
    SELECT RAISE(ABORT, 'tasks: terminal state is immutable')
        WHERE OLD.state IN ('completed', 'failed', 'cancelled');
    SELECT RAISE(ABORT, 'tasks: revision must grow by exactly one')
        WHERE NEW.revision != OLD.revision + 1;
    SELECT RAISE(ABORT, 'tasks: identity is immutable')
        WHERE NEW.id != OLD.id OR NEW.caller != OLD.caller OR NEW.endpoint != OLD.endpoint
           OR NEW.request_id != OLD.request_id OR NEW.fingerprint != OLD.fingerprint
           OR NEW.created_ns != OLD.created_ns OR NEW.retain_until_ns != OLD.retain_until_ns;
    SELECT RAISE(ABORT, 'tasks: transition not allowed')
        WHERE NOT (
               (OLD.state = 'accepted' AND NEW.state IN ('running', 'input_required', 'cancelling', 'completed', 'failed', 'cancelled'))
            OR (OLD.state = 'running' AND NEW.state IN ('running', 'input_required', 'cancelling', 'completed', 'failed', 'cancelled'))
            OR (OLD.state = 'input_required' AND NEW.state IN ('input_required', 'running', 'cancelling', 'completed', 'failed', 'cancelled'))
            OR (OLD.state = 'cancelling' AND NEW.state IN ('cancelling', 'completed', 'failed', 'cancelled')));
END;

CREATE TABLE task_events (
    task_id    TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    revision   INTEGER NOT NULL CHECK (revision >= 1),
    event_id   TEXT NOT NULL UNIQUE CHECK (length(event_id) BETWEEN 22 AND 128),
    type       TEXT NOT NULL CHECK (type IN ('status', 'progress', 'input_required', 'completed', 'failed', 'cancelled')),
    payload    BLOB NOT NULL,
    created_ns INTEGER NOT NULL,
    PRIMARY KEY (task_id, revision)
) STRICT;

-- An event is appended after its task update, at exactly that revision.
CREATE TRIGGER task_events_at_revision BEFORE INSERT ON task_events
BEGIN
    SELECT RAISE(ABORT, 'tasks: event revision differs from the task revision')
        WHERE NEW.revision != (SELECT revision FROM tasks WHERE id = NEW.task_id);
END;

CREATE TABLE task_inputs (
    task_id          TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    request_id       TEXT NOT NULL CHECK (length(request_id) BETWEEN 22 AND 128),
    status           TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'expired', 'superseded')),
    request          BLOB NOT NULL,
    expires_at       TEXT,
    created_revision INTEGER NOT NULL CHECK (created_revision >= 1),
    accept_key       BLOB CHECK (accept_key IS NULL OR length(accept_key) = 32),
    accept_revision  INTEGER,
    PRIMARY KEY (task_id, request_id),
    CHECK ((status = 'answered') = (accept_key IS NOT NULL)),
    CHECK ((accept_key IS NULL) = (accept_revision IS NULL))
) STRICT;

CREATE UNIQUE INDEX task_inputs_one_pending ON task_inputs (task_id) WHERE status = 'pending';

-- A disposition is final: only a pending request changes.
CREATE TRIGGER task_inputs_guard BEFORE UPDATE ON task_inputs
BEGIN
    SELECT RAISE(ABORT, 'tasks: input disposition is final')
        WHERE OLD.status != 'pending';
END;
