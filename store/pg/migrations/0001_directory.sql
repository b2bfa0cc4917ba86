-- Directory (package directory/dirpg): immutable manifest versions, the
-- active-version pointer and permanent removal tombstones — the PostgreSQL
-- twin of directory/dirsqlite/migrations/0001_directory.sql, with the same
-- guards.

-- One row per registered (endpoint, version). The canonical RFC 8785 bytes
-- and their hash never change; only the active flag does.
CREATE TABLE directory_versions (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- registration order
    endpoint      text COLLATE "C" NOT NULL CHECK (length(endpoint) BETWEEN 3 AND 3071),
    version       text COLLATE "C" NOT NULL CHECK (length(version) BETWEEN 1 AND 64),
    hash          text NOT NULL CHECK (length(hash) = 44),
    canonical     bytea NOT NULL,
    active        boolean NOT NULL DEFAULT false,
    registered_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (endpoint, version)
);

-- At most one active version per endpoint.
CREATE UNIQUE INDEX directory_versions_one_active
    ON directory_versions (endpoint) WHERE active;

CREATE FUNCTION directory_versions_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'directory: manifest versions are immutable';
END;
$$;
CREATE TRIGGER directory_versions_immutable
    BEFORE UPDATE OF endpoint, version, hash, canonical ON directory_versions
    FOR EACH ROW EXECUTE FUNCTION directory_versions_immutable();

-- A removed version leaves a permanent tombstone: identical content may be
-- registered again, different content under that version never.
CREATE TABLE directory_tombstones (
    endpoint   text COLLATE "C" NOT NULL,
    version    text COLLATE "C" NOT NULL,
    hash       text NOT NULL CHECK (length(hash) = 44),
    removed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, version)
);

CREATE FUNCTION directory_tombstones_permanent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'directory: tombstones are permanent';
END;
$$;
CREATE TRIGGER directory_tombstones_no_update BEFORE UPDATE ON directory_tombstones
    FOR EACH ROW EXECUTE FUNCTION directory_tombstones_permanent();
CREATE TRIGGER directory_tombstones_no_delete BEFORE DELETE ON directory_tombstones
    FOR EACH ROW EXECUTE FUNCTION directory_tombstones_permanent();
-- TRUNCATE skips row triggers; it is refused too.
CREATE TRIGGER directory_tombstones_no_truncate BEFORE TRUNCATE ON directory_tombstones
    FOR EACH STATEMENT EXECUTE FUNCTION directory_tombstones_permanent();

CREATE FUNCTION directory_versions_respect_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM directory_tombstones t
               WHERE t.endpoint = NEW.endpoint AND t.version = NEW.version AND t.hash <> NEW.hash) THEN
        RAISE EXCEPTION 'directory: version is tombstoned with different content';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER directory_versions_respect_tombstone BEFORE INSERT ON directory_versions
    FOR EACH ROW EXECUTE FUNCTION directory_versions_respect_tombstone();
