#!/usr/bin/python3
"""agent-control-center endpoints through an XMPP Agent Gateway, checked
with slixmpp as an independent caller.

The endpoint (--endpoint) maps an agent of the reference connector
(accbridge/acctest), whose run goals are scripts. Modes:
  main      manifest, run with progress and completion, approve / deny /
            expiry, cancel confirmed and ignored, deadline, error codes
  presence  subscribe and wait until the endpoint's presence is --want
            (available, unavailable or degraded)
  run       one run of --goal; emits its terminal event (for restarts)
"""

import asyncio
import datetime
import json
import time
import xml.etree.ElementTree as ET

from agentcheck import *  # noqa: F401,F403
from tasks import Tasks, cancel_el, provide_input_el, invoke_el, new_id

PRESENCE_NS = "jabber:client"


def extra_args(p):
    p.add_argument("--endpoint", required=True)
    p.add_argument("--mode", default="main")
    p.add_argument("--want", default="available")
    p.add_argument("--goal", default="echo hi")
    p.add_argument("--expect", default="completed")
    p.add_argument("--expect-code", default="")
    p.add_argument("--approval-seconds", type=float, default=3)


class ACC(Tasks):
    async def pin(self):
        with check("acc-manifest"):
            info = await self.x.result("get", self.ep, el(DISCO_INFO, "query"), q(DISCO_INFO, "query"))
            feats = {f.get("var") for f in info.findall(q(DISCO_INFO, "feature"))}
            for f in (TASK, TASK + "#progress", TASK + "#cancel", TASK + "#input"):
                expect(f in feats, "endpoint does not advertise %s", f)
            m = await self.x.result("get", self.ep, el(API, "manifest-request"), q(API, "manifest"))
            self.version = m.get("version")
            self.hash = m.find(q(HASHES, "hash")).text
            raw = (m.find(q(API, "json")).text or "").encode("utf-8")
            expect(sha256_b64(raw) == self.hash, "manifest bytes do not match their hash")
            doc = json.loads(raw)
            tools = doc["tools"]
            expect([t["name"] for t in tools] == ["run"], "tools %r, want only run", [t["name"] for t in tools])
            props = tools[0]["inputSchema"]["properties"]
            expect(set(props) == {"goal", "context_bundle", "constraints"}, "run input %r", sorted(props))
            enum = props["constraints"]["properties"]["tools"]["items"].get("enum")
            expect(enum == ["browser", "terminal"], "constraints.tools enum %r, want the declared tools", enum)
            expect("eyJ" not in raw.decode() and "BEGIN" not in raw.decode(), "the manifest carries key material")
            emit("acc-manifest", version=self.version, tools=enum)

    async def run_goal(self, goal, constraints=None, deadline=None):
        args = {"goal": goal}
        if constraints:
            args["constraints"] = constraints
        tid, _ = await self.invoke("run", args, deadline=deadline)
        return tid

    async def completes(self):
        with check("acc-run-progress-completed"):
            tid = await self.run_goal("echo hello acc", {"tools": ["terminal"], "timeout_seconds": 60})
            ev = await self.terminal(tid)
            expect(ev["type"] == "completed", "settled %s: %s", ev["type"], ev["payload"])
            sc = ev["payload"]["result"].get("structuredContent")
            expect(sc and sc.get("summary") == "hello acc", "structuredContent %r", sc)
            types = self.check_history(tid, ev["revision"])
            progs = [e["payload"] for e in self.x.events[tid].values() if e["type"] == "progress"]
            expect(any(p.get("percent") == 50 for p in progs), "no 50%% progress in %r", progs)
            await self.check_settled(tid, ev)
            emit("acc-run-progress-completed", task=tid, events=types)
        with check("acc-undeclared-tool"):
            rid = new_id("req-")
            reply = await self.x.query("set", self.ep, invoke_el("run", self.version, self.hash, {"goal": "echo x", "constraints": {"tools": ["rootkit"]}}, rid))
            expect(reply.get("type") == "error", "an undeclared tool in constraints was admitted")
            emit("acc-undeclared-tool", condition=error_condition(reply))

    async def approval(self, decision, reason=None):
        tid = await self.run_goal("approve medium rm -rf /tmp/build <b>bold</b>")
        ir = await self.x.wait_event(tid, lambda e: e["type"] == "input_required", "input_required")
        req = ir["payload"]
        expect('"rm -rf /tmp/build <b>bold</b>"' in req["question"], "the action is not quoted as data: %r", req["question"])
        expect("medium" in req["question"], "the risk level is not shown: %r", req["question"])
        dec = req["inputSchema"]["properties"]["decision"]["enum"]
        expect(dec == ["approve", "deny"], "decision enum %r", dec)
        expect(req.get("expiresAt"), "the approval has no expiry")
        answer = {"decision": decision}
        if reason:
            answer["reason"] = reason
        await self.x.result("set", self.ep, provide_input_el(tid, req["requestId"], ir["revision"], answer), q(TASK, "input-accepted"))
        ev = await self.terminal(tid)
        expect(ev["type"] == "completed", "settled %s: %s", ev["type"], ev["payload"])
        return tid, ev["payload"]["result"]["structuredContent"]

    async def approvals(self):
        me = self.x.args.jid.split("/")[0]
        with check("acc-approve"):
            tid, sc = await self.approval("approve")
            expect(sc["approved"] is True and sc["approved_by"] == me, "approval %r", sc)
            emit("acc-approve", task=tid, approved_by=sc["approved_by"])
        with check("acc-deny"):
            tid, sc = await self.approval("deny", "not today")
            expect(sc["approved"] is False and sc["denied_by"] == me and sc["reason"] == "not today", "denial %r", sc)
            emit("acc-deny", task=tid, denied_by=sc["denied_by"])
        with check("acc-approval-expiry"):
            tid = await self.run_goal("approve medium touch /tmp/x")
            await self.x.wait_event(tid, lambda e: e["type"] == "input_required", "input_required")
            ev = await self.terminal(tid, timeout=self.x.args.approval_seconds + 30)
            expect(ev["type"] == "failed" and ev["payload"]["error"]["code"] == "agentgw:input-expired", "expiry settled %s: %s", ev["type"], ev["payload"])
            emit("acc-approval-expiry", task=tid)

    async def cancel_one(self, goal, want):
        tid = await self.run_goal(goal)
        await self.x.wait_event(tid, lambda e: e["type"] == "progress", "accepted progress")
        st = await self.state(tid)
        await self.x.result("set", self.ep, cancel_el(tid, int(st.get("revision")), "stop"), q(TASK, "cancel-accepted"))
        ev = await self.terminal(tid, timeout=40)
        expect(ev["type"] == "cancelled", "cancel settled %s: %s", ev["type"], ev["payload"])
        expect(want in ev["payload"].get("reason", ""), "reason %r lacks %r", ev["payload"].get("reason"), want)
        return tid

    async def cancels(self):
        with check("acc-cancel-confirmed"):
            emit("acc-cancel-confirmed", task=await self.cancel_one("hang", "confirmed"))
        with check("acc-cancel-ignored"):
            emit("acc-cancel-ignored", task=await self.cancel_one("ignore-cancel", "did not confirm"))
        with check("acc-deadline"):
            at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=2)
            tid = await self.run_goal("hang", deadline=at.isoformat(timespec="milliseconds"))
            ev = await self.terminal(tid, timeout=30)
            expect(ev["type"] == "failed" and ev["payload"]["error"]["code"] == "deadline-expired", "deadline settled %s: %s", ev["type"], ev["payload"])
            emit("acc-deadline", task=tid)

    async def errors(self):
        table = [
            ("error 4001", "acc:invalid-request", False), ("error 4002", "acc:unknown-message-type", False),
            ("error 4003", "acc:agent-not-found", True), ("error 4004", "acc:run-not-found", False),
            ("error 4006", "acc:quota-exceeded", False), ("error 4007", "acc:unauthorized-action", False),
            ("error 4008", "acc:approval-denied", False), ("error 5001", "acc:connector-internal-error", True),
            ("error 5002", "acc:adapter-error", True),
        ]
        with check("acc-error-codes"):
            for goal, code, retryable in table:
                tid = await self.run_goal(goal)
                ev = await self.terminal(tid)
                expect(ev["type"] == "failed", "%s settled %s", goal, ev["type"])
                err = ev["payload"]["error"]
                expect(err["code"] == code and err["retryable"] is retryable, "%s: error %r", goal, err)
            emit("acc-error-codes", codes=len(table))
        with check("acc-retries"):
            for goal in ("error-once 5001", "error-once 5002", "busy-once"):
                tid = await self.run_goal(goal)
                ev = await self.terminal(tid, timeout=40)
                expect(ev["type"] == "completed", "%s settled %s: %s", goal, ev["type"], ev["payload"])
                expect(ev["payload"]["result"]["structuredContent"]["attempts"] == 2, "%s attempts %r", goal, ev["payload"])
            emit("acc-retries")

    async def one_run(self):
        with check("acc-run"):
            tid = await self.run_goal(self.x.args.goal)
            ev = await self.terminal(tid, timeout=60)
            expect(ev["type"] == self.x.args.expect, "settled %s: %s", ev["type"], ev["payload"])
            if self.x.args.expect_code:
                expect(ev["payload"]["error"]["code"] == self.x.args.expect_code, "code %r", ev["payload"]["error"])
            emit("acc-run", task=tid, type=ev["type"], payload=ev["payload"])


async def presence(x):
    with check("acc-presence"):
        want = x.args.want
        seen = []
        fut = asyncio.get_event_loop().create_future()

        def on_presence(p):
            if p["from"].bare != x.args.endpoint:
                return
            typ = p.xml.get("type", "")
            if typ not in ("", "unavailable"):
                return
            show = p.xml.find("{%s}show" % PRESENCE_NS)
            status = p.xml.find("{%s}status" % PRESENCE_NS)
            state = "unavailable" if typ == "unavailable" else ("degraded" if show is not None and show.text == "away" else "available")
            seen.append(state)
            if state == want and not fut.done():
                fut.set_result(status.text if status is not None else "")

        x.add_event_handler("presence", on_presence)
        x.send_presence(pto=x.args.endpoint, ptype="subscribe")
        try:
            status = await asyncio.wait_for(fut, 60)
        except asyncio.TimeoutError:
            raise CheckFailed("presence never %s; saw %r" % (want, seen))
        emit("acc-presence", want=want, status=status, seen=seen)


async def chat(x):
    """A chat message starts a run whose goal is the message; the
    completion comes back as the reply."""
    from slixmpp.xmlstream.handler import Callback
    from slixmpp.xmlstream.matcher import MatchXPath
    with check("acc-chat"):
        inbox = []
        x.register_handler(Callback("acc chat", MatchXPath("{%s}message" % CLIENT), lambda m: inbox.append(m.xml)))
        mid = "c-" + new_id("m")
        m = ET.Element(q(CLIENT, "message"), {"to": x.args.endpoint, "type": "chat", "id": mid})
        b = ET.SubElement(m, q(CLIENT, "body"))
        b.text = "echo hello chat"
        x.send_raw(ET.tostring(m, encoding="unicode"))
        deadline = time.monotonic() + 30
        reply = None
        while time.monotonic() < deadline and reply is None:
            for r in inbox:
                body = r.find(q(CLIENT, "body"))
                if r.get("from", "").split("/")[0] == x.args.endpoint and body is not None and r.get("type") != "error":
                    reply = r
            await asyncio.sleep(0.05)
        expect(reply is not None, "no chat reply; got %r", [ET.tostring(r, encoding="unicode")[:200] for r in inbox])
        text = reply.find(q(CLIENT, "body")).text
        expect(text == "hello chat", "reply %r, want the completion's summary", text)
        emit("acc-chat", reply=text)


async def scenario(x):
    if x.args.mode == "chat":
        await chat(x)
        return
    if x.args.mode == "presence":
        await presence(x)
        return
    t = ACC(x)
    await t.pin()
    if x.args.mode == "run":
        await t.one_run()
        return
    await t.completes()
    await t.approvals()
    await t.cancels()
    await t.errors()


if __name__ == "__main__":
    run(scenario, extra_args)
