-- The delegation depth of each task (docs/design-notes.md, "Delegation
-- depth"): how many gateway hops its invocation is below a direct call. Set
-- at admission and handed to the backend at dispatch, also after a restart.
ALTER TABLE tasks ADD COLUMN delegation_depth INTEGER NOT NULL DEFAULT 0
    CHECK (delegation_depth >= 0);
