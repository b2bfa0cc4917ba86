-- Presence subscribers of virtual endpoints (directory/presencedb), the
-- PostgreSQL twin of store/sqlite/migrations/0270_presence.sql: shared by
-- the members of a cluster.
CREATE TABLE presence_subscribers (
    endpoint   text COLLATE "C" NOT NULL,
    subscriber text COLLATE "C" NOT NULL,
    PRIMARY KEY (endpoint, subscriber)
);
