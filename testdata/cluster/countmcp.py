#!/usr/bin/python3
"""A minimal MCP stdio server for the cluster test: every tools/call of
"work" appends its "n" argument and this server's instance to the shared
log file (O_APPEND, one line per execution), so the test can count how many
times each task was executed across all gateway instances.

Tools:
  work  {"n": int, "ms": int}   sleeps ms, then returns "done n"
  ask   {"n": int}              asks the client for a city (form
                                elicitation), then returns "answer <city>"
"""

import json
import os
import sys
import threading
import time

LOG = sys.argv[1]
INSTANCE = sys.argv[2] if len(sys.argv) > 2 else "?"
out_lock = threading.Lock()


def send(msg):
    line = json.dumps(msg, separators=(",", ":")) + "\n"
    with out_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


TOOLS = [{
    "name": "work",
    "description": "Records one execution, waits, returns.",
    "inputSchema": {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "ms": {"type": "integer"}},
        "required": ["n"],
    },
}, {
    "name": "ask",
    "description": "Records one execution, asks for a city, returns it.",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}]

pending = {}  # elicitation request id -> [threading.Event, response]
pending_lock = threading.Lock()
seq = [0]


def elicit(message, schema):
    with pending_lock:
        seq[0] += 1
        eid = "elicit-%d" % seq[0]
        slot = [threading.Event(), None]
        pending[eid] = slot
    send({"jsonrpc": "2.0", "id": eid, "method": "elicitation/create",
          "params": {"message": message, "requestedSchema": schema}})
    slot[0].wait()
    return slot[1]


def call(rid, params):
    args = params.get("arguments") or {}
    n = args.get("n")
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, ("%s %s\n" % (n, INSTANCE)).encode())
    os.close(fd)
    if params.get("name") == "ask":
        resp = elicit("Which city?", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
        if (resp or {}).get("error"):
            send({"jsonrpc": "2.0", "id": rid, "result": {"isError": True, "content": [{"type": "text", "text": "elicitation refused: %s" % resp["error"].get("message")}]}})
            return
        res = (resp or {}).get("result") or {}
        city = (res.get("content") or {}).get("city", "?") if res.get("action") == "accept" else res.get("action", "error")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "answer %s" % city}]}})
        return
    time.sleep(max(0, int(args.get("ms", 0))) / 1000.0)
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "done %s" % n}]}})


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid = msg.get("method"), msg.get("id")
        if method is None and rid is not None:
            with pending_lock:
                slot = pending.pop(rid, None)
            if slot is not None:
                slot[1] = msg
                slot[0].set()
            continue
        if rid is None:
            continue  # notifications
        if method == "initialize":
            ver = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": ver,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "countmcp", "version": "1.0.0"},
            }})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            threading.Thread(target=call, args=(rid, msg.get("params") or {}), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})


if __name__ == "__main__":
    main()
