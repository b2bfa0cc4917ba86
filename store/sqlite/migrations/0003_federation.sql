-- Operator trust grants for remote principals. A principal is a bare JID or
-- a domain; endpoint '' means every endpoint. Scope bits: 1 visibility,
-- 2 invocation.
CREATE TABLE trust_grants (
    principal  TEXT NOT NULL CHECK (length(principal) BETWEEN 1 AND 3071),
    endpoint   TEXT NOT NULL DEFAULT '' CHECK (length(endpoint) <= 3071),
    scope      INTEGER NOT NULL CHECK (scope IN (1, 2, 3)),
    created_at TEXT NOT NULL,
    PRIMARY KEY (principal, endpoint)
) STRICT;
