-- Presence subscribers of virtual endpoints (directory/presencedb): kept so
-- that a restart does not forget who is told of availability changes.
CREATE TABLE IF NOT EXISTS presence_subscribers (
    endpoint   TEXT NOT NULL,
    subscriber TEXT NOT NULL,
    PRIMARY KEY (endpoint, subscriber)
) STRICT;
