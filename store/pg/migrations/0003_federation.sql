-- Operator trust grants for remote principals (package federation/grantpg),
-- the PostgreSQL twin of federation/grantsqlite/migrations/0003_federation.sql.
-- A principal is a bare JID or a domain; endpoint '' means every endpoint.
-- Scope bits: 1 visibility, 2 invocation.
CREATE TABLE trust_grants (
    principal  text COLLATE "C" NOT NULL CHECK (length(principal) BETWEEN 1 AND 3071),
    endpoint   text COLLATE "C" NOT NULL DEFAULT '' CHECK (length(endpoint) <= 3071),
    scope      integer NOT NULL CHECK (scope IN (1, 2, 3)),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (principal, endpoint)
);
