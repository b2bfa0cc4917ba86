#!/usr/bin/python3
"""Task lifecycle conformance of an XMPP Agent Gateway, checked with slixmpp.

Against one endpoint (--endpoint) whose tools are scripted as:
  flow  progress, then an input request {unit: C|F}, then echo
  echo  completes with its arguments
  wait  runs until cancelled, then settles cancelled
  fail  fails with com.example:broken
it checks invocation and replay, progress and input (the spec's examples),
cancellation and its races, failure and deadline expiry, with gap-free
revisions and spec-shaped event payloads throughout.
"""

import asyncio
import datetime
import json
import secrets
import time

from agentcheck import *  # noqa: F401,F403

TERMINAL = ("completed", "failed", "cancelled")


def extra_args(p):
    p.add_argument("--endpoint", required=True)
    p.add_argument("--deadline-seconds", type=float, default=2.0)


def new_id(prefix):
    return prefix + secrets.token_hex(16)


def invoke_el(tool, version, mhash, args, request_id, deadline=None):
    e = el(TASK, "invoke", api_version=version, request_id=request_id, tool=tool)
    mh = el(TASK, "manifest-hash")
    mh.append(el(HASHES, "hash", mhash, algo="sha-256"))
    e.append(mh)
    e.append(el(TASK, "arguments", json.dumps(args), media_type="application/json"))
    if deadline:
        e.append(el(TASK, "deadline", deadline))
    return e


def cancel_el(task_id, expected, reason=None):
    e = el(TASK, "cancel", expected_revision=expected, task_id=task_id)
    if reason is not None:
        e.append(el(TASK, "reason", reason))
    return e


def provide_input_el(task_id, request_id, expected, value):
    e = el(TASK, "provide-input", expected_revision=expected, request_id=request_id, task_id=task_id)
    e.append(el(TASK, "input", json.dumps(value), media_type="application/json"))
    return e


class Tasks:
    def __init__(self, x):
        self.x = x
        self.ep = x.args.endpoint

    async def pin(self):
        with check("pin"):
            p = await self.x.result("get", self.ep, el(DISCO_INFO, "query"), q(DISCO_INFO, "query"))
            feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
            for f in (TASK, TASK + "#progress", TASK + "#cancel", TASK + "#input"):
                expect(f in feats, "endpoint does not advertise %s", f)
            m = await self.x.result("get", self.ep, el(API, "manifest-request"), q(API, "manifest"))
            self.version = m.get("version")
            self.hash = m.find(q(HASHES, "hash")).text
            raw = (m.find(q(API, "json")).text or "").encode("utf-8")
            expect(sha256_b64(raw) == self.hash, "manifest bytes do not match their hash")
            emit("pin", endpoint=self.ep, version=self.version, hash=self.hash)

    async def invoke(self, tool, args, request_id=None, deadline=None):
        rid = request_id or new_id("req-")
        acc = await self.x.result("set", self.ep, invoke_el(tool, self.version, self.hash, args, rid, deadline), q(TASK, "accepted"))
        expect(acc.get("request-id") == rid, "accepted request-id %r, want %r", acc.get("request-id"), rid)
        expect(acc.get("revision") == "0", "accepted revision %r, want 0", acc.get("revision"))
        for a in ("task-id", "created", "retain-until"):
            expect(acc.get(a), "accepted lacks %s", a)
        return acc.get("task-id"), rid

    async def state(self, task_id):
        return await self.x.result("get", self.ep, el(TASK, "task-state-request", task_id=task_id), q(TASK, "task-state"))

    async def state_until(self, task_id, want, timeout=30):
        """Polls task-state, as a recovering caller would, until the task
        is in state want; returns that task-state."""
        deadline = time.monotonic() + timeout
        while True:
            st = await self.state(task_id)
            if st.get("state") == want:
                return st
            expect(st.get("state") == "accepted" and time.monotonic() < deadline,
                   "task-state %s@%s while waiting for %s", st.get("state"), st.get("revision"), want)
            await asyncio.sleep(0.02)

    async def task_result(self, task_id):
        return await self.x.result("get", self.ep, el(TASK, "task-result-request", task_id=task_id), q(TASK, "task-result"))

    async def terminal(self, task_id, timeout=30):
        return await self.x.wait_event(task_id, lambda e: e["type"] in TERMINAL, "terminal", timeout)

    def check_history(self, task_id, terminal_rev):
        """Revisions 1..terminal are all present exactly once, with one
        event each and nothing after the terminal one."""
        evs = self.x.events.get(task_id, {})
        revs = sorted(evs)
        expect(revs == list(range(1, terminal_rev + 1)), "revisions %s are not gap-free 1..%d", revs, terminal_rev)
        expect(len({e["event_id"] for e in evs.values()}) == len(evs), "event ids repeat")
        for e in evs.values():
            expect(e["from"] == self.ep, "event from %r", e["from"])
        return [evs[r]["type"] for r in revs]

    async def check_settled(self, task_id, ev):
        st = await self.state(task_id)
        expect(st.get("state") == ev["type"], "task-state %r, want %r", st.get("state"), ev["type"])
        expect(st.get("revision") == str(ev["revision"]), "task-state revision %r, want %d", st.get("revision"), ev["revision"])
        expect(st.get("result-available") in ("true", "1"), "result-available %r", st.get("result-available"))
        expect(st.get("endpoint") == self.ep and st.get("api-version") == self.version, "task-state endpoint/version")
        h = st.find("%s/%s" % (q(TASK, "manifest-hash"), q(HASHES, "hash")))
        expect(h is not None and h.text == self.hash, "task-state manifest hash")
        r = await self.task_result(task_id)
        expect(r.get("state") == ev["type"] and r.get("revision") == str(ev["revision"]), "task-result %s@%s", r.get("state"), r.get("revision"))
        expect(r.get("media-type") == "application/json", "task-result media-type %r", r.get("media-type"))
        expect(json.loads(r.text) == ev["payload"], "task-result payload differs from the terminal event")
        return st

    # ---- checks ----------------------------------------------------------

    async def flow(self):
        with check("invoke-progress-input-completed"):
            args = {"message": "hi"}
            tid, rid = await self.invoke("flow", args)
            # Replay: the identical request returns the same task.
            tid2, _ = await self.invoke("flow", args, request_id=rid)
            expect(tid2 == tid, "replay returned task %s, want %s", tid2, tid)
            await self.x.error("set", self.ep, invoke_el("flow", self.version, self.hash, {"message": "changed"}, rid), "conflict")

            ir = await self.x.wait_event(tid, lambda e: e["type"] == "input_required", "input_required")
            req = ir["payload"]
            expect(req["question"] == "Which unit?", "question %r", req["question"])
            st = await self.state(tid)
            expect(st.get("state") == "input_required" and st.get("revision") == str(ir["revision"]),
                   "task-state %s@%s during input", st.get("state"), st.get("revision"))
            pi = st.find(q(TASK, "pending-input"))
            expect(pi is not None and pi.get("media-type") == "application/json", "task-state lacks pending-input")
            expect(json.loads(pi.text) == req, "pending-input differs from the input_required event")

            # Invalid input is refused, stale revisions conflict.
            await self.x.error("set", self.ep, provide_input_el(tid, req["requestId"], ir["revision"], {"unit": "K"}), "not-acceptable")
            await self.x.error("set", self.ep, provide_input_el(tid, req["requestId"], ir["revision"] - 1, {"unit": "C"}), "conflict")
            ok = await self.x.result("set", self.ep, provide_input_el(tid, req["requestId"], ir["revision"], {"unit": "C"}), q(TASK, "input-accepted"))
            expect(ok.get("task-id") == tid and ok.get("revision") == str(ir["revision"] + 1),
                   "input-accepted %s@%s, want revision %d", ok.get("task-id"), ok.get("revision"), ir["revision"] + 1)

            ev = await self.terminal(tid)
            expect(ev["type"] == "completed", "flow settled %s: %s", ev["type"], ev["payload"])
            res = ev["payload"]["result"]
            expect(res.get("structuredContent") == args, "structuredContent %r", res.get("structuredContent"))
            expect(res.get("_meta", {}).get("inputs") == [{"unit": "C"}], "_meta.inputs %r", res.get("_meta"))
            # The identical input replay returns the original acceptance.
            again = await self.x.result("set", self.ep, provide_input_el(tid, req["requestId"], ir["revision"], {"unit": "C"}), q(TASK, "input-accepted"))
            expect(again.get("revision") == ok.get("revision"), "input replay revision %r", again.get("revision"))

            types = self.check_history(tid, ev["revision"])
            expect(types[0] == "status" and self.x.events[tid][1]["payload"]["state"] == "running", "first event %s", types[0])
            ip, ii = types.index("progress"), types.index("input_required")
            expect(ip < ii < len(types) - 1, "event order %s", types)
            resumed = self.x.events[tid][ir["revision"] + 1]
            expect(resumed["type"] == "status" and resumed["payload"]["state"] == "running", "after input: %s", resumed["type"])
            prog = self.x.events[tid][ip + 1]["payload"]
            expect(prog.get("percent") == 50 and prog.get("stage") and prog.get("message"), "progress payload %r", prog)
            await self.check_settled(tid, ev)
            emit("invoke-progress-input-completed", task=tid, events=types, terminal_revision=ev["revision"])

    async def cancel(self):
        with check("cancel"):
            tid, _ = await self.invoke("wait", {})
            running = await self.x.wait_event(tid, lambda e: e["type"] == "status" and e["payload"]["state"] == "running", "running")
            st = await self.state(tid)
            rev = int(st.get("revision"))
            expect(st.get("state") == "running" and rev == running["revision"], "state %s@%d before cancel", st.get("state"), rev)
            # A stale expected revision conflicts and changes nothing.
            await self.x.error("set", self.ep, cancel_el(tid, rev - 1, "stop"), "conflict")
            st = await self.state(tid)
            expect(st.get("state") == "running" and st.get("revision") == str(rev), "stale cancel changed the task")
            acc = await self.x.result("set", self.ep, cancel_el(tid, rev, "stop"), q(TASK, "cancel-accepted"))
            crev = int(acc.get("revision"))
            expect(acc.get("task-id") == tid and crev == rev + 1, "cancel-accepted revision %d, want %d", crev, rev + 1)
            ev = await self.terminal(tid)
            expect(ev["type"] == "cancelled", "wait settled %s", ev["type"])
            cancelling = self.x.events[tid].get(crev)
            expect(cancelling and cancelling["type"] == "status" and cancelling["payload"]["state"] == "cancelling",
                   "revision %d is not the cancelling status", crev)
            expect(ev["revision"] == crev + 1, "cancelled at %d, want %d", ev["revision"], crev + 1)
            # Identical replay after the terminal state: the same acceptance.
            again = await self.x.result("set", self.ep, cancel_el(tid, rev, "stop"), q(TASK, "cancel-accepted"))
            expect(again.get("revision") == str(crev), "cancel replay revision %r, want %d", again.get("revision"), crev)
            # A different tuple conflicts.
            await self.x.error("set", self.ep, cancel_el(tid, rev), "conflict")
            await self.x.error("set", self.ep, cancel_el(tid, ev["revision"], "again"), "conflict")
            types = self.check_history(tid, ev["revision"])
            await self.check_settled(tid, ev)
            emit("cancel", task=tid, events=types, cancel_revision=crev)

        with check("cancel-after-terminal"):
            tid, _ = await self.invoke("echo", {"message": "done"})
            ev = await self.terminal(tid)
            expect(ev["type"] == "completed", "echo settled %s", ev["type"])
            await self.x.error("set", self.ep, cancel_el(tid, ev["revision"]), "conflict")
            st = await self.check_settled(tid, ev)
            emit("cancel-after-terminal", task=tid, state=st.get("state"), condition="conflict")

    async def failed(self):
        with check("failed"):
            tid, _ = await self.invoke("fail", {})
            ev = await self.terminal(tid)
            expect(ev["type"] == "failed", "fail settled %s", ev["type"])
            err = ev["payload"]["error"]
            expect(err["code"] == "com.example:broken" and err["retryable"] is False, "error %r", err)
            types = self.check_history(tid, ev["revision"])
            await self.check_settled(tid, ev)
            emit("failed", task=tid, events=types, error=err)

    async def deadline(self):
        with check("deadline-expired"):
            at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=self.x.args.deadline_seconds)
            # A non-UTC offset with fractional seconds: the target compares
            # instants, not strings.
            stamp = at.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat(timespec="milliseconds")
            tid, _ = await self.invoke("wait", {}, deadline=stamp)
            st = await self.state(tid)
            expect(st.get("deadline"), "task-state lacks the deadline")
            ev = await self.terminal(tid, timeout=30)
            expect(ev["type"] == "failed", "deadline settled %s", ev["type"])
            expect(ev["payload"]["error"]["code"] == "deadline-expired", "code %r", ev["payload"]["error"]["code"])
            types = self.check_history(tid, ev["revision"])
            await self.check_settled(tid, ev)
            emit("deadline-expired", task=tid, deadline=stamp, events=types)

    async def recovery_errors(self):
        with check("recovery-errors"):
            tid, _ = await self.invoke("wait", {})
            await self.x.error("get", self.ep, el(TASK, "task-result-request", task_id=tid), "unexpected-request")
            await self.x.error("get", self.ep, el(TASK, "task-state-request", task_id="bad id"), "bad-request")
            await self.x.error("get", self.ep, el(TASK, "task-state-request", task_id=new_id("task-")), "item-not-found")
            # Cancel with the revision recovered from task-state. Dispatch
            # (accepted@0 -> running@1) commits after the <accepted/> reply,
            # so a revision read while the task is still accepted can go
            # stale before the cancel arrives, and the target must then
            # answer conflict. Once running, the wait tool commits nothing
            # until cancelled, so that revision stays current.
            st = await self.state_until(tid, "running")
            rev = int(st.get("revision"))
            acc = await self.x.result("set", self.ep, cancel_el(tid, rev), q(TASK, "cancel-accepted"))
            expect(acc.get("revision") == str(rev + 1), "cancel-accepted revision %r, want %d", acc.get("revision"), rev + 1)
            ev = await self.terminal(tid)
            expect(ev["type"] == "cancelled" and ev["revision"] == rev + 2, "settled %s@%d, want cancelled@%d", ev["type"], ev["revision"], rev + 2)
            emit("recovery-errors", task=tid, cancel_revision=rev + 1)


async def scenario(x):
    t = Tasks(x)
    await t.pin()
    await t.flow()
    await t.cancel()
    await t.failed()
    await t.deadline()
    await t.recovery_errors()


if __name__ == "__main__":
    run(scenario, extra_args)
