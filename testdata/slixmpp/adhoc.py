#!/usr/bin/python3
"""Tools as XEP-0050 ad-hoc commands, checked with slixmpp's own XEP-0050
client (plugin xep_0050) and XEP-0004 forms (plugin xep_0004).

Modes:
  local   (alice) against --endpoint, a gateway endpoint bridging
          @modelcontextprotocol/server-everything: lists the commands, runs
          echo and get-sum through forms, a long-running tool with progress
          notes, an elicitation answered through a form stage, a
          cancellation, a re-submitted stage, and hostile forms. Prints the
          session IDs it leaves behind (check "sessions").
  foreign (bob) tries alice's sessions (--sessions): each must answer like a
          stale session.
  remote  a principal without grants: the commands node of --endpoint and
          of --missing must answer alike, and so must executing there.
"""

import asyncio
import sys
import json
import time
import xml.etree.ElementTree as ET

from slixmpp.exceptions import IqError

from agentcheck import *  # noqa: F401,F403

COMMANDS = "http://jabber.org/protocol/commands"
VALIDATE = "http://jabber.org/protocol/xdata-validate"


def extra_args(p):
    p.add_argument("--mode", default="local")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--missing", default="")
    p.add_argument("--sessions", default="")


class Adhoc:
    def __init__(self, x):
        self.x = x
        self.ep = x.args.endpoint
        self.cmd = x["xep_0050"]
        self.forms = x["xep_0004"]

    async def send(self, node, action="execute", sessionid=None, payload=None, to=None):
        """Sends one command stage; returns (command, None) or (None, error
        dict) for an error reply."""
        try:
            iq = await self.cmd.send_command(to or self.ep, node, action=action, payload=payload, sessionid=sessionid, timeout=30)
        except IqError as e:
            err = e.iq["error"]
            app = [c.tag.split("}", 1)[1] for c in err.xml if c.tag.startswith("{%s}" % COMMANDS)]
            return None, {"condition": err["condition"], "text": err["text"], "app": app, "type": err["type"]}
        return iq["command"], None

    async def ok(self, node, **kw):
        c, err = await self.send(node, **kw)
        expect(err is None, "command %s failed: %s", node, err)
        return c

    async def fails(self, node, condition, app=None, **kw):
        c, err = await self.send(node, **kw)
        expect(err is not None, "command %s succeeded (status %s), want %s", node, c and c["status"], condition)
        expect(err["condition"] == condition, "command %s: error %s, want %s (%s)", node, err, condition, err["text"])
        if app:
            expect(app in err["app"], "command %s: application condition %s, want %s", node, err["app"], app)
        return err

    def submit(self, form, values):
        """A submit form as a client makes one: every field of the stage
        (hidden ones included) with the user's values."""
        out = self.forms.make_form(ftype="submit")
        for var, f in form.get_fields().items():
            if f["type"] == "fixed":
                continue
            v = values.get(var, f["value"])
            if v is None or v == "" or v == []:
                if f["type"] != "hidden" and var not in values:
                    continue
            out.add_field(var=var, ftype=f["type"], value=v)
        return out

    async def until(self, node, sid, pred, what, timeout=60):
        """Refreshes (action next, no form) until pred(command)."""
        deadline = time.monotonic() + timeout
        notes = []
        while True:
            c = await self.ok(node, action="next", sessionid=sid)
            notes.extend(t for _, t in c["notes"])
            if pred(c):
                return c, notes
            expect(time.monotonic() < deadline, "%s: still %s after %ss; notes %s", what, c["status"], timeout, notes[-3:])
            await asyncio.sleep(0.2)

    def result_text(self, c):
        f = c["form"]
        fields = f.get_fields()
        expect("text" in fields, "completed stage has no result text field: %s", list(fields))
        v = fields["text"]["value"]
        return "\n".join(v) if isinstance(v, list) else (v or "")

    # ---- checks -----------------------------------------------------------

    async def listing(self):
        with check("commands-feature"):
            info = await self.x["xep_0030"].get_info(jid=self.ep, timeout=20)
            expect(COMMANDS in info["disco_info"]["features"], "endpoint does not advertise %s", COMMANDS)
            emit("commands-feature")
        with check("list-commands"):
            items = await self.cmd.get_commands(self.ep, timeout=20)
            nodes = {i[1]: i[2] for i in items["disco_items"]["items"]}
            for want in ("echo", "get-sum", "trigger-long-running-operation", "trigger-elicitation-request"):
                expect(want in nodes, "command %s not listed; got %s", want, sorted(nodes))
            for jid_, node, _ in items["disco_items"]["items"]:
                expect(str(jid_) == self.ep, "command item jid %s", jid_)
            info = await self.x["xep_0030"].get_info(jid=self.ep, node="echo", timeout=20)
            ids = info["disco_info"]["identities"]
            expect(any(i[0] == "automation" and i[1] == "command-node" for i in ids), "echo node identity %s", ids)
            emit("list-commands", count=len(nodes))

    async def echo(self):
        with check("echo"):
            c = await self.ok("echo")
            sid = c["sessionid"]
            expect(c["status"] == "executing", "first stage status %s", c["status"])
            form = c["form"]
            f = form.get_fields()
            expect("message" in f and f["message"]["required"], "echo form lacks a required message field: %s", list(f))
            expect(f["agentgw-stage"]["type"] == "hidden", "no hidden stage field")
            sub = self.submit(form, {"message": "hello adhoc"})
            c = await self.ok("echo", action="complete", sessionid=sid, payload=sub)
            if c["status"] != "completed":
                c, _ = await self.until("echo", sid, lambda c: c["status"] == "completed", "echo")
            text = self.result_text(c)
            expect("hello adhoc" in text, "echo result %r", text)
            task = self.task_of(c)
            emit("echo", session=sid, task=task, text=text)
        with check("resubmit"):
            # The same stage again is the same request: the same task, not a
            # second run (the Go side counts the tasks).
            c2 = await self.ok("echo", action="complete", sessionid=sid, payload=sub)
            expect(self.task_of(c2) == task, "re-submitted stage reached task %s, want %s", self.task_of(c2), task)
            other = self.submit(form, {"message": "something else"})
            err = await self.fails("echo", "conflict", action="complete", sessionid=sid, payload=other)
            emit("resubmit", task=task, conflict=err["text"])
        self.echo_session = sid

    def task_of(self, c):
        for _, t in c["notes"]:
            if t.startswith("Task "):
                return t.split()[1]
        raise CheckFailed("no task note in %s" % (c["notes"],))

    async def get_sum(self):
        with check("get-sum"):
            c = await self.ok("get-sum")
            sid = c["sessionid"]
            form = c["form"]
            f = form.get_fields()
            for var in ("a", "b"):
                expect(var in f and f[var]["required"], "get-sum form lacks required %s: %s", var, list(f))
                v = f[var].xml.find("{%s}validate" % VALIDATE)
                expect(v is not None and v.get("datatype") == "xs:decimal", "field %s lacks XEP-0122 xs:decimal validation", var)
            c = await self.ok("get-sum", action="complete", sessionid=sid, payload=self.submit(form, {"a": "2", "b": "3.5"}))
            if c["status"] != "completed":
                c, _ = await self.until("get-sum", sid, lambda c: c["status"] == "completed", "get-sum")
            text = self.result_text(c)
            expect("5.5" in text, "get-sum result %r", text)
            emit("get-sum", text=text)

    async def structured(self):
        with check("structured"):
            node = "get-structured-content"
            c = await self.ok(node)
            sid = c["sessionid"]
            f = c["form"].get_fields()
            expect(f["location"]["type"] == "list-single", "location is %s", f["location"]["type"])
            opts = [o["value"] for o in f["location"]["options"]]
            expect("Chicago" in opts, "location options %s", opts)
            c = await self.ok(node, action="complete", sessionid=sid, payload=self.submit(c["form"], {"location": "Chicago"}))
            if c["status"] != "completed":
                c, _ = await self.until(node, sid, lambda c: c["status"] == "completed", "structured")
            x = c["form"].xml
            cols = [fl.get("var") for fl in x.findall("{%s}reported/{%s}field" % (DATA, DATA))]
            expect(cols == ["conditions", "humidity", "temperature"], "reported columns %s", cols)
            row = {fl.get("var"): fl.findtext("{%s}value" % DATA) for fl in x.findall("{%s}item/{%s}field" % (DATA, DATA))}
            expect(row == {"conditions": "Light rain / drizzle", "humidity": "82", "temperature": "36"}, "table row %s", row)
            emit("structured", row=row)

    async def long_running(self):
        with check("progress"):
            c = await self.ok("trigger-long-running-operation")
            sid = c["sessionid"]
            sub = self.submit(c["form"], {"duration": "3", "steps": "3"})
            c = await self.ok("trigger-long-running-operation", action="complete", sessionid=sid, payload=sub)
            c, notes = await self.until("trigger-long-running-operation", sid, lambda c: c["status"] == "completed", "long-running")
            prog = [n for n in notes if "Progress:" in n]
            expect(prog, "no progress note while executing; notes %s", notes)
            emit("progress", notes=prog[:3], text=self.result_text(c))

    async def elicitation(self):
        # A running stage's form names the refresh stage; an input stage's
        # names "input:<request>:<revision>".
        def is_input_stage(form):
            if form is None or "agentgw-stage" not in form.get_fields():
                return False
            v = form.get_fields()["agentgw-stage"]["value"]
            if isinstance(v, list):
                v = v[0] if v else ""
            return v.startswith("input:")

        with check("elicitation"):
            node = "trigger-elicitation-request"
            c = await self.ok(node)
            sid = c["sessionid"]
            c = await self.ok(node, action="complete", sessionid=sid, payload=self.submit(c["form"], {}))
            c, _ = await self.until(node, sid, lambda c: c["status"] != "executing" or is_input_stage(c["form"]), "input form")
            expect(c["status"] == "executing", "status %s, want an input stage", c["status"])
            form = c["form"]
            f = form.get_fields()
            stage = f["agentgw-stage"]["value"]
            if isinstance(stage, list):
                stage = stage[0] if stage else ""
            expect(stage.startswith("input:"), "stage %r is not an input stage", stage)
            expect(f["name"]["required"] and f["name"]["type"] == "text-single", "name field %s", f["name"]["type"])
            expect(f["check"]["type"] == "boolean", "check field %s", f["check"]["type"])
            v = f["integer"].xml.find("{%s}validate" % VALIDATE)
            expect(v is not None and v.get("datatype") == "xs:integer", "integer lacks xs:integer validation")
            rng = v.find("{%s}range" % VALIDATE)
            expect(rng is not None and rng.get("max") == "100", "integer range %s", None if rng is None else rng.attrib)
            types = {k: fl["type"] for k, fl in f.items()}
            for var, want in (("untitledSingleSelectEnum", "list-single"), ("titledSingleSelectEnum", "list-single"),
                              ("legacyTitledEnum", "list-single"), ("untitledMultipleSelectEnum", "list-multi"),
                              ("titledMultipleSelectEnum", "list-multi")):
                expect(types.get(var) == want, "%s is %s, want %s", var, types.get(var), want)
            labels = {o["label"] for o in f["titledSingleSelectEnum"]["options"]}
            expect("Superman" in labels, "titled enum labels %s", labels)
            # Fallbacks are JSON text fields named so.
            answer = {"name": "Ada Lovelace", "check": True, "integer": "7", "titledSingleSelectEnum": "hero-3"}
            sub = self.submit(form, answer)
            c = await self.ok(node, action="complete", sessionid=sid, payload=sub)
            if c["status"] != "completed":
                c, _ = await self.until(node, sid, lambda c: c["status"] == "completed", "elicitation result")
            text = self.result_text(c)
            expect("Name: Ada Lovelace" in text and "Favorite Integer: 7" in text and "hero-3" in text, "elicitation result %r", text)
            # The answered stage again: replayed, not a second answer.
            c2 = await self.ok(node, action="complete", sessionid=sid, payload=sub)
            expect(c2["status"] == "completed", "re-submitted input stage: %s", c2["status"])
            emit("elicitation", fields=types, text=text.splitlines()[:3])

    async def cancel(self):
        with check("cancel"):
            node = "trigger-long-running-operation"
            c = await self.ok(node)
            sid = c["sessionid"]
            c = await self.ok(node, action="complete", sessionid=sid, payload=self.submit(c["form"], {"duration": "60", "steps": "60"}))
            expect(c["status"] == "executing", "status %s", c["status"])
            await self.until(node, sid, lambda c: any("running" in t for _, t in c["notes"]), "running")
            c = await self.ok(node, action="cancel", sessionid=sid)
            expect(c["status"] == "canceled", "cancel status %s", c["status"])
            c, _ = await self.until(node, sid, lambda c: c["status"] == "canceled", "cancelled task")
            expect(any("cancelled" in t for _, t in c["notes"]), "notes %s", c["notes"])
            emit("cancel", session=sid)
        with check("cancel-before-start"):
            c = await self.ok("echo")
            sid = c["sessionid"]
            c = await self.ok("echo", action="cancel", sessionid=sid)
            expect(c["status"] == "canceled", "status %s", c["status"])
            await self.fails("echo", "bad-request", "bad-sessionid", action="complete", sessionid=sid, payload=self.submit(c["form"] or self.forms.make_form(), {}))
            emit("cancel-before-start")

    def raw_command(self, node, sid, fields, action="complete"):
        c = el(COMMANDS, "command", node=node, action=action)
        if sid:
            c.set("sessionid", sid)
        x = ET.SubElement(c, q(DATA, "x"), {"type": "submit"})
        for var, values in fields:
            f = ET.SubElement(x, q(DATA, "field"), {"var": var})
            for v in values:
                ET.SubElement(f, q(DATA, "value")).text = v
        return c

    async def raw_error(self, node, sid, fields, want, app=None):
        reply = await self.x.query("set", self.ep, self.raw_command(node, sid, fields))
        expect(reply.get("type") == "error", "hostile form accepted")
        got = error_condition(reply)
        err = reply.find(q(CLIENT, "error"))
        apps = [c.tag.split("}", 1)[1] for c in err if c.tag.startswith("{%s}" % COMMANDS)]
        text = err.find(q(STANZAS, "text"))
        text = "" if text is None else text.text
        expect(got == want, "hostile form: %s (%s), want %s", got, text, want)
        if app:
            expect(app in apps, "hostile form: application condition %s, want %s", apps, app)
        return text

    async def hostile(self):
        with check("hostile"):
            c = await self.ok("get-sum")
            sid = c["sessionid"]
            form = c["form"]
            fields = {k: (f["type"], f["value"]) for k, f in form.get_fields().items()}
            texts = {}
            texts["unknown-field"] = await self.raw_error("get-sum", sid, [("a", ["1"]), ("b", ["2"]), ("evil", ["x"])], "bad-request", "bad-payload")
            texts["wrong-type"] = await self.raw_error("get-sum", sid, [("a", ["one"]), ("b", ["2"])], "bad-request", "bad-payload")
            texts["missing"] = await self.raw_error("get-sum", sid, [("a", ["1"])], "bad-request", "bad-payload")
            texts["two-values"] = await self.raw_error("get-sum", sid, [("a", ["1", "2"]), ("b", ["2"])], "bad-request", "bad-payload")
            texts["100-values"] = await self.raw_error("get-sum", sid, [("a", [str(i) for i in range(100)]), ("b", ["2"])], "bad-request", "bad-payload")
            # 10,000 values: over the stanza limits or the form limits; either
            # way a clear error and the session survives.
            reply = await self.x.query("set", self.ep, self.raw_command("get-sum", sid, [("a", [str(i) for i in range(10000)]), ("b", ["2"])]))
            expect(reply.get("type") == "error", "10,000 values accepted")
            texts["10000-values"] = error_condition(reply)
            expect(texts["10000-values"] in ("bad-request", "resource-constraint"), "10,000 values: %s", texts["10000-values"])
            for k, t in texts.items():
                expect("evil" not in (t or "") and "one" != (t or ""), "error text for %s reflects the payload: %r", k, t)
            # After all that the session still works.
            sub = self.forms.make_form(ftype="submit")
            for var, (typ, val) in fields.items():
                sub.add_field(var=var, ftype=typ, value={"a": "1", "b": "1"}.get(var, val))
            c = await self.ok("get-sum", action="complete", sessionid=sid, payload=sub)
            stale = await self.fails("get-sum", "bad-request", "bad-sessionid", action="next", sessionid="cmd-AAAAAAAAAAAAAAAAAAAAAA")
            await self.fails("get-sum", "bad-request", "bad-sessionid", action="next", sessionid="not a session")
            await self.fails("get-sum", "bad-request", "malformed-action", action="fly", sessionid=sid)
            await self.fails("no-such-tool", "item-not-found")
            emit("hostile", texts=texts, stale=stale["text"])
            self.stale_text = stale["text"]

    async def local(self):
        await self.listing()
        await self.echo()
        await self.get_sum()
        await self.hostile()
        await self.structured()
        await self.long_running()
        await self.elicitation()
        await self.cancel()
        # A first stage left open, for the foreign check.
        c = await self.ok("echo")
        emit("sessions", sessions=[self.echo_session + " echo", c["sessionid"] + " echo"], stale=self.stale_text)

    async def foreign(self):
        with check("foreign-session"):
            stale = await self.fails("echo", "bad-request", "bad-sessionid", action="next", sessionid="cmd-BBBBBBBBBBBBBBBBBBBBBB")
            for s in self.x.args.sessions.split(","):
                sid, node = s.split(" ")
                for action, payload in (("next", None), ("cancel", None), ("complete", self.forms.make_form(ftype="submit"))):
                    err = await self.fails(node, "bad-request", "bad-sessionid", action=action, sessionid=sid, payload=payload)
                    expect(err == stale, "another user's session answers %s, a stale one %s", err, stale)
            emit("foreign-session", sessions=len(self.x.args.sessions.split(",")))

    async def resume(self):
        with check("resume"):
            # After a gateway restart a finished session answers from the
            # task store.
            sid, node = self.x.args.sessions.split(" ")
            c = await self.ok(node, action="next", sessionid=sid)
            expect(c["status"] == "completed", "resumed session status %s", c["status"])
            expect("hello adhoc" in self.result_text(c), "resumed result %r", self.result_text(c))
            emit("resume", session=sid)

    async def remote(self):
        with check("remote-commands"):
            missing = self.x.args.missing
            got = {}
            for name, to in (("hidden", self.ep), ("missing", missing)):
                reply = await self.x.query("get", to, el(DISCO_ITEMS, "query", node=COMMANDS))
                got[name] = (reply.get("type"), error_condition(reply), ET.tostring(reply.find(q(CLIENT, "error"))))
                reply = await self.x.query("set", to, el(COMMANDS, "command", node="echo", action="execute"))
                got[name + "-execute"] = (reply.get("type"), error_condition(reply), ET.tostring(reply.find(q(CLIENT, "error"))))
            expect(got["hidden"][1] == "item-not-found", "commands node of a hidden endpoint: %s", got["hidden"])
            expect(got["hidden"] == got["missing"], "hidden %s and missing %s commands nodes differ", got["hidden"], got["missing"])
            expect(got["hidden-execute"] == got["missing-execute"], "executing at hidden %s and missing %s differs", got["hidden-execute"], got["missing-execute"])
            emit("remote-commands", condition=got["hidden"][1])
        with check("remote-catalog"):
            # The catalog node is visibility-filtered: subscribing works,
            # but nothing about the hidden endpoint is listed.
            gw = self.x.args.gateway
            await self.x["xep_0060"].subscribe(gw, "urn:agentgw:catalog:0", subscribee=self.x.boundjid.full, timeout=30)
            items = await self.x["xep_0060"].get_items(gw, "urn:agentgw:catalog:0", timeout=30)
            ids = [i["id"] for i in items["pubsub"]["items"]]
            expect(self.ep not in ids and not ids, "a principal without grants sees catalog items %s", ids)
            emit("remote-catalog")


async def scenario(x):
    a = Adhoc(x)
    await getattr(a, x.args.mode)()


if __name__ == "__main__":
    run(scenario, extra_args, plugins=("xep_0030", "xep_0004", "xep_0050", "xep_0060"))
