"""Shared plumbing for the slixmpp conformance scripts.

An independent client for the XMPP Agent Gateway checks: it logs in with
slixmpp and builds every request by hand from ElementTree elements, so
nothing of agentgw's own Go code is involved. Each check prints one JSON
object on stdout; the first failed check prints its error and makes the
process exit 1.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import logging
import ssl
import sys
import time
import xml.etree.ElementTree as ET

import slixmpp
from slixmpp.exceptions import IqError, IqTimeout
from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

CLIENT = "jabber:client"
STANZAS = "urn:ietf:params:xml:ns:xmpp-stanzas"
DISCO_INFO = "http://jabber.org/protocol/disco#info"
DISCO_ITEMS = "http://jabber.org/protocol/disco#items"
RSM = "http://jabber.org/protocol/rsm"
DATA = "jabber:x:data"
SEARCH = "jabber:iq:search"
HASHES = "urn:xmpp:hashes:2"
DIRECTORY = "urn:xmpp:agent-directory:0"
API = "urn:xmpp:agent-api:0"
TOOLS_NODE = "urn:xmpp:agent-tools:0"
TOOL = "urn:xmpp:agent-tool:0"
ENDPOINT = "urn:xmpp:agent-endpoint:0"
ENDPOINT_INFO = "urn:xmpp:agent-endpoint-info:0"
TOOL_INFO = "urn:xmpp:agent-tool-info:0"
TASK = "urn:xmpp:agent-task:0"


class CheckFailed(Exception):
    pass


def q(ns, local):
    return "{%s}%s" % (ns, local)


def el(ns, local, text=None, **attrs):
    e = ET.Element(q(ns, local), {k.replace("_", "-"): str(v) for k, v in attrs.items()})
    if text is not None:
        e.text = text
    return e


def sha256_b64(data):
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def b64url(name):
    return base64.urlsafe_b64encode(name.encode("utf-8")).decode("ascii").rstrip("=")


def b64url_decode(s):
    """Decodes unpadded base64url strictly: padding, non-canonical
    encodings and invalid UTF-8 are errors."""
    if "=" in s or not s:
        raise CheckFailed("tool node segment %r is padded or empty" % s)
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if b64url(raw.decode("utf-8")) != s:
        raise CheckFailed("tool node segment %r is not canonical base64url" % s)
    return raw.decode("utf-8")


def octet_sorted(values):
    return sorted(values, key=lambda v: v.encode("utf-8"))


def form_fields(x):
    out = {}
    for f in x.findall(q(DATA, "field")):
        out[f.get("var")] = [v.text or "" for v in f.findall(q(DATA, "value"))]
    return out


def forms_by_type(query):
    out = {}
    for x in query.findall(q(DATA, "x")):
        fields = form_fields(x)
        ft = fields.get("FORM_TYPE", [])
        if len(ft) == 1:
            out[ft[0]] = fields
    return out


def error_condition(reply):
    err = reply.find(q(CLIENT, "error"))
    if err is None:
        return None
    for c in err:
        if c.tag.startswith("{%s}" % STANZAS) and not c.tag.endswith("}text"):
            return c.tag.split("}", 1)[1]
    return "undefined-condition"


def expect(cond, msg, *args):
    if not cond:
        raise CheckFailed(msg % args if args else msg)


def parse_args(extra=None):
    p = argparse.ArgumentParser()
    p.add_argument("--jid", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--server", required=True, help="host:port of the C2S listener")
    p.add_argument("--gateway", required=True, help="component domain of the gateway")
    p.add_argument("--ca", default="", help="PEM CA file; empty disables verification (loopback only)")
    p.add_argument("--timeout", type=float, default=180)
    if extra:
        extra(p)
    return p.parse_args()


class Client(slixmpp.ClientXMPP):
    """A slixmpp client that runs one async scenario after session start."""

    def __init__(self, args, scenario):
        super().__init__(args.jid, args.password)
        self.args = args
        self.scenario = scenario
        host, _, port = args.server.rpartition(":")
        self.server_host, self.server_port = host, int(port)
        if args.ca:
            self.ca_certs = args.ca
        else:
            self.ssl_context.check_hostname = False
            self.ssl_context.verify_mode = ssl.CERT_NONE
        self.outcome = asyncio.get_event_loop().create_future()
        self.events = {}  # task-id -> {revision: event dict}
        self.event_errors = []
        self.add_event_handler("session_start", self._start)
        self.add_event_handler("failed_auth", lambda *_: self._finish(CheckFailed("authentication failed")))
        self.add_event_handler("connection_failed", lambda e: self._finish(CheckFailed("connection failed: %s" % e)))
        self.register_handler(Callback(
            "agent-task events",
            MatchXPath("{%s}message/{%s}event" % (CLIENT, TASK)),
            self._on_event))

    async def get_dns_records(self, domain, port=None):
        # Only the loopback address we were given: no DNS lookups at all.
        return [(domain, self.server_host, self.server_port)]

    def _finish(self, result):
        if not self.outcome.done():
            self.outcome.set_result(result)

    async def _start(self, _):
        self.send_presence()
        try:
            await self.scenario(self)
            self._finish(None)
        except Exception as exc:  # reported, not raised
            self._finish(exc)

    # ---- lifecycle events -------------------------------------------------

    def _on_event(self, msg):
        m = msg.xml
        evs = [c for c in m if c.tag == q(TASK, "event")]
        try:
            expect(len(evs) == 1, "lifecycle message with %d event elements", len(evs))
            expect(m.get("type") in (None, "normal"), "lifecycle message of type %r", m.get("type"))
            e = evs[0]
            ev = {
                "from": m.get("from", "").split("/")[0],
                "task_id": e.get("task-id"),
                "event_id": e.get("event-id"),
                "revision": int(e.get("revision")),
                "type": e.get("type"),
                "payload": json.loads(e.text or ""),
            }
            expect(_ID.match(ev["task_id"] or "") and _ID.match(ev["event_id"] or ""), "task-id or event-id violates the grammar")
            expect(ev["revision"] >= 1, "event revision %d", ev["revision"])
            validate_event(ev["type"], ev["payload"])
        except Exception as exc:
            self.event_errors.append("invalid lifecycle message: %s" % exc)
            return
        byrev = self.events.setdefault(ev["task_id"], {})
        old = byrev.get(ev["revision"])
        if old is not None and (old["event_id"] != ev["event_id"] or old["payload"] != ev["payload"]):
            self.event_errors.append("conflicting events for revision %d" % ev["revision"])
        byrev[ev["revision"]] = ev

    async def wait_event(self, task_id, pred, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in sorted(self.events.get(task_id, {}).values(), key=lambda e: e["revision"]):
                if pred(ev):
                    return ev
            await asyncio.sleep(0.02)
        raise CheckFailed("no %s event for %s within %ss; got %s" % (what, task_id, timeout, self.event_summary(task_id)))

    def event_summary(self, task_id):
        return [(r, e["type"]) for r, e in sorted(self.events.get(task_id, {}).items())]

    # ---- IQs --------------------------------------------------------------

    async def query(self, typ, to, payload, iq_id=None, timeout=20):
        """Sends an IQ and returns the reply's raw XML, result or error."""
        iq = self.Iq()
        iq["type"] = typ
        iq["to"] = to
        if iq_id:
            iq["id"] = iq_id
        iq.xml.append(payload)
        try:
            reply = await iq.send(timeout=timeout)
        except IqError as e:
            return e.iq.xml
        except IqTimeout:
            raise CheckFailed("no reply to %s %s within %ss" % (payload.tag, to, timeout))
        return reply.xml

    async def result(self, typ, to, payload, child=None):
        """query() that insists on a result and returns its first child
        (checked against child when given)."""
        reply = await self.query(typ, to, payload)
        expect(reply.get("type") == "result", "%s to %s failed: %s", payload.tag, to, error_condition(reply))
        kids = list(reply)
        p = kids[0] if kids else None
        if child is not None:
            expect(p is not None and p.tag == child, "%s to %s: result payload %s, want %s",
                   payload.tag, to, None if p is None else p.tag, child)
        return p

    async def error(self, typ, to, payload, want):
        reply = await self.query(typ, to, payload)
        got = error_condition(reply) if reply.get("type") == "error" else "result"
        expect(got == want, "%s to %s: got %s, want %s", payload.tag, to, got, want)
        return reply


def emit(check, **details):
    print(json.dumps(dict({"check": check, "ok": True}, **details), sort_keys=True), flush=True)


def run(scenario, extra_args=None, plugins=()):
    args = parse_args(extra_args)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    xmpp = Client(args, scenario)
    for plugin in plugins:
        xmpp.register_plugin(plugin)
    xmpp.connect(address=(xmpp.server_host, xmpp.server_port))
    try:
        res = loop.run_until_complete(asyncio.wait_for(xmpp.outcome, args.timeout))
    except asyncio.TimeoutError:
        res = CheckFailed("the scenario did not finish within %ss" % args.timeout)
    if res is None and xmpp.event_errors:
        res = CheckFailed("; ".join(xmpp.event_errors[:5]))
    xmpp.disconnect()
    try:
        loop.run_until_complete(asyncio.wait_for(xmpp.disconnected, 5))
    except Exception:
        pass
    # Stop slixmpp's background tasks quietly.
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()
    if res is not None:
        print(json.dumps({"check": getattr(res, "check", "scenario"), "ok": False, "error": str(res)}), flush=True)
        print("FAILED: %s: %s" % (type(res).__name__, res), file=sys.stderr)
        if not isinstance(res, CheckFailed):
            import traceback
            traceback.print_exception(type(res), res, res.__traceback__, file=sys.stderr)
        sys.exit(1)


class check:
    """Context manager naming the check a failure belongs to."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if exc is not None and not hasattr(exc, "check"):
            try:
                exc.check = self.name
            except Exception:
                pass
        return False


# ---- the spec's lifecycle JSON schema, member by member --------------------

import re

_ID = re.compile(r"^[A-Za-z0-9._~-]{22,128}$")
_CODE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def _members(obj, required, allowed, what):
    expect(isinstance(obj, dict), "%s payload is not an object", what)
    missing = [m for m in required if m not in obj]
    extra = [m for m in obj if m not in allowed]
    expect(not missing, "%s payload lacks %s", what, missing)
    expect(not extra, "%s payload has unknown members %s", what, extra)


def validate_event(typ, p):
    if typ == "status":
        _members(p, ["state", "updatedAt"], ["state", "updatedAt"], typ)
        expect(p["state"] in ("running", "input_required", "cancelling"), "status state %r", p["state"])
        expect(_DATETIME.match(p["updatedAt"]), "updatedAt %r is not XEP-0082", p["updatedAt"])
    elif typ == "progress":
        _members(p, [], ["percent", "stage", "message"], typ)
        expect(len(p) >= 1, "empty progress payload")
        if "percent" in p:
            expect(isinstance(p["percent"], (int, float)) and 0 <= p["percent"] <= 100, "percent %r", p["percent"])
    elif typ == "input_required":
        _members(p, ["requestId", "question", "inputSchema", "createdAt"],
                 ["requestId", "question", "inputSchema", "createdAt", "expiresAt"], typ)
        expect(_ID.match(p["requestId"]), "requestId %r", p["requestId"])
        expect(isinstance(p["question"], str) and p["question"], "empty question")
        expect(isinstance(p["inputSchema"], dict), "inputSchema is not an object")
        expect(_DATETIME.match(p["createdAt"]), "createdAt %r", p["createdAt"])
    elif typ == "completed":
        _members(p, ["result"], ["result", "summary"], typ)
        _members(p["result"], ["content"], ["content", "structuredContent", "isError", "_meta"], "result")
        expect(isinstance(p["result"]["content"], list), "result content is not an array")
    elif typ == "failed":
        _members(p, ["error"], ["error"], typ)
        e = p["error"]
        _members(e, ["code", "message", "retryable"], ["code", "message", "retryable", "details"], "error")
        expect(_CODE.match(e["code"]), "error code %r", e["code"])
        expect(isinstance(e["message"], str) and e["message"], "empty error message")
        expect(isinstance(e["retryable"], bool), "retryable is not a boolean")
    elif typ == "cancelled":
        _members(p, [], ["reason"], typ)
    else:
        raise CheckFailed("unknown event type %r" % typ)
