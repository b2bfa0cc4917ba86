-- The database of an agentgw cluster (run as a PostgreSQL superuser, e.g.
-- `sudo -u postgres psql -f postgresql.sql`). agentgw creates its tables
-- itself, once, under an advisory lock, when the first instance starts.
-- Set the password with \password agentgw and put it in the DSN
-- (AGENTGW_DATABASE_URL=postgresql://agentgw:…@db.example.test:5432/agentgw).
CREATE ROLE agentgw LOGIN;
CREATE DATABASE agentgw OWNER agentgw;
