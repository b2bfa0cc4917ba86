#!/usr/bin/python3
"""The gateway's administration as XEP-0050 ad-hoc commands at the
gateway's JID, driven with slixmpp's own XEP-0050 client and XEP-0004 forms,
as an operator's XMPP client would.

Modes:
  admin   (an [xmpp] admins account) lists the commands, registers and
          activates --manifest, reads its status, grants, lists and revokes
          trust, bans and unbans a self-registered JID, looks --task up.
  other   (an account that is not an admin) sees no commands feature, and
          the commands node, a command node and an unknown node answer it
          alike, as does executing a command there.
"""

import asyncio
import json
import xml.etree.ElementTree as ET

from slixmpp.exceptions import IqError

from agentcheck import *  # noqa: F401,F403

COMMANDS = "http://jabber.org/protocol/commands"
PREFIX = "urn:agentgw:admin#"


def extra_args(p):
    p.add_argument("--mode", default="admin")
    p.add_argument("--manifest", default="")
    p.add_argument("--task", default="")
    p.add_argument("--cancel-task", default="")


class Admin:
    def __init__(self, x):
        self.x = x
        self.gw = x.args.gateway
        self.cmd = x["xep_0050"]
        self.forms = x["xep_0004"]

    async def run(self, name, values):
        """Executes a command, fills its form in with values and submits
        it; returns the completed stage."""
        node = PREFIX + name
        iq = await self.cmd.send_command(self.gw, node, action="execute", timeout=30)
        c = iq["command"]
        if c["status"] == "completed":
            return c
        expect(c["status"] == "executing", "%s: first stage %s", name, c["status"])
        form = c["form"]
        sub = self.forms.make_form(ftype="submit")
        for var, f in form.get_fields().items():
            if var in values:
                sub.add_field(var=var, ftype=f["type"], value=values[var])
            elif f["type"] == "hidden":
                sub.add_field(var=var, ftype="hidden", value=f["value"])
        iq = await self.cmd.send_command(self.gw, node, action="complete", sessionid=c["sessionid"], payload=sub, timeout=30)
        c = iq["command"]
        expect(c["status"] == "completed", "%s: submission status %s", name, c["status"])
        return c

    def note(self, c):
        notes = c["notes"]
        return notes[0] if notes else ("", "")

    async def admin(self):
        with check("admin-listing"):
            info = await self.x["xep_0030"].get_info(jid=self.gw, timeout=20)
            expect(COMMANDS in info["disco_info"]["features"], "the gateway does not advertise %s to an admin", COMMANDS)
            items = await self.cmd.get_commands(self.gw, timeout=20)
            nodes = sorted(i[1] for i in items["disco_items"]["items"])
            for want in ("register", "activate", "deactivate", "status", "trust-grant", "trust-revoke", "trust-list", "ban", "unban", "task", "task-cancel"):
                expect(PREFIX + want in nodes, "command %s not listed: %s", want, nodes)
            emit("admin-listing", count=len(nodes))
        with check("admin-register"):
            manifest = open(self.x.args.manifest).read()
            c = await self.run("register", {"manifest": manifest.splitlines(), "activate": True})
            typ, text = self.note(c)
            expect(typ == "info" and "It is active." in text, "register: %s %s", typ, text)
            emit("admin-register", note=text)
        ep = json.loads(manifest)["agent"]["jid"]
        with check("admin-status"):
            c = await self.run("status", {"endpoint": ep})
            typ, text = self.note(c)
            expect(typ == "info" and "active version" in text, "status: %s %s", typ, text)
            expect(c["form"]["type"] == "result", "status form type %s", c["form"]["type"])
            rows = c["form"]["items"]
            expect(len(rows) >= 1, "status lists no versions")
            emit("admin-status", note=text, versions=len(rows))
        with check("admin-trust"):
            await self.run("trust-grant", {"principal": "partner.example", "scope": ["visibility", "invocation"]})
            c = await self.run("trust-list", {})
            rows = c["form"]["items"]
            principals = [r["principal"] for r in rows]
            expect("partner.example" in principals, "trust-list: %s", principals)
            c = await self.run("trust-revoke", {"principal": "partner.example"})
            typ, text = self.note(c)
            expect(typ == "info" and text.startswith("Revoked"), "trust-revoke: %s %s", typ, text)
            emit("admin-trust", listed=principals)
        with check("admin-ban"):
            c = await self.run("ban", {"endpoint": "bot@" + self.x.boundjid.domain, "reason": "spam"})
            typ, text = self.note(c)
            expect(typ == "info" and text.startswith("Banned"), "ban: %s %s", typ, text)
            c = await self.run("unban", {"endpoint": "bot@" + self.x.boundjid.domain})
            typ, text = self.note(c)
            expect(typ == "info" and text.startswith("Unbanned"), "unban: %s %s", typ, text)
            emit("admin-ban")
        if self.x.args.task:
            with check("admin-task"):
                c = await self.run("task", {"task": self.x.args.task})
                typ, text = self.note(c)
                expect(typ == "info", "task: %s %s", typ, text)
                fields = c["form"].get_fields()
                emit("admin-task", state=fields["state"]["value"], caller=fields["caller"]["value"])
        if self.x.args.cancel_task:
            with check("admin-task-cancel"):
                c = await self.run("task-cancel", {"task": self.x.args.cancel_task})
                typ, text = self.note(c)
                expect(typ == "info" and text.startswith("Cancellation of task"), "task-cancel: %s %s", typ, text)
                # The same cancel again: the task is settling or settled,
                # so it is refused with a fixed sentence, not run twice.
                c = await self.run("task-cancel", {"task": self.x.args.cancel_task})
                typ2, text2 = self.note(c)
                expect(typ2 == "error" and "already settled" in text2, "second task-cancel: %s %s", typ2, text2)
                c = await self.run("task-cancel", {"task": "task-doesnotexist0000000000000000"})
                typ3, text3 = self.note(c)
                expect(typ3 == "error" and text3.startswith("No such"), "unknown task-cancel: %s %s", typ3, text3)
                state = ""
                for _ in range(100):
                    c = await self.run("task", {"task": self.x.args.cancel_task})
                    state = c["form"].get_fields()["state"]["value"]
                    if state == "cancelled":
                        break
                    await asyncio.sleep(0.1)
                expect(state == "cancelled", "after task-cancel the task is %s", state)
                emit("admin-task-cancel", note=text, again=text2, state=state)

    async def other(self):
        with check("other-hidden"):
            info = await self.x["xep_0030"].get_info(jid=self.gw, timeout=20)
            expect(COMMANDS not in info["disco_info"]["features"], "a non-admin sees %s", COMMANDS)
            got = {}
            for name, node in (("commands", COMMANDS), ("command", PREFIX + "register"), ("unknown", "urn:example:nosuch")):
                reply = await self.x.query("get", self.gw, el(DISCO_ITEMS, "query", node=node))
                got[name] = (reply.get("type"), ET.tostring(reply.find(q(CLIENT, "error"))))
            expect(got["commands"][0] == "error", "a non-admin lists the commands: %s", got["commands"])
            expect(got["commands"] == got["unknown"] == got["command"], "answers differ: %s", got)
            ex = {}
            for name, node in (("register", PREFIX + "register"), ("unknown", "urn:example:nosuch")):
                reply = await self.x.query("set", self.gw, el(COMMANDS, "command", node=node, action="execute"))
                ex[name] = (reply.get("type"), ET.tostring(reply.find(q(CLIENT, "error"))))
            expect(ex["register"] == ex["unknown"], "executing differs: %s", ex)
            emit("other-hidden", condition=error_condition(reply))


async def scenario(x):
    await getattr(Admin(x), x.args.mode)()


if __name__ == "__main__":
    run(scenario, extra_args, plugins=("xep_0030", "xep_0004", "xep_0050"))
