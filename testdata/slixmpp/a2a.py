#!/usr/bin/python3
"""An A2A agent behind [agents.a2a], invoked through the gateway by slixmpp.

Against one endpoint (--endpoint) backed by testdata/a2a/agent.mjs (the
official JS SDK's A2A server) it checks: the manifest projected from the
agent card (skills → tools with the documented message schema); echo
completing with the agent's artifact; long streaming its working updates
as progress; ask mapping input-required to input_required and the answer
going back; cancel of a running long task reaching the A2A agent.
"""

import json

from agentcheck import *  # noqa: F401,F403
from tasks import Tasks, new_id, invoke_el, cancel_el, provide_input_el  # noqa: F401


def extra_args(p):
    p.add_argument("--endpoint", required=True)


async def scenario(x):
    t = Tasks(x)
    await t.pin()
    with check("a2a-manifest"):
        m = await x.result("get", t.ep, el(API, "manifest-request"), q(API, "manifest"))
        doc = json.loads(m.find(q(API, "json")).text)
        names = sorted(tl["name"] for tl in doc["tools"])
        expect(names == ["ask", "echo", "long", "stuck"], "tools %r", names)
        echo = [tl for tl in doc["tools"] if tl["name"] == "echo"][0]
        expect(echo["inputSchema"]["required"] == ["text"], "message schema %r", echo["inputSchema"])
        emit("a2a-manifest", tools=names, version=doc["agent"]["version"])

    with check("a2a-echo"):
        tid, _ = await t.invoke("echo", {"text": "hello over A2A"})
        ev = await t.terminal(tid)
        expect(ev["type"] == "completed", "echo settled %s: %s", ev["type"], ev["payload"])
        res = ev["payload"]["result"]
        texts = [c.get("text") for c in res["content"] if c.get("type") == "text"]
        expect("echo: hello over A2A" in texts, "content %r", res["content"])
        expect(res.get("structuredContent") == {"words": 3}, "structuredContent %r", res.get("structuredContent"))
        t.check_history(tid, ev["revision"])
        emit("a2a-echo", task=tid)

    with check("a2a-streaming-progress"):
        tid, _ = await t.invoke("long", {"text": "go"})
        ev = await t.terminal(tid)
        expect(ev["type"] == "completed", "long settled %s", ev["type"])
        types = t.check_history(tid, ev["revision"])
        msgs = [e["payload"].get("message") for e in x.events[tid].values() if e["type"] == "progress"]
        expect(sum(1 for m in msgs if m and m.startswith("step ")) >= 3, "progress %r", msgs)
        emit("a2a-streaming-progress", task=tid, progress=msgs)

    with check("a2a-input-required"):
        tid, _ = await t.invoke("ask", {"text": "start"})
        ir = await x.wait_event(tid, lambda e: e["type"] == "input_required", "input_required")
        req = ir["payload"]
        expect(req["question"] == "What is your name?", "question %r", req["question"])
        await x.result("set", t.ep, provide_input_el(tid, req["requestId"], ir["revision"], {"text": "Ada"}), q(TASK, "input-accepted"))
        ev = await t.terminal(tid)
        expect(ev["type"] == "completed", "ask settled %s: %s", ev["type"], ev["payload"])
        texts = [c.get("text") for c in ev["payload"]["result"]["content"]]
        expect("hello Ada" in texts, "content %r", texts)
        emit("a2a-input-required", task=tid)

    with check("a2a-cancel"):
        tid, _ = await t.invoke("long", {"text": "go"})
        await x.wait_event(tid, lambda e: e["type"] == "progress", "progress")
        await cancel_at_current(x, t, tid)
        ev = await t.terminal(tid)
        expect(ev["type"] == "cancelled", "cancel settled %s", ev["type"])
        emit("a2a-cancel", task=tid, reason=ev["payload"].get("reason"))

    with check("a2a-cancel-ignored"):
        tid, _ = await t.invoke("stuck", {"text": "go"})
        await x.wait_event(tid, lambda e: e["type"] == "progress", "progress")
        await cancel_at_current(x, t, tid)
        ev = await t.terminal(tid, timeout=40)
        expect(ev["type"] == "cancelled", "stuck settled %s", ev["type"])
        emit("a2a-cancel-ignored", task=tid, reason=ev["payload"].get("reason"))


async def cancel_at_current(x, t, tid):
    """Cancels at the current revision, reading it again when a progress
    update commits between the read and the cancel (conflict)."""
    for attempt in range(10):
        st = await t.state(tid)
        try:
            await x.result("set", t.ep, cancel_el(tid, int(st.get("revision")), "stop"), q(TASK, "cancel-accepted"))
            return
        except Exception as e:  # noqa: BLE001
            if "conflict" not in str(e) or attempt == 9:
                raise


if __name__ == "__main__":
    run(scenario, extra_args)
