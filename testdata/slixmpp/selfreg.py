#!/usr/bin/python3
"""Self Registration and a hosted endpoint (agentgw host), checked with slixmpp.

Modes (--mode):
  listed    the gateway's directory lists --target (or, with --absent, not)
  invoke    against --endpoint (a full JID account/resource backed by MCP
            server-everything): pin, echo, progress, elicitation, cancel;
            prints the cancelled task's id for a later "state" run
  state     task-state and task-result of --task-id after a reconnect
  hijack    register a manifest for --target from this (other) account:
            the gateway must answer forbidden, and activation too
  start     invoke a long-running task, wait until it runs, print its
            ids (for a kill -9 of the host)
  recover   --task-id settles agentgw:interrupted, and replaying the same
            --request-id returns the same task
"""

import asyncio
import datetime
import json
import secrets
import time

from agentcheck import *  # noqa: F401,F403

TERMINAL = ("completed", "failed", "cancelled")


def extra_args(p):
    p.add_argument("--mode", required=True)
    p.add_argument("--endpoint", default="")
    p.add_argument("--target", default="")
    p.add_argument("--absent", action="store_true")
    p.add_argument("--task-id", default="")
    p.add_argument("--request-id", default="")
    p.add_argument("--wait", type=float, default=0)


def invoke_el(tool, version, mhash, args, request_id, deadline=None):
    e = el(TASK, "invoke", api_version=version, request_id=request_id, tool=tool)
    mh = el(TASK, "manifest-hash")
    mh.append(el(HASHES, "hash", mhash, algo="sha-256"))
    e.append(mh)
    e.append(el(TASK, "arguments", json.dumps(args), media_type="application/json"))
    if deadline:
        e.append(el(TASK, "deadline", deadline))
    return e


class Hosted:
    def __init__(self, x):
        self.x = x
        self.ep = x.args.endpoint
        self.bare = self.ep.split("/")[0]

    async def pin(self):
        with check("pin"):
            p = await self.x.result("get", self.ep, el(DISCO_INFO, "query"), q(DISCO_INFO, "query"))
            ids = [(i.get("category"), i.get("type")) for i in p.findall(q(DISCO_INFO, "identity"))]
            expect(("automation", "agent-endpoint") in ids, "identities %s", ids)
            feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
            for f in (TASK, TASK + "#progress", TASK + "#cancel", TASK + "#input"):
                expect(f in feats, "endpoint does not advertise %s", f)
            m = await self.x.result("get", self.ep, el(API, "manifest-request"), q(API, "manifest"))
            self.version = m.get("version")
            self.hash = m.find(q(HASHES, "hash")).text
            raw = (m.find(q(API, "json")).text or "").encode("utf-8")
            expect(sha256_b64(raw) == self.hash, "manifest bytes do not match their hash")
            doc = json.loads(raw)
            expect(doc["agent"]["jid"] == self.bare, "agent.jid %r, want %r", doc["agent"]["jid"], self.bare)
            names = {t["name"] for t in doc["tools"]}
            for t in ("echo", "trigger-long-running-operation", "trigger-elicitation-request"):
                expect(t in names, "tool %s missing", t)
            emit("pin", endpoint=self.ep, version=self.version, hash=self.hash)

    async def invoke(self, tool, args, rid=None, deadline=None):
        rid = rid or "req-" + secrets.token_hex(16)
        acc = await self.x.result("set", self.ep, invoke_el(tool, self.version, self.hash, args, rid, deadline), q(TASK, "accepted"))
        return acc.get("task-id"), rid

    async def state(self, tid):
        return await self.x.result("get", self.ep, el(TASK, "task-state-request", task_id=tid), q(TASK, "task-state"))

    async def state_until(self, tid, want, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            st = await self.state(tid)
            if st.get("state") in want:
                return st
            expect(time.monotonic() < deadline, "task-state %s while waiting for %s", st.get("state"), want)
            await asyncio.sleep(0.05)

    async def run_invoke(self):
        await self.pin()
        with check("echo"):
            tid, _ = await self.invoke("echo", {"message": "hello from slixmpp"})
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal")
            expect(ev["type"] == "completed", "echo ended %s", ev["type"])
            expect(ev["from"] == self.bare, "event from %r", ev["from"])
            text = json.dumps(ev["payload"])
            expect("hello from slixmpp" in text, "echo result %s", text)
            emit("echo", task=tid)
        with check("progress"):
            tid, _ = await self.invoke("trigger-long-running-operation", {"duration": 1, "steps": 4})
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal")
            expect(ev["type"] == "completed", "long-running ended %s", ev["type"])
            types = [e["type"] for _, e in sorted(self.x.events[tid].items())]
            expect("progress" in types, "no progress events: %s", types)
            emit("progress", task=tid, events=types)
        with check("elicitation"):
            tid, _ = await self.invoke("trigger-elicitation-request", {})
            ir = await self.x.wait_event(tid, lambda e: e["type"] == "input_required", "input_required")
            req = ir["payload"]
            pi = el(TASK, "provide-input", expected_revision=ir["revision"], request_id=req["requestId"], task_id=tid)
            pi.append(el(TASK, "input", json.dumps({"name": "Ada Lovelace", "check": True, "integer": 7}), media_type="application/json"))
            await self.x.result("set", self.ep, pi, q(TASK, "input-accepted"))
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal")
            expect(ev["type"] == "completed", "elicitation ended %s", ev["type"])
            expect("Ada Lovelace" in json.dumps(ev["payload"]), "elicitation result lacks the answer")
            emit("elicitation", task=tid)
        with check("cancel"):
            tid, _ = await self.invoke("trigger-long-running-operation", {"duration": 30, "steps": 30})
            st = await self.state_until(tid, ("running",))
            c = el(TASK, "cancel", expected_revision=st.get("revision"), task_id=tid)
            c.append(el(TASK, "reason", "stop"))
            await self.x.result("set", self.ep, c, q(TASK, "cancel-accepted"))
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal")
            expect(ev["type"] == "cancelled", "cancel ended %s", ev["type"])
            emit("cancel", task=tid, cancelled_task=tid)
        with check("deadline"):
            at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
            tid, _ = await self.invoke("trigger-long-running-operation", {"duration": 30, "steps": 30},
                                       deadline=at.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal")
            expect(ev["type"] == "failed" and ev["payload"]["error"]["code"] == "deadline-expired",
                   "deadline task ended %s %s", ev["type"], ev["payload"])
            emit("deadline", task=tid)

    async def run_state(self):
        with check("reconnect-state"):
            st = await self.state(self.x.args.task_id)
            expect(st.get("state") == "cancelled", "task-state %s after reconnect", st.get("state"))
            expect(st.get("endpoint", self.bare) in (self.bare,), "task-state endpoint %r", st.get("endpoint"))
            res = await self.x.result("get", self.ep, el(TASK, "task-result-request", task_id=self.x.args.task_id), q(TASK, "task-result"))
            expect(res.get("state") == "cancelled", "task-result %s", res.get("state"))
            emit("reconnect-state", state=st.get("state"))

    async def run_start(self):
        await self.pin()
        with check("start"):
            tid, rid = await self.invoke("trigger-long-running-operation", {"duration": 60, "steps": 30})
            await self.state_until(tid, ("running",))
            emit("start", task_id=tid, request_id=rid, version=self.version, hash=self.hash)

    async def run_recover(self):
        await self.pin()
        tid, rid = self.x.args.task_id, self.x.args.request_id
        with check("interrupted"):
            st = await self.state_until(tid, TERMINAL)
            expect(st.get("state") == "failed", "task ended %s, want failed", st.get("state"))
            res = await self.x.result("get", self.ep, el(TASK, "task-result-request", task_id=tid), q(TASK, "task-result"))
            text = "".join(res.itertext())
            expect("agentgw:interrupted" in text, "task-result lacks agentgw:interrupted: %s", text[:300])
            emit("interrupted", task=tid)
        with check("replay"):
            again, _ = await self.invoke("trigger-long-running-operation", {"duration": 60, "steps": 30}, rid)
            expect(again == tid, "replay returned task %s, want %s", again, tid)
            emit("replay", task=again)


async def listed(x):
    deadline = time.monotonic() + max(x.args.wait, 0.1)
    while True:
        p = await x.result("get", x.args.gateway, el(DISCO_ITEMS, "query"), q(DISCO_ITEMS, "query"))
        jids = [i.get("jid") for i in p.findall(q(DISCO_ITEMS, "item"))]
        present = x.args.target in jids
        if present != x.args.absent:
            emit("listed", target=x.args.target, present=present, items=jids)
            return
        expect(time.monotonic() < deadline, "%s %s the directory: %s", x.args.target,
               "still in" if x.args.absent else "not in", jids)
        await asyncio.sleep(0.1)


async def hijack(x):
    target = x.args.target
    with check("gateway-feature"):
        p = await x.result("get", x.args.gateway, el(DISCO_INFO, "query"), q(DISCO_INFO, "query"))
        feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
        emit("gateway-feature", self_register=API + "#self-register" in feats)
    with check("hijack-register"):
        doc = {"manifestSpecVersion": "0", "agent": {"jid": target, "name": "evil", "version": "6.6.6"}, "tools": []}
        r = el(API, "register")
        r.append(el(API, "manifest", json.dumps(doc), media_type="application/json"))
        await x.error("set", x.args.gateway, r, "forbidden")
        emit("hijack-register", target=target)
    with check("hijack-activate"):
        a = el(API, "activate", jid=target, version="6.6.6")
        a.append(el(HASHES, "hash", "K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4=", algo="sha-256"))
        await x.error("set", x.args.gateway, a, "forbidden")
        emit("hijack-activate", target=target)


async def scenario(x):
    mode = x.args.mode
    if mode == "listed":
        await listed(x)
    elif mode == "hijack":
        await hijack(x)
    elif mode == "invoke":
        await Hosted(x).run_invoke()
    elif mode == "state":
        await Hosted(x).run_state()
    elif mode == "start":
        await Hosted(x).run_start()
    elif mode == "recover":
        await Hosted(x).run_recover()
    else:
        raise CheckFailed("unknown mode %r" % mode)


if __name__ == "__main__":
    run(scenario, extra_args)
