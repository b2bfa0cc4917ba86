#!/usr/bin/python3
"""The federation trust model, seen by a remote slixmpp client.

The caller sits on another server and reaches the gateway over s2s. The
mode says which grants the operator has given the caller's domain:

  none        every discovery surface and invoke answer item-not-found,
              and the directory is empty with count 0;
  visibility  discovery works, invoke still answers item-not-found;
  invocation  discovery answers item-not-found again, but an invoke with
              the pins handed over out of band (--version, --hash) is
              accepted and its completed event arrives over s2s.
"""

import secrets

from agentcheck import *  # noqa: F401,F403


def extra_args(p):
    p.add_argument("--mode", choices=["none", "visibility", "invocation"], required=True)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--hash", required=True)


def invoke(args, request_id):
    e = el(TASK, "invoke", **{"api-version": args.version, "request-id": request_id, "tool": "echo"})
    mh = el(TASK, "manifest-hash")
    mh.append(el(HASHES, "hash", args.hash, algo="sha-256"))
    e.append(mh)
    e.append(el(TASK, "arguments", '{"message":"over s2s"}', **{"media-type": "application/json"}))
    return e


def discovery_probes(args):
    ep = args.endpoint
    schema = el(API, "schema-request", direction="input", tool="echo", version=args.version)
    schema.append(el(HASHES, "hash", args.hash, algo="sha-256"))
    items = el(DISCO_ITEMS, "query")
    items.set("node", TOOLS_NODE + "#" + args.version)
    return [
        ("endpoint info", "get", ep, el(DISCO_INFO, "query")),
        ("tool items", "get", ep, items),
        ("manifest", "get", ep, el(API, "manifest-request")),
        ("schema", "get", ep, schema),
    ]


async def scenario(x):
    a = x.args
    want_discovery = "result" if a.mode == "visibility" else "item-not-found"
    for name, typ, to, payload in discovery_probes(a):
        with check("discovery " + name):
            reply = await x.query(typ, to, payload)
            got = "result" if reply.get("type") == "result" else error_condition(reply)
            expect(got == want_discovery, "%s: got %s, want %s", name, got, want_discovery)
            emit("discovery " + name, got=got)
    with check("directory"):
        query = el(DISCO_ITEMS, "query")
        rsm = el(RSM, "set")
        rsm.append(el(RSM, "max", "50"))
        query.append(rsm)
        res = await x.result("get", a.gateway, query)
        items = [i.get("jid") for i in res.findall(q_(DISCO_ITEMS, "item"))]
        count = res.find(q_(RSM, "set") + "/" + q_(RSM, "count"))
        n = int(count.text) if count is not None else -1
        if a.mode == "visibility":
            expect(a.endpoint in items and n >= 1, "directory %s count %d lacks %s", items, n, a.endpoint)
        else:
            expect(items == [] and n == 0, "directory %s count %d, want empty with count 0", items, n)
        emit("directory", items=items, count=n)
    with check("invoke"):
        rid = "req-" + secrets.token_urlsafe(16)
        if a.mode == "invocation":
            acc = await x.result("set", a.endpoint, invoke(a, rid), q_(TASK, "accepted"))
            task_id = acc.get("task-id")
            ev = await x.wait_event(task_id, lambda e: e["type"] in ("completed", "failed", "cancelled"), "terminal", timeout=60)
            expect(ev["type"] == "completed", "federated task ended %s", ev["type"])
            expect(ev["from"] == a.endpoint, "event from %s, want %s", ev["from"], a.endpoint)
            emit("invoke", task=task_id, state=ev["type"], revision=ev["revision"])
        else:
            await x.error("set", a.endpoint, invoke(a, rid), "item-not-found")
            emit("invoke", got="item-not-found")


def q_(ns, local):
    return q(ns, local)


if __name__ == "__main__":
    run(scenario, extra_args)
