-- Directory (package directory/dirsqlite): immutable manifest versions, the
-- active-version pointer and permanent removal tombstones.

-- One row per registered (endpoint, version). The canonical RFC 8785 bytes
-- and their hash never change; only the active flag does.
CREATE TABLE directory_versions (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT, -- registration order
    endpoint      TEXT    NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 3071),
    version       TEXT    NOT NULL CHECK (length(version) BETWEEN 1 AND 64),
    hash          TEXT    NOT NULL CHECK (length(hash) = 44),
    canonical     BLOB    NOT NULL,
    active        INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
    registered_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (endpoint, version)
) STRICT;

-- At most one active version per endpoint.
CREATE UNIQUE INDEX directory_versions_one_active
    ON directory_versions (endpoint) WHERE active = 1;

CREATE TRIGGER directory_versions_immutable
BEFORE UPDATE OF endpoint, version, hash, canonical ON directory_versions
BEGIN
    SELECT RAISE(ABORT, 'directory: manifest versions are immutable');
END;

-- A removed version leaves a permanent tombstone: identical content may be
-- registered again, different content under that version never.
CREATE TABLE directory_tombstones (
    endpoint   TEXT NOT NULL,
    version    TEXT NOT NULL,
    hash       TEXT NOT NULL CHECK (length(hash) = 44),
    removed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (endpoint, version)
) STRICT;

CREATE TRIGGER directory_tombstones_no_update
BEFORE UPDATE ON directory_tombstones
BEGIN
    SELECT RAISE(ABORT, 'directory: tombstones are permanent');
END;

CREATE TRIGGER directory_tombstones_no_delete
BEFORE DELETE ON directory_tombstones
BEGIN
    SELECT RAISE(ABORT, 'directory: tombstones are permanent');
END;

CREATE TRIGGER directory_versions_respect_tombstone
BEFORE INSERT ON directory_versions
WHEN EXISTS (SELECT 1 FROM directory_tombstones t
             WHERE t.endpoint = NEW.endpoint AND t.version = NEW.version AND t.hash <> NEW.hash)
BEGIN
    SELECT RAISE(ABORT, 'directory: version is tombstoned with different content');
END;
