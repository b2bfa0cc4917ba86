#!/usr/bin/python3
"""Caller side of the agentgw cluster test, with slixmpp.

Against one endpoint (--endpoint) backed by testdata/cluster/countmcp.py
(tool "work" {"n", "ms"}) on several gateway instances behind one ejabberd
component domain, which spreads every stanza over the instances at random.

--mode storm: invokes --count tasks n = --first .. --first+count-1, at most
  --inflight at once. A request whose IQ is lost (sent to an instance as it
  was killed) or refused as temporarily unavailable is replayed with the
  same request-id, as the spec tells callers to recover. It then polls
  task-state (from any instance) until every task is terminal and prints
  one line per task: n, request-id, task-id, final state, revision,
  failure code.
--mode replay: sends the same invoke twice at once, --count times, and
  checks both answers name one task; prints the task ids.
--mode invoke: invokes once (retrying as above) and waits for the
  terminal state; prints it.
"""

import asyncio
import json
import secrets
import time

from agentcheck import *  # noqa: F401,F403

TERMINAL = ("completed", "failed", "cancelled")
RETRY = ("service-unavailable", "internal-server-error", "remote-server-timeout",
         "recipient-unavailable", "resource-constraint", "remote-server-not-found", "timeout")


def extra_args(p):
    p.add_argument("--endpoint", required=True)
    p.add_argument("--mode", default="storm")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--inflight", type=int, default=16)
    p.add_argument("--ms", type=int, default=200)
    p.add_argument("--iq-timeout", type=float, default=4.0)
    p.add_argument("--tool", default="work")


def new_id(prefix):
    return prefix + secrets.token_hex(16)


def invoke_el(tool, version, mhash, args, request_id):
    e = el(TASK, "invoke", api_version=version, request_id=request_id, tool=tool)
    mh = el(TASK, "manifest-hash")
    mh.append(el(HASHES, "hash", mhash, algo="sha-256"))
    e.append(mh)
    e.append(el(TASK, "arguments", json.dumps(args), media_type="application/json"))
    return e


class Cluster:
    def __init__(self, x):
        self.x = x
        self.a = x.args
        self.ep = x.args.endpoint
        self.retries = 0

    async def ask(self, typ, payload, child, budget=120):
        """An IQ to the endpoint, retried on loss and on transient errors
        (each retry may land on another instance)."""
        deadline = time.monotonic() + budget
        while True:
            iq = self.x.Iq()
            iq["type"], iq["to"] = typ, self.ep
            iq.xml.append(payload)
            cond = None
            try:
                reply = (await iq.send(timeout=self.a.iq_timeout)).xml
            except IqError as e:
                reply = e.iq.xml
            except IqTimeout:
                reply, cond = None, "timeout"
            if reply is not None and reply.get("type") == "result":
                kids = list(reply)
                p = kids[0] if kids else None
                expect(p is not None and p.tag == child, "%s: result payload %s", payload.tag, None if p is None else p.tag)
                return p
            if cond is None:
                cond = error_condition(reply)
            expect(cond in RETRY, "%s failed with %s", payload.tag, cond)
            expect(time.monotonic() < deadline, "%s still failing (%s) after %ss", payload.tag, cond, budget)
            self.retries += 1
            await asyncio.sleep(0.2)

    async def pin(self):
        m = await self.ask("get", el(API, "manifest-request"), q(API, "manifest"))
        self.version = m.get("version")
        self.hash = m.find(q(HASHES, "hash")).text

    async def invoke(self, n, rid=None):
        rid = rid or new_id("req-")
        args = {"n": n, "ms": self.a.ms}
        acc = await self.ask("set", invoke_el(self.a.tool, self.version, self.hash, args, rid), q(TASK, "accepted"))
        expect(acc.get("request-id") == rid, "accepted request-id %r", acc.get("request-id"))
        return acc.get("task-id"), rid

    async def final(self, tid, budget=180):
        deadline = time.monotonic() + budget
        while True:
            st = await self.ask("get", el(TASK, "task-state-request", task_id=tid), q(TASK, "task-state"))
            if st.get("state") in TERMINAL:
                code = ""
                if st.get("state") == "failed":
                    r = await self.ask("get", el(TASK, "task-result-request", task_id=tid), q(TASK, "task-result"))
                    code = json.loads(r.text)["error"]["code"]
                return st.get("state"), int(st.get("revision")), code
            expect(time.monotonic() < deadline, "task %s still %s", tid, st.get("state"))
            await asyncio.sleep(0.25)

    async def storm(self):
        with check("storm"):
            await self.pin()
            sem = asyncio.Semaphore(self.a.inflight)
            accepted = {}

            async def one(n):
                async with sem:
                    accepted[n] = await self.invoke(n)

            await asyncio.gather(*(one(n) for n in range(self.a.first, self.a.first + self.a.count)))
            emit("accepted", count=len(accepted), retries=self.retries)

            async def fin(n):
                async with sem:
                    tid, rid = accepted[n]
                    state, rev, code = await self.final(tid)
                    emit("task", n=n, request_id=rid, task_id=tid, state=state, revision=rev, code=code)

            await asyncio.gather(*(fin(n) for n in sorted(accepted)))

    async def replay(self):
        with check("replay"):
            await self.pin()
            for i in range(self.a.count):
                rid = new_id("req-")
                n = self.a.first + i
                (t1, _), (t2, _) = await asyncio.gather(self.invoke(n, rid), self.invoke(n, rid))
                expect(t1 == t2, "one request-id answered with tasks %s and %s", t1, t2)
                emit("replay", n=n, task_id=t1)

    async def once(self):
        with check("invoke"):
            await self.pin()
            tid, rid = await self.invoke(self.a.first)
            state, rev, code = await self.final(tid)
            emit("invoke", n=self.a.first, task_id=tid, state=state, revision=rev, code=code)


async def scenario(x):
    c = Cluster(x)
    await {"storm": c.storm, "replay": c.replay, "invoke": c.once}[x.args.mode]()


if __name__ == "__main__":
    run(scenario, extra_args)
