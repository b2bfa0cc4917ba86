#!/usr/bin/env python3
"""Statement cost of one echo task's SQLite transitions (issue 34's cost model).

Runs exactly the statements the engine issues for one MCP echo task
(admission + start in one commit; the completion in a second, with its
re-read) on the real migrated schema, and times the process CPU per task,
with the guard triggers of migration 0002 and with them dropped, in
alternating rounds. SYNC=FULL (the gateway's setting) or SYNC=OFF (statement
CPU alone, no fsync). Usage: SYNC=OFF python3 scripts/sqlite-transition-cost.py [tasks-per-round]
"""
import glob, os, sqlite3, statistics, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATIONS = sorted(glob.glob(os.path.join(ROOT, 'store/sqlite/migrations/*.sql')))
SYNC = os.environ.get('SYNC', 'OFF')
if SYNC not in ('OFF', 'NORMAL', 'FULL'):
    sys.exit('SYNC must be OFF, NORMAL or FULL')

INS = ("INSERT INTO tasks (id, caller, route, endpoint, request_id, tool, api_version, manifest_hash,"
       " arguments, fingerprint, deadline, deadline_ns, state, revision, dispatched, created_ns,"
       " updated_ns, retain_until_ns, purge_after_ns)"
       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'accepted',0,0,?,?,?,?)"
       " ON CONFLICT (caller, endpoint, request_id) DO NOTHING")
UPD = ("UPDATE tasks SET state=?, revision=?, dispatched=?, updated_ns=?, input_request_id=?,"
       " cancel_key=?, cancel_revision=? WHERE id=? AND revision=? AND state IN (?,?,?,?,?,?,?)")
FIN = ("UPDATE tasks SET state=?, revision=?, updated_ns=?, purge_after_ns=?, input_request_id=?,"
       " result=? WHERE id=? AND revision=? AND state IN (?,?,?,?,?,?,?)")
EV = "INSERT INTO task_events (task_id, revision, event_id, type, payload, created_ns) VALUES (?,?,?,?,?,?)"
SEL = "SELECT * FROM tasks WHERE id=?"


def open_db(path, drop_triggers):
    c = sqlite3.connect(path, isolation_level=None)
    c.execute('PRAGMA journal_mode=WAL')
    c.execute('PRAGMA synchronous=' + SYNC)
    c.execute('PRAGMA foreign_keys=ON')
    for m in MIGRATIONS:
        with open(m) as f:
            c.executescript(f.read())
    if drop_triggers:
        c.execute('DROP TRIGGER tasks_guard')
        c.execute('DROP TRIGGER task_events_at_revision')
    return c


def run(c, n, off):
    t0 = time.process_time()
    for i in range(off, off + n):
        tid, rid = 'T%030d' % i, 'R%030d' % i
        c.execute('BEGIN IMMEDIATE')
        c.execute(INS, (tid, 'alice@example.test/r', 'alice@example.test/r', 'everything@agents.example.test',
                        rid, 'echo', '1', 'h', b'{"message":"hello"}', b'x' * 32, '2026-12-03T00:00:00Z', 1,
                        i, i, i, i))
        c.execute(UPD, ('running', 1, 1, i, None, None, None, tid, 0) + ('accepted',) * 7)
        c.execute(EV, (tid, 1, 'E%030d' % (2 * i), 'status', b'<status/>' * 8, i))
        c.execute('COMMIT')
        c.execute('BEGIN IMMEDIATE')
        c.execute(SEL, (tid,)).fetchone()
        c.execute(FIN, ('completed', 2, i, i, None, b'{"content":[{"type":"text","text":"Echo: hello"}]}',
                        tid, 1, 'accepted', 'running', 'input_required', 'cancelling', 'cancelling',
                        'cancelling', 'cancelling'))
        c.execute(EV, (tid, 2, 'E%030d' % (2 * i + 1), 'completed', b'<completed/>' * 8, i))
        c.execute('COMMIT')
    return (time.process_time() - t0) / n * 1e6


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    with tempfile.TemporaryDirectory() as d:
        dbs = {False: open_db(os.path.join(d, 'a.db'), False), True: open_db(os.path.join(d, 'b.db'), True)}
        res = {False: [], True: []}
        for rnd in range(5):
            for drop in (False, True):
                res[drop].append(run(dbs[drop], n, rnd * n))
        for drop in (False, True):
            print('triggers dropped' if drop else 'triggers (main) ', 'µs/task median',
                  round(statistics.median(res[drop]), 1), [round(x, 1) for x in res[drop]])
        print('per-pair ratios', [round(b / a, 3) for a, b in zip(res[False], res[True])],
              'median', round(statistics.median([b / a for a, b in zip(res[False], res[True])]), 3))


if __name__ == '__main__':
    main()
