#!/usr/bin/python3
"""Human Messaging profile of an XMPP Agent Gateway, checked with slixmpp
as the human.

Against a conversing endpoint (--chat) whose backend, for each turn, sends
composing, acks the turn, sends paused, then replies "echo: <body>" as an
XEP-0461 reply (special bodies: "hostile" replies with XML-illegal
characters and markup, "ask" sends an XEP-0004 question, a submitted
answer is replied as "answer: <question-id> <field>=<value>", files are
listed as "files: <url> ..."), a tool-only endpoint (--tools) and a
missing one (--missing), it checks the error replies, disco features,
receipts only on request, chat states, de-duplication, hostile input,
forms, files, task payloads, and a flood.
"""

import asyncio
import secrets
import time
import xml.etree.ElementTree as ET

from agentcheck import *  # noqa: F401,F403
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

CHATSTATES = "http://jabber.org/protocol/chatstates"
RECEIPTS = "urn:xmpp:receipts"
SID = "urn:xmpp:sid:0"
REPLY = "urn:xmpp:reply:0"
HINTS = "urn:xmpp:hints"
OOB = "jabber:x:oob"
QFORM = "urn:agentgw:chat-question:0"
MESSAGING = [CHATSTATES, RECEIPTS, SID, REPLY, OOB, HINTS]


def extra_args(p):
    p.add_argument("--chat", required=True)
    p.add_argument("--tools", required=True)
    p.add_argument("--missing", required=True)
    p.add_argument("--max-body", type=int, required=True)
    p.add_argument("--flood", type=int, default=60)


def new_id():
    return "c-" + secrets.token_hex(12)


class Chat:
    def __init__(self, x):
        self.x = x
        self.a = x.args
        self.inbox = []  # every message stanza (raw XML), in arrival order
        self.presences = []
        x.register_handler(Callback("all messages", MatchXPath("{%s}message" % CLIENT), self._on))
        x.register_handler(Callback("all presence", MatchXPath("{%s}presence" % CLIENT), lambda p: self.presences.append(p.xml)))

    def _on(self, msg):
        self.inbox.append(msg.xml)

    def message(self, to, body=None, mid=None, origin=True, receipt=False, typ="chat", extra=()):
        mid = mid or new_id()
        m = ET.Element(q(CLIENT, "message"), {"to": to, "type": typ, "id": mid})
        if body is not None:
            b = ET.SubElement(m, q(CLIENT, "body"))
            b.text = body
        if origin:
            ET.SubElement(m, q(SID, "origin-id"), {"id": mid})
        if receipt:
            ET.SubElement(m, q(RECEIPTS, "request"))
        ET.SubElement(m, q(CHATSTATES, "active"))
        for e in extra:
            m.append(e)
        self.x.send_raw(ET.tostring(m, encoding="unicode"))
        return mid

    async def wait(self, pred, what, timeout=30, start=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i in range(start, len(self.inbox)):
                if pred(self.inbox[i]):
                    return i, self.inbox[i]
            await asyncio.sleep(0.02)
        raise CheckFailed("no %s within %ss; got %d stanzas: %s" % (
            what, timeout, len(self.inbox) - start,
            [ET.tostring(m, encoding="unicode")[:300] for m in self.inbox[start:][-6:]]))

    def reply_to(self, mid):
        def pred(m):
            r = m.find(q(REPLY, "reply"))
            return m.get("type") == "chat" and r is not None and r.get("id") == mid and m.find(q(CLIENT, "body")) is not None
        return pred

    def error_for(self, mid):
        return lambda m: m.get("type") == "error" and m.get("id") == mid

    @staticmethod
    def body(m):
        b = m.find(q(CLIENT, "body"))
        return None if b is None else (b.text or "")

    @staticmethod
    def err_text(m):
        e = m.find(q(CLIENT, "error"))
        t = None if e is None else e.find(q(STANZAS, "text"))
        return None if t is None else (t.text or "")

    async def run(self):
        a = self.a
        with check("disco"):
            p = await self.x.result("get", a.chat, el(DISCO_INFO, "query"), q(DISCO_INFO, "query"))
            feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
            for f in MESSAGING:
                expect(f in feats, "conversing endpoint does not advertise %s", f)
            p = await self.x.result("get", a.tools, el(DISCO_INFO, "query"), q(DISCO_INFO, "query"))
            feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
            for f in MESSAGING:
                expect(f not in feats, "tool-only endpoint advertises %s", f)
            emit("disco")

        with check("not-conversing"):
            mid = self.message(a.tools, "hello tools", receipt=True)
            _, m = await self.wait(self.error_for(mid), "error reply from the tool-only endpoint")
            expect(m.get("from") == a.tools, "error from %r", m.get("from"))
            expect(error_condition(m) == "feature-not-implemented", "condition %s", error_condition(m))
            txt = self.err_text(m) or ""
            expect("does not take chat messages" in txt, "error text %r", txt)
            expect(m.find(q(CLIENT, "body")) is None, "the error reflects the body")
            mid = self.message(a.missing, "anyone?")
            _, m = await self.wait(self.error_for(mid), "error reply from a missing endpoint")
            expect(error_condition(m) == "service-unavailable", "condition %s", error_condition(m))
            expect(self.err_text(m) is None, "a missing endpoint's error has text %r", self.err_text(m))
            emit("not-conversing", text=txt)

        with check("presence-subscribe"):
            # Subscribing is approved (subscribed) and followed by the
            # endpoint's available presence.
            # Only a resource that fetched its roster is "interested" in
            # subscription results (RFC 6121 2.2).
            await self.x.get_roster()
            self.x.send_presence(pto=a.chat, ptype="subscribe")
            deadline = time.monotonic() + 30
            seen = []
            sub = None
            while time.monotonic() < deadline and not (sub in ("to", "both") and "available" in seen):
                seen = [p.get("type", "available") for p in self.presences if p.get("from", "").split("/")[0] == a.chat]
                sub = self.x.client_roster[a.chat]["subscription"]
                await asyncio.sleep(0.05)
            # The server turns the endpoint's subscribed into a roster push.
            expect(sub in ("to", "both"), "roster subscription to the endpoint: %r", sub)
            expect("available" in seen, "presence from the endpoint: %s", seen)
            emit("presence-subscribe", presences=seen, subscription=sub)

        with check("receipt-and-chat-states"):
            start = len(self.inbox)
            mid = self.message(a.chat, "hello", receipt=True)
            i, rep = await self.wait(self.reply_to(mid), "reply to a receipt-requesting message", start=start)
            expect(self.body(rep) == "echo: hello", "reply body %r", self.body(rep))
            oid = rep.find(q(SID, "origin-id"))
            expect(oid is not None and oid.get("id") == rep.get("id"), "reply lacks an origin-id equal to its id")
            expect(rep.find(q(CHATSTATES, "active")) is not None, "reply lacks <active/>")
            before = self.inbox[start:i]
            states = [c.tag.split("}")[1] for m in before for c in m if c.tag.startswith("{%s}" % CHATSTATES)]
            receipts = [m for m in before if m.find(q(RECEIPTS, "received")) is not None]
            expect("composing" in states and "paused" in states, "chat states before the reply: %s", states)
            expect(states.index("composing") < states.index("paused"), "composing after paused: %s", states)
            expect(len(receipts) == 1 and receipts[0].find(q(RECEIPTS, "received")).get("id") == mid,
                   "receipts before the reply: %d", len(receipts))
            emit("receipt-and-chat-states", states=states)

        with check("no-receipt-unrequested"):
            start = len(self.inbox)
            mid = self.message(a.chat, "quiet")
            i, rep = await self.wait(self.reply_to(mid), "reply", start=start)
            receipts = [m for m in self.inbox[start:i + 1] if m.find(q(RECEIPTS, "received")) is not None]
            expect(not receipts, "a receipt arrived although none was requested")
            emit("no-receipt-unrequested")

        with check("task-payload-not-a-turn"):
            # A message carrying a task payload (and a receipt request) is
            # the task wire's: no turn, no receipt, no error.
            start = len(self.inbox)
            tmid = self.message(a.chat, "task?", receipt=True, typ="normal", extra=[el(TASK, "event", "{}", type="status")])
            mid = self.message(a.chat, "after task")
            i, rep = await self.wait(self.reply_to(mid), "reply after the task message", start=start)
            for m in self.inbox[start:i]:
                expect(m.get("id") != tmid and self.reply_to(tmid)(m) is False, "the task message got an answer")
                expect(m.find(q(RECEIPTS, "received")) is None, "a receipt for a task message")
            emit("task-payload-not-a-turn")

        with check("dedup"):
            start = len(self.inbox)
            dup = new_id()
            self.message(a.chat, "once", mid=dup)
            self.message(a.chat, "once", mid=dup)
            # The same origin-id under another stanza id is the same message.
            m = ET.Element(q(CLIENT, "message"), {"to": a.chat, "type": "chat", "id": new_id()})
            ET.SubElement(m, q(CLIENT, "body")).text = "once"
            ET.SubElement(m, q(SID, "origin-id"), {"id": dup})
            self.x.send_raw(ET.tostring(m, encoding="unicode"))
            last = self.message(a.chat, "after dup")
            i, _ = await self.wait(self.reply_to(last), "reply after the duplicates", start=start)
            n = sum(1 for m in self.inbox[start:i] if self.reply_to(dup)(m))
            expect(n == 1, "%d replies to one message sent three times", n)
            emit("dedup", dup=dup)

        with check("markup-is-text"):
            start = len(self.inbox)
            text = "<b>bold</b> & \"q\" <![CDATA[x]]>"
            mid = self.message(a.chat, text)
            _, rep = await self.wait(self.reply_to(mid), "reply to markup", start=start)
            expect(self.body(rep) == "echo: " + text, "markup came back as %r", self.body(rep))
            expect(rep.find(q(CLIENT, "b")) is None and rep.find(".//b") is None, "markup became elements")
            mid = self.message(a.chat, "hostile")
            _, rep = await self.wait(self.reply_to(mid), "reply with illegal characters", start=start)
            b = self.body(rep)
            expect("\ufffd" in b and "\x01" not in b and "\ufffe" not in b, "illegal characters not replaced: %r", b)
            expect("<i>not markup</i>" in b and rep.find(".//{%s}i" % CLIENT) is None, "outbound markup became elements")
            emit("markup-is-text", body=b)

        with check("oversize"):
            start = len(self.inbox)
            mid = self.message(a.chat, "x" * (a.max_body + 1))
            _, m = await self.wait(self.error_for(mid), "error for an oversize body", start=start)
            expect(error_condition(m) == "not-acceptable", "condition %s", error_condition(m))
            expect("Message too large" in (self.err_text(m) or ""), "text %r", self.err_text(m))
            expect(m.find(q(CLIENT, "body")) is None, "the error reflects the body")
            emit("oversize")

        with check("question-form"):
            start = len(self.inbox)
            mid = self.message(a.chat, "ask")
            _, rep = await self.wait(self.reply_to(mid), "question", start=start)
            x = rep.find(q(DATA, "x"))
            expect(x is not None and x.get("type") == "form", "the question has no form")
            fields = form_fields(x)
            expect(fields.get("FORM_TYPE") == [QFORM], "FORM_TYPE %r", fields.get("FORM_TYPE"))
            qid = (fields.get("question_id") or [""])[0]
            expect(qid, "no question_id")
            unit = [f for f in x.findall(q(DATA, "field")) if f.get("var") == "unit"]
            expect(unit and unit[0].get("type") == "list-single" and len(unit[0].findall(q(DATA, "option"))) == 2,
                   "the unit field is not a list-single with two options")
            expect(self.body(rep), "the question has no plain-text body")
            sub = el(DATA, "x", type="submit")
            for var, val in (("FORM_TYPE", QFORM), ("question_id", qid), ("unit", "C")):
                f = ET.SubElement(sub, q(DATA, "field"), {"var": var})
                ET.SubElement(f, q(DATA, "value")).text = val
            amid = self.message(a.chat, None, extra=[sub])
            _, rep = await self.wait(self.reply_to(amid), "reply to the answer", start=start)
            expect(self.body(rep) == "echo: answer: %s unit=C" % qid, "answer reply %r", self.body(rep))
            emit("question-form")

        with check("files"):
            start = len(self.inbox)
            url = "https://upload.example.test/abc/report.pdf"
            ox = el(OOB, "x")
            ET.SubElement(ox, q(OOB, "url")).text = url
            mid = self.message(a.chat, url, extra=[ox])
            _, rep = await self.wait(self.reply_to(mid), "reply to a file", start=start)
            expect(self.body(rep) == "echo: %s files: %s report.pdf" % (url, url), "file reply %r", self.body(rep))
            bad = el(OOB, "x")
            ET.SubElement(bad, q(OOB, "url")).text = "file:///etc/passwd"
            mid = self.message(a.chat, "bad file", extra=[bad])
            _, m = await self.wait(self.error_for(mid), "error for a file: URL", start=start)
            expect(error_condition(m) == "not-acceptable", "condition %s", error_condition(m))
            emit("files")

        with check("flood"):
            start = len(self.inbox)
            ids = [self.message(a.chat, "flood %d" % n) for n in range(a.flood)]
            # Wait for the bucket to refill, then for an end marker.
            end = None
            deadline = time.monotonic() + 60
            while end is None and time.monotonic() < deadline:
                await asyncio.sleep(1.5)
                mid = self.message(a.chat, "end of flood")
                try:
                    await self.wait(self.reply_to(mid), "end marker", timeout=5, start=start)
                    end = mid
                except CheckFailed:
                    pass
            expect(end is not None, "no reply after the flood")
            got = self.inbox[start:]
            answered = sum(1 for i in ids if any(self.reply_to(i)(m) for m in got))
            errors = [m for m in got if m.get("type") == "error" and m.get("id") in ids]
            conds = {error_condition(m) for m in errors}
            expect(answered < a.flood // 2, "%d of %d flood messages answered", answered, a.flood)
            expect(errors and conds == {"resource-constraint"}, "flood errors %s", conds)
            expect(len(errors) <= 5, "%d error replies to one flood: not once per burst", len(errors))
            emit("flood", answered=answered, errors=len(errors), sent=a.flood)

        with check("xml-illegal-closed"):
            # U+0001 cannot appear in XML 1.0, not even as a character
            # reference: the server closes this client's stream, and the
            # message never reaches the gateway (the Go test then checks
            # the gateway still chats).
            gone = asyncio.get_event_loop().create_future()
            self.x.add_event_handler("disconnected", lambda *_: gone.done() or gone.set_result(True))
            self.x.send_raw('<message to="%s" type="chat" id="%s"><body>bad &#x1; char</body></message>' % (a.chat, new_id()))
            await asyncio.wait_for(gone, 30)
            emit("xml-illegal-closed")


async def scenario(x):
    await Chat(x).run()


if __name__ == "__main__":
    run(scenario, extra_args)
