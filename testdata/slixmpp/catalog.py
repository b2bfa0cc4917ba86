#!/usr/bin/python3
"""Catalog change notification, checked with slixmpp: XEP-0115 caps in the
endpoint's presence (the verification string recomputed by slixmpp's own
xep_0115 from the disco#info it fetches) and agentgw's urn:agentgw:catalog:0
PubSub node (subscribed with slixmpp's xep_0060).

Prints {"check": "ready", ...} once subscribed, then one check per round
(--rounds) when both the new caps and the PubSub item for the endpoint's
new version have arrived; the test activates a new version after each line.
"""

import asyncio
import time

from slixmpp.xmlstream.handler import Callback
from slixmpp.xmlstream.matcher import MatchXPath

from agentcheck import *  # noqa: F401,F403

CAPS = "http://jabber.org/protocol/caps"
PUBSUB_EVENT = "http://jabber.org/protocol/pubsub#event"
CATALOG = "urn:agentgw:catalog:0"


def extra_args(p):
    p.add_argument("--endpoint", required=True)
    p.add_argument("--rounds", type=int, default=1)


class Watch:
    def __init__(self, x):
        self.x = x
        self.ep = x.args.endpoint
        self.vers = []    # caps ver per presence, in order
        self.items = []   # (version, active) per pubsub item for ep
        x.register_handler(Callback("caps presence", MatchXPath("{%s}presence" % CLIENT), self.on_presence))
        x.register_handler(Callback("catalog items", MatchXPath("{%s}message/{%s}event" % (CLIENT, PUBSUB_EVENT)), self.on_event))

    def on_presence(self, p):
        if str(p["from"].bare) != self.ep or p["type"] not in ("available", ""):
            return
        c = p.xml.find("{%s}c" % CAPS)
        if c is not None:
            self.vers.append((c.get("node"), c.get("ver"), c.get("hash")))

    def on_event(self, m):
        for items in m.xml.iter("{%s}items" % PUBSUB_EVENT):
            if items.get("node") != CATALOG:
                continue
            for it in items.findall("{%s}item" % PUBSUB_EVENT):
                ch = it.find("{%s}change" % CATALOG)
                if it.get("id") == self.ep and ch is not None:
                    self.items.append((ch.get("version"), ch.get("active"), time.time()))

    async def wait(self, pred, what, timeout=30):
        deadline = time.monotonic() + timeout
        while not pred():
            expect(time.monotonic() < deadline, "no %s within %ss (vers %s, items %s)", what, timeout, self.vers[-2:], self.items[-2:])
            await asyncio.sleep(0.01)

    async def verify_caps(self, node, ver):
        info = await self.x["xep_0030"].get_info(jid=self.ep, node=node + "#" + ver, timeout=20)
        got = self.x["xep_0115"].generate_verstring(info["disco_info"], "sha-1")
        expect(got == ver, "caps ver %s, but slixmpp computes %s from the disco answer", ver, got)

    async def run(self):
        gw = self.x.args.gateway
        with check("ready"):
            self.x.send_presence(pto=self.ep, ptype="subscribe")
            await self.wait(lambda: self.vers, "presence with caps")
            node, ver, h = self.vers[-1]
            expect(h == "sha-1", "caps hash %s", h)
            await self.verify_caps(node, ver)
            await self.x["xep_0060"].subscribe(gw, CATALOG, subscribee=self.x.boundjid.full, timeout=20)
            items = await self.x["xep_0060"].get_items(gw, CATALOG, timeout=20)
            ids = [i["id"] for i in items["pubsub"]["items"]]
            expect(self.ep in ids, "catalog items %s lack %s", ids, self.ep)
            emit("ready", ver=ver)
        for r in range(self.x.args.rounds):
            with check("round"):
                n_items, last_ver = len(self.items), self.vers[-1][1]
                await self.wait(lambda: len(self.items) > n_items and self.vers[-1][1] != last_ver, "caps change and catalog item")
                node, ver, _ = self.vers[-1]
                await self.verify_caps(node, ver)
                version, act, _ = self.items[-1]
                expect(act == "true" and version, "catalog item %s", self.items[-1])
                emit("round", round=r, version=version, ver=ver)


async def scenario(x):
    await Watch(x).run()


if __name__ == "__main__":
    run(scenario, extra_args, plugins=("xep_0030", "xep_0060", "xep_0115"))
