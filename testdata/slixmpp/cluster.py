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
--mode signals: --count times, cancels a long "work" task once it runs
  and answers an "ask" task's input request, each IQ landing on whichever
  instance ejabberd picks (the owner in one case out of three): the
  cancelled task must settle cancelled and the answer must reach the
  owner's backend call.
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
        # Polled from 0.25 s up to 2 s between reads: a storm's late tasks
        # wait behind hundreds of others, and polling each at 4 Hz was most
        # of the round's stanzas (and of the test's CPU).
        pause = 0.25
        while True:
            st = await self.ask("get", el(TASK, "task-state-request", task_id=tid), q(TASK, "task-state"))
            if st.get("state") in TERMINAL:
                code = ""
                if st.get("state") == "failed":
                    r = await self.ask("get", el(TASK, "task-result-request", task_id=tid), q(TASK, "task-result"))
                    code = json.loads(r.text)["error"]["code"]
                return st.get("state"), int(st.get("revision")), code
            expect(time.monotonic() < deadline, "task %s still %s", tid, st.get("state"))
            await asyncio.sleep(pause)
            pause = min(2.0, pause * 1.5)

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


    async def state_until(self, tid, want, budget=60):
        deadline = time.monotonic() + budget
        while True:
            st = await self.ask("get", el(TASK, "task-state-request", task_id=tid), q(TASK, "task-state"))
            if st.get("state") == want:
                return st
            expect(st.get("state") in ("accepted", "running") and time.monotonic() < deadline,
                   "task %s is %s while waiting for %s", tid, st.get("state"), want)
            await asyncio.sleep(0.1)

    async def signals(self):
        await self.pin()
        # Answers first: the MCP bridge attributes an elicitation only while
        # no abandoned (cancelled) call may still run at the server.
        for i in range(self.a.count):
            n = self.a.first + i
            with check("input"):
                acc = await self.ask("set", invoke_el("ask", self.version, self.hash, {"n": n}, new_id("req-")), q(TASK, "accepted"))
                tid = acc.get("task-id")
                try:
                    st = await self.state_until(tid, "input_required")
                except CheckFailed:
                    r = await self.ask("get", el(TASK, "task-result-request", task_id=tid), q(TASK, "task-result"))
                    raise CheckFailed("the ask task settled without asking: %s" % r.text)
                pi = st.find(q(TASK, "pending-input"))
                expect(pi is not None, "task-state lacks pending-input")
                req = json.loads(pi.text)
                e = el(TASK, "provide-input", expected_revision=st.get("revision"), request_id=req["requestId"], task_id=tid)
                e.append(el(TASK, "input", json.dumps({"city": "Oslo"}), media_type="application/json"))
                await self.ask("set", e, q(TASK, "input-accepted"))
                state, rev, code = await self.final(tid, budget=30)
                expect(state == "completed", "answered task ended %s %s", state, code)
                r = await self.ask("get", el(TASK, "task-result-request", task_id=tid), q(TASK, "task-result"))
                expect("answer Oslo" in r.text, "the answer did not reach the backend: %s", r.text)
                emit("input", n=n, task_id=tid)
        for i in range(self.a.count):
            n = self.a.first + self.a.count + i
            with check("cancel"):
                a = {"n": n, "ms": 120000}
                acc = await self.ask("set", invoke_el("work", self.version, self.hash, a, new_id("req-")), q(TASK, "accepted"))
                tid = acc.get("task-id")
                st = await self.state_until(tid, "running")
                c = el(TASK, "cancel", expected_revision=st.get("revision"), task_id=tid)
                await self.ask("set", c, q(TASK, "cancel-accepted"))
                state, rev, code = await self.final(tid, budget=30)
                expect(state == "cancelled", "cancelled task ended %s %s", state, code)
                emit("cancel", n=n, task_id=tid)


async def scenario(x):
    c = Cluster(x)
    await {"storm": c.storm, "replay": c.replay, "invoke": c.once, "signals": c.signals}[x.args.mode]()


if __name__ == "__main__":
    run(scenario, extra_args)
