#!/usr/bin/python3
"""The OpenAgentNetwork endpoint of an XMPP Agent Gateway, checked with
slixmpp as the account's owner and as somebody else.

Modes (--mode):
  escalate   as the owner: invoke escalations and answer its input
             requests in order with --answers (accept,decline,...); the
             task completes with the decisions
  ignore     as the owner: invoke escalations, see the input request and
             never answer; the task fails input-expired
  nonowner   as another user: escalations is refused (agentgw:oan-not-
             owner); answering the owner's pending input (--task,
             --request, --revision) is refused too; a chat message gets
             an error reply
  chat       as the owner: a chat message to the endpoint comes back as
             the Gofer's reply, from the endpoint
  presence   subscribe to the endpoint, see it available, touch
             --ready-file, then see it go unavailable (the key revoked)
"""

import asyncio
import json
import secrets
import time
import xml.etree.ElementTree as ET

from agentcheck import *  # noqa: F401,F403
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

TERMINAL = ("completed", "failed", "cancelled")


def extra_args(p):
    p.add_argument("--endpoint", required=True)
    p.add_argument("--mode", required=True)
    p.add_argument("--answers", default="")
    p.add_argument("--task", default="")
    p.add_argument("--request", default="")
    p.add_argument("--revision", default="0")
    p.add_argument("--body", default="hello from slixmpp")
    p.add_argument("--ready-file", default="")


def invoke_el(tool, version, mhash, args, request_id):
    e = el(TASK, "invoke", api_version=version, request_id=request_id, tool=tool)
    mh = el(TASK, "manifest-hash")
    mh.append(el(HASHES, "hash", mhash, algo="sha-256"))
    e.append(mh)
    e.append(el(TASK, "arguments", json.dumps(args), media_type="application/json"))
    return e


def provide_input_el(task_id, request_id, expected, value):
    e = el(TASK, "provide-input", expected_revision=str(expected), request_id=request_id, task_id=task_id)
    e.append(el(TASK, "input", json.dumps(value), media_type="application/json"))
    return e


class OAN:
    def __init__(self, x):
        self.x = x
        self.ep = x.args.endpoint
        self.inbox = []
        self.presences = []
        x.register_handler(Callback("chat", MatchXPath("{%s}message" % CLIENT), lambda m: self.inbox.append(m.xml)))
        x.register_handler(Callback("presence", MatchXPath("{%s}presence" % CLIENT), lambda p: self.presences.append(p.xml)))

    async def pin(self):
        m = await self.x.result("get", self.ep, el(API, "manifest-request"), q(API, "manifest"))
        self.version = m.get("version")
        self.hash = m.find(q(HASHES, "hash")).text
        tools = {t["name"] for t in json.loads(m.find(q(API, "json")).text)["tools"]}
        expect(tools == {"create_gofer", "list_gofers", "chat", "escalations", "send_direct"}, "tools %s", tools)

    async def invoke(self, tool, args):
        rid = "req-" + secrets.token_hex(12)
        acc = await self.x.result("set", self.ep, invoke_el(tool, self.version, self.hash, args, rid), q(TASK, "accepted"))
        return acc.get("task-id")

    async def escalate(self, answers):
        with check("escalate"):
            await self.pin()
            tid = await self.invoke("escalations", {})
            given = []
            for a in answers:
                ev = await self.x.wait_event(tid, lambda e: e["type"] == "input_required" and e["payload"]["requestId"] not in [g[0] for g in given], "input_required")
                req = ev["payload"]
                expect(req["inputSchema"]["properties"]["decision"]["enum"] == ["accept", "decline", "defer"], "schema %r", req["inputSchema"])
                ok = await self.x.result("set", self.ep, provide_input_el(tid, req["requestId"], ev["revision"], {"decision": a}), q(TASK, "input-accepted"))
                given.append((req["requestId"], a, req["question"]))
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal", timeout=60)
            expect(ev["type"] == "completed", "escalations settled %s: %s", ev["type"], ev["payload"])
            res = ev["payload"]["result"]["structuredContent"]
            got = [(d["decision"], d["posted"]) for d in res["decisions"]]
            want = [("accept" if a == "accept" else "decline", True) for a in answers]
            expect(got == want, "decisions %r, want %r", got, want)
            emit("escalate", task=tid, decisions=got, questions=[g[2] for g in given])

    async def ignore(self):
        with check("ignore"):
            await self.pin()
            tid = await self.invoke("escalations", {})
            ev = await self.x.wait_event(tid, lambda e: e["type"] == "input_required", "input_required")
            emit("pending", task=tid, request=ev["payload"]["requestId"], revision=ev["revision"])
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal", timeout=90)
            expect(ev["type"] == "failed", "unanswered escalations settled %s", ev["type"])
            emit("ignore", task=tid, code=ev["payload"]["error"]["code"])

    async def nonowner(self):
        a = self.x.args
        with check("nonowner"):
            await self.pin()
            tid = await self.invoke("escalations", {})
            ev = await self.x.wait_event(tid, lambda e: e["type"] in TERMINAL, "terminal")
            expect(ev["type"] == "failed" and ev["payload"]["error"]["code"] == "agentgw:oan-not-owner", "non-owner escalations: %s %s", ev["type"], ev["payload"])
            cond = None
            if a.task:
                reply = await self.x.query("set", self.ep, provide_input_el(a.task, a.request, a.revision, {"decision": "accept"}))
                expect(reply.get("type") == "error", "a non-owner answered the owner's escalation")
                cond = error_condition(reply)
            mid = "c-" + secrets.token_hex(8)
            m = ET.Element(q(CLIENT, "message"), {"to": self.ep, "type": "chat", "id": mid})
            ET.SubElement(m, q(CLIENT, "body")).text = "let me in"
            self.x.send_raw(ET.tostring(m, encoding="unicode"))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(x.get("id") == mid and x.get("type") == "error" for x in self.inbox):
                await asyncio.sleep(0.05)
            expect(any(x.get("id") == mid and x.get("type") == "error" for x in self.inbox), "a non-owner's chat got no error reply")
            emit("nonowner", code=ev["payload"]["error"]["code"], input_condition=cond)

    async def chat(self, body):
        with check("chat"):
            mid = "c-" + secrets.token_hex(8)
            m = ET.Element(q(CLIENT, "message"), {"to": self.ep, "type": "chat", "id": mid})
            ET.SubElement(m, q(CLIENT, "body")).text = body
            self.x.send_raw(ET.tostring(m, encoding="unicode"))
            want = "Gofer heard: " + body
            deadline = time.monotonic() + 30
            got = None
            while time.monotonic() < deadline and got is None:
                for x in self.inbox:
                    b = x.find(q(CLIENT, "body"))
                    if x.get("type") == "chat" and b is not None and b.text == want:
                        got = x
                await asyncio.sleep(0.05)
            expect(got is not None, "no Gofer reply as chat; inbox %s", [ET.tostring(x, encoding="unicode")[:200] for x in self.inbox[-5:]])
            expect(got.get("from", "").split("/")[0] == self.ep, "reply from %r", got.get("from"))
            emit("chat", frm=got.get("from"), body=want)


    def endpoint_presence(self):
        return [p.get("type", "available") for p in self.presences if p.get("from", "").split("/")[0] == self.ep]

    async def presence(self, ready_file):
        with check("presence"):
            await self.x.get_roster()
            self.x.send_presence(pto=self.ep, ptype="subscribe")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and "available" not in self.endpoint_presence():
                await asyncio.sleep(0.05)
            expect("available" in self.endpoint_presence(), "the endpoint is not available: %s", self.endpoint_presence())
            n = len(self.endpoint_presence())
            open(ready_file, "w").close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "unavailable" not in self.endpoint_presence()[n:]:
                await asyncio.sleep(0.05)
            expect("unavailable" in self.endpoint_presence()[n:], "the endpoint stayed available: %s", self.endpoint_presence())
            emit("presence", seen=self.endpoint_presence())


async def scenario(x):
    o = OAN(x)
    mode = x.args.mode
    if mode == "escalate":
        await o.escalate([a for a in x.args.answers.split(",") if a])
    elif mode == "ignore":
        await o.ignore()
    elif mode == "nonowner":
        await o.nonowner()
    elif mode == "chat":
        await o.chat(x.args.body)
    elif mode == "presence":
        await o.presence(x.args.ready_file)
    else:
        raise CheckFailed("unknown mode " + mode)


if __name__ == "__main__":
    run(scenario, extra_args)
