"""The inbox human of the xAgent IM Profile v2 tests (an independent client).

It logs in as the inbox JID and stays online. Every chat message it gets
is printed as one JSON line ({"event": "message", ...}), with the SHA-256
of each shared (XEP-0066) file downloaded over HTTP; receipts and chat
states are printed too. It reads one JSON command a line on stdin:

  {"cmd": "send", "to": JID, "body": s, "thread": t, "id": id,
   "file_b64": data, "name": n, "reply_to": id, "receipt": true}
      uploads the file, if any, through the server's XEP-0363 service
      (slot request built by hand, HTTP PUT), then sends a chat message
      with the URL in the body and an OOB element, a receipt request
      (unless "receipt" is false), an origin-id and <active/>;
  {"cmd": "subscribe", "to": JID}
      fetches the roster and asks for a presence subscription to JID (an
      endpoint); prints {"event": "subscribed", "from": JID} once the
      roster says subscription "to" (approved);
  {"cmd": "quit"}

Nothing of agentgw's Go code is involved.
"""

import asyncio
import base64
import hashlib
import json
import sys
import threading
import urllib.request
import xml.etree.ElementTree as ET

import agentcheck as ac
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

OOB = "jabber:x:oob"
RECEIPTS = "urn:xmpp:receipts"
CHATSTATES = "http://jabber.org/protocol/chatstates"
SID = "urn:xmpp:sid:0"
UPLOAD = "urn:xmpp:http:upload:0"
REPLY = "urn:xmpp:reply:0"


def out(**kw):
    print(json.dumps(kw, sort_keys=True), flush=True)


def fetch(url):
    with urllib.request.urlopen(url, timeout=20) as r:
        return r.read()


def put(url, data, headers):
    req = urllib.request.Request(url, data=data, method="PUT", headers=headers)
    with urllib.request.urlopen(req, timeout=20) as r:
        return r.status


async def scenario(x):
    loop = asyncio.get_event_loop()

    def on_message(msg):
        xml = msg.xml
        if xml.get("type") == "error":
            out(event="error", id=xml.get("id", ""), **{"from": xml.get("from", "")})
            return
        rec = xml.find(ac.q(RECEIPTS, "received"))
        if rec is not None:
            out(event="receipt", id=rec.get("id", ""), **{"from": xml.get("from", "")})
            return
        body = xml.find(ac.q(ac.CLIENT, "body"))
        states = [c.tag.split("}")[1] for c in xml if c.tag.startswith("{%s}" % CHATSTATES)]
        if body is None and not xml.findall(ac.q(OOB, "x")):
            if states:
                out(event="chatstate", state=states[0], **{"from": xml.get("from", "")})
            return
        thread = xml.find(ac.q(ac.CLIENT, "thread"))
        origin = xml.find(ac.q(SID, "origin-id"))
        urls = [u.text for u in xml.findall("%s/%s" % (ac.q(OOB, "x"), ac.q(OOB, "url")))]

        async def report():
            files = []
            for u in urls:
                data = await loop.run_in_executor(None, fetch, u)
                files.append({"url": u, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
            out(event="message", id=xml.get("id", ""), origin_id=origin.get("id") if origin is not None else "",
                thread=thread.text if thread is not None else "", body=body.text if body is not None else "",
                files=files, store=xml.find("{urn:xmpp:hints}store") is not None,
                nick=(xml.findtext("{http://jabber.org/protocol/nick}nick") or ""), **{"from": xml.get("from", "")})
        asyncio.ensure_future(report())

    x.register_handler(Callback("chat", MatchXPath("{%s}message" % ac.CLIENT), on_message))

    async def send(cmd):
        body = cmd.get("body", "")
        oob_url = None
        if cmd.get("file_b64"):
            data = base64.b64decode(cmd["file_b64"])
            req = ac.el(UPLOAD, "request", filename=cmd.get("name", "file.bin"), size=len(data),
                        content_type="application/octet-stream")
            slot = await x.result("get", x.args.upload, req, ac.q(UPLOAD, "slot"))
            p, g = slot.find(ac.q(UPLOAD, "put")), slot.find(ac.q(UPLOAD, "get"))
            hdrs = {h.get("name"): h.text or "" for h in p.findall(ac.q(UPLOAD, "header"))}
            hdrs["Content-Type"] = "application/octet-stream"
            await loop.run_in_executor(None, put, p.get("url"), data, hdrs)
            oob_url = g.get("url")
            out(event="uploaded", url=oob_url, sha256=hashlib.sha256(data).hexdigest())
            if not body:
                body = oob_url
        m = x.make_message(mto=cmd["to"], mbody=body, mtype="chat")
        m["id"] = cmd["id"]
        if cmd.get("thread"):
            m["thread"] = cmd["thread"]
        m.append(ac.el(SID, "origin-id", id=cmd["id"]))
        if cmd.get("receipt", True):
            m.append(ac.el(RECEIPTS, "request"))
        m.append(ac.el(CHATSTATES, "active"))
        if cmd.get("reply_to"):
            m.append(ac.el(REPLY, "reply", id=cmd["reply_to"], to=cmd["to"].split("/")[0]))
        if oob_url:
            ox = ac.el(OOB, "x")
            ox.append(ac.el(OOB, "url", oob_url))
            ox.append(ac.el(OOB, "desc", cmd.get("name", "file.bin")))
            m.append(ox)
        m.send()
        out(event="sent", id=cmd["id"])

    # stdin is read on a thread: a blocking readline, each command run on
    # the client's loop in order.
    queue = asyncio.Queue()

    def read_stdin():
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, "")

    threading.Thread(target=read_stdin, daemon=True).start()
    out(event="ready")
    while True:
        line = await queue.get()
        if not line.strip():
            if line == "":
                return
            continue
        cmd = json.loads(line)
        out(event="command", cmd=cmd["cmd"])
        if cmd["cmd"] == "quit":
            return
        if cmd["cmd"] == "subscribe":
            # Only a resource that fetched its roster is "interested" in
            # subscription results (RFC 6121 2.2).
            await x.get_roster()
            x.send_presence(pto=cmd["to"], ptype="subscribe")
            for _ in range(600):
                if x.client_roster[cmd["to"]]["subscription"] in ("to", "both"):
                    out(event="subscribed", **{"from": cmd["to"]})
                    break
                await asyncio.sleep(0.05)
            continue
        if cmd["cmd"] == "send":
            try:
                await send(cmd)
            except Exception as exc:  # reported; the Go side decides
                out(event="send_failed", id=cmd.get("id", ""), error="%s: %s" % (type(exc).__name__, exc))


if __name__ == "__main__":
    ac.run(scenario, lambda p: p.add_argument("--upload", required=True, help="the XEP-0363 service JID"))
