#!/usr/bin/python3
"""Discovery conformance of an XMPP Agent Gateway, checked with slixmpp.

Mode "visible" (default) expects --endpoints to be exactly the endpoints
the user can see and checks gateway information, the RSM-paged directory,
endpoint information, tool nodes, manifest and schema hashes, stale-hash
conflicts and search. Mode "hidden" runs as a principal that may see
nothing and checks that an existing endpoint (--hidden) answers exactly
like a nonexistent one (--missing).
"""

import json

from agentcheck import *  # noqa: F401,F403


def extra_args(p):
    p.add_argument("--mode", choices=["visible", "hidden"], default="visible")
    p.add_argument("--endpoints", default="", help="comma-separated endpoint JIDs expected in the directory")
    p.add_argument("--search", default="", help="nick to search for, with --search-expect")
    p.add_argument("--search-expect", default="")
    p.add_argument("--hidden", default="")
    p.add_argument("--missing", default="")
    p.add_argument("--version", default="", help="API version known out of band (hidden mode)")
    p.add_argument("--hash", default="", help="manifest hash known out of band (hidden mode)")


def disco_info(node=None):
    e = el(DISCO_INFO, "query")
    if node:
        e.set("node", node)
    return e


def disco_items(node=None, max_=None, after=None):
    e = el(DISCO_ITEMS, "query")
    if node:
        e.set("node", node)
    if max_ is not None or after is not None:
        s = el(RSM, "set")
        if max_ is not None:
            s.append(el(RSM, "max", str(max_)))
        if after is not None:
            s.append(el(RSM, "after", after))
        e.append(s)
    return e


def schema_request(tool, version, mhash, direction="input"):
    e = el(API, "schema-request", direction=direction, tool=tool, version=version)
    e.append(el(HASHES, "hash", mhash, algo="sha-256"))
    return e


def rsm_of(query):
    s = query.find(q(RSM, "set"))
    if s is None:
        return {}
    out = {}
    for k in ("first", "last", "count"):
        c = s.find(q(RSM, k))
        if c is not None:
            out[k] = c.text or ""
    return out


async def gateway_info(x):
    with check("gateway-info"):
        p = await x.result("get", x.args.gateway, disco_info(), q(DISCO_INFO, "query"))
        ids = [(i.get("category"), i.get("type")) for i in p.findall(q(DISCO_INFO, "identity"))]
        feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
        expect(("automation", "agent-gateway") in ids, "gateway identity missing: %s", ids)
        for f in (DISCO_INFO, DISCO_ITEMS, DIRECTORY, SEARCH, DATA):
            expect(f in feats, "gateway does not advertise %s", f)
        emit("gateway-info", identities=ids, features=sorted(feats))
    with check("directory-node-info"):
        p = await x.result("get", x.args.gateway, disco_info(DIRECTORY), q(DISCO_INFO, "query"))
        ids = [(i.get("category"), i.get("type")) for i in p.findall(q(DISCO_INFO, "identity"))]
        expect(("automation", "agent-directory") in ids, "directory node identity missing: %s", ids)
        emit("directory-node-info", identities=ids)


async def directory(x, expected):
    with check("directory-rsm"):
        walked, pages, after = [], [], None
        for _ in range(20):
            p = await x.result("get", x.args.gateway, disco_items(DIRECTORY, 2, after), q(DISCO_ITEMS, "query"))
            items = p.findall(q(DISCO_ITEMS, "item"))
            rsm = rsm_of(p)
            expect(rsm.get("count") == str(len(expected)), "RSM count %r, want %d", rsm.get("count"), len(expected))
            expect(len(items) <= 2, "page of %d items with max=2", len(items))
            if not items:
                break
            jids = [i.get("jid") for i in items]
            for i in items:
                expect(i.get("node") is None, "directory item %s carries a node", i.get("jid"))
            expect(rsm.get("first") == jids[0] and rsm.get("last") == jids[-1],
                   "RSM first/last %s/%s do not match items %s", rsm.get("first"), rsm.get("last"), jids)
            pages.append(jids)
            walked += jids
            after = jids[-1]
            if len(walked) >= len(expected):
                # One more page after the last item must be empty.
                p = await x.result("get", x.args.gateway, disco_items(DIRECTORY, 2, after), q(DISCO_ITEMS, "query"))
                expect(not p.findall(q(DISCO_ITEMS, "item")), "a page after the last item is not empty")
                break
        expect(walked == octet_sorted(expected), "directory walk %s, want %s in octet order", walked, octet_sorted(expected))
        expect(len(set(walked)) == len(walked), "an endpoint was listed twice: %s", walked)
        expect([len(pg) for pg in pages] == [2] * (len(expected) // 2) + ([1] if len(expected) % 2 else []),
               "page sizes %s", [len(pg) for pg in pages])
        emit("directory-rsm", pages=pages, count=len(expected))


async def endpoint(x, ep):
    """Checks one endpoint and returns its pinned manifest."""
    name = ep.split("@")[0]
    with check("endpoint-info"):
        p = await x.result("get", ep, disco_info(), q(DISCO_INFO, "query"))
        ids = [(i.get("category"), i.get("type")) for i in p.findall(q(DISCO_INFO, "identity"))]
        feats = {f.get("var") for f in p.findall(q(DISCO_INFO, "feature"))}
        expect(("automation", "agent-endpoint") in ids, "%s identity missing: %s", ep, ids)
        for f in (DISCO_INFO, DISCO_ITEMS, ENDPOINT, API + "#manifest", API + "#schema", TASK):
            expect(f in feats, "%s does not advertise %s", ep, f)
        form = forms_by_type(p).get(ENDPOINT_INFO)
        expect(form is not None, "%s has no %s form", ep, ENDPOINT_INFO)
        one = {k: (v[0] if len(v) == 1 else v) for k, v in form.items()}
        for f in ("server_name", "server_title", "version", "manifest_hash_algo", "manifest_hash_value",
                  "cold_start_supported", "request_replay_seconds"):
            expect(isinstance(one.get(f), str) and one[f], "%s form lacks a single %s", ep, f)
        expect(one["server_name"] == name, "server_name %r, want %r", one["server_name"], name)
        expect(one["manifest_hash_algo"] == "sha-256", "manifest_hash_algo %r", one["manifest_hash_algo"])
        expect(one["cold_start_supported"] in ("0", "1"), "cold_start_supported %r is not 0 or 1", one["cold_start_supported"])
        expect(one["request_replay_seconds"].isdigit() and int(one["request_replay_seconds"]) > 0,
               "request_replay_seconds %r", one["request_replay_seconds"])
        version, mhash = one["version"], one["manifest_hash_value"]
        emit("endpoint-info", endpoint=ep, fields=one)
    with check("endpoint-feature-not-a-node"):
        await x.error("get", ep, disco_info(ENDPOINT), "item-not-found")

    with check("manifest"):
        m = await x.result("get", ep, el(API, "manifest-request"), q(API, "manifest"))
        expect(m.get("version") == version, "manifest version %r, want %r", m.get("version"), version)
        expect(m.get("media-type") == "application/json", "manifest media-type %r", m.get("media-type"))
        h = m.find(q(HASHES, "hash"))
        expect(h is not None and h.get("algo") == "sha-256" and h.text == mhash,
               "manifest hash element %r differs from the advertised %s", None if h is None else h.text, mhash)
        raw = (m.find(q(API, "json")).text or "").encode("utf-8")
        expect(sha256_b64(raw) == mhash, "sha-256 of the manifest bytes %s != advertised %s", sha256_b64(raw), mhash)
        doc = json.loads(raw)
        expect(doc["agent"]["jid"] == ep, "manifest agent.jid %r", doc["agent"]["jid"])
        tools = {t["name"]: t for t in doc["tools"]}
        # The exact version is addressable too.
        m2 = await x.result("get", ep, el(API, "manifest-request", version=version), q(API, "manifest"))
        expect((m2.find(q(API, "json")).text or "").encode("utf-8") == raw, "manifest by exact version differs")
        emit("manifest", endpoint=ep, version=version, hash=mhash, tools=sorted(tools))

    with check("tool-nodes"):
        coll = "%s#%s" % (TOOLS_NODE, version)
        p = await x.result("get", ep, disco_items(coll, 50), q(DISCO_ITEMS, "query"))
        items = p.findall(q(DISCO_ITEMS, "item"))
        names = []
        prefix = "%s#%s#" % (TOOL, version)
        for it in items:
            expect(it.get("jid") == ep, "tool item jid %r", it.get("jid"))
            node = it.get("node") or ""
            expect(node.startswith(prefix), "tool node %r lacks prefix %r", node, prefix)
            names.append(b64url_decode(node[len(prefix):]))
        expect(names == octet_sorted(tools), "tool names %s, want %s in octet order", names, octet_sorted(tools))
        rsm = rsm_of(p)
        expect(rsm.get("count") == str(len(tools)), "tool RSM count %r", rsm.get("count"))
        emit("tool-nodes", endpoint=ep, nodes=[it.get("node") for it in items], names=names)

    with check("schemas"):
        hashes = {}
        for tname in sorted(tools):
            node = "%s#%s#%s" % (TOOL, version, b64url(tname))
            info = await x.result("get", ep, disco_info(node), q(DISCO_INFO, "query"))
            ids = [(i.get("category"), i.get("type")) for i in info.findall(q(DISCO_INFO, "identity"))]
            expect(("automation", "agent-tool") in ids, "tool %s identity %s", tname, ids)
            tf = forms_by_type(info).get(TOOL_INFO, {})
            expect(tf.get("name") == [tname] and tf.get("api_version") == [version], "tool info form %s", tf)
            s = await x.result("get", ep, schema_request(tname, version, mhash), q(API, "schema"))
            expect(s.get("media-type") == "application/schema+json", "schema media-type %r", s.get("media-type"))
            mh = s.find("%s/%s" % (q(API, "manifest-hash"), q(HASHES, "hash")))
            sh = s.find("%s/%s" % (q(API, "schema-hash"), q(HASHES, "hash")))
            expect(mh is not None and mh.text == mhash, "schema manifest-hash differs")
            raw = (s.find(q(API, "json")).text or "").encode("utf-8")
            expect(sh is not None and sha256_b64(raw) == sh.text, "schema bytes do not hash to schema-hash")
            expect(tf.get("input_schema_hash_value") == [sh.text], "tool info input hash %s != schema hash %s",
                   tf.get("input_schema_hash_value"), sh.text)
            expect(json.loads(raw) == tools[tname]["inputSchema"], "schema of %s differs from the manifest's", tname)
            hashes[tname] = sh.text
        emit("schemas", endpoint=ep, input_schema_hashes=hashes)

    with check("schema-stale-hash"):
        stale = sha256_b64(b"not the manifest")
        tname = sorted(tools)[0]
        await x.error("get", ep, schema_request(tname, version, stale), "conflict")
        emit("schema-stale-hash", endpoint=ep, tool=tname, condition="conflict")


async def search(x, nick, want):
    with check("search-form"):
        p = await x.result("get", x.args.gateway, el(SEARCH, "query"), q(SEARCH, "query"))
        form = p.find(q(DATA, "x"))
        expect(form is not None and form.get("type") == "form", "search reply has no form")
        fields = form_fields(form)
        expect(fields.get("FORM_TYPE") == [SEARCH] and "nick" in fields, "search form fields %s", sorted(fields))
        expect(p.find(q(SEARCH, "nick")) is not None, "search form lacks the legacy nick field")
        emit("search-form", fields=sorted(fields))
    with check("search-form-submit"):
        qe = el(SEARCH, "query")
        s = el(RSM, "set")
        s.append(el(RSM, "max", "50"))
        qe.append(s)
        xf = el(DATA, "x", type="submit")
        ft = el(DATA, "field", type="hidden", var="FORM_TYPE")
        ft.append(el(DATA, "value", SEARCH))
        nf = el(DATA, "field", var="nick")
        nf.append(el(DATA, "value", nick))
        xf.append(ft)
        xf.append(nf)
        qe.append(xf)
        p = await x.result("set", x.args.gateway, qe, q(SEARCH, "query"))
        res = p.find(q(DATA, "x"))
        expect(res is not None and res.get("type") == "result", "search result has no result form")
        expect({c.tag for c in res} <= {q(DATA, "reported"), q(DATA, "item")},
               "result form has other children: %s", [c.tag for c in res])
        rep = [f.get("var") for f in res.findall("%s/%s" % (q(DATA, "reported"), q(DATA, "field")))]
        expect("jid" in rep and "nick" in rep, "reported fields %s", rep)
        jids = [form_fields(i).get("jid", [""])[0] for i in res.findall(q(DATA, "item"))]
        expect(jids == want, "search %r found %s, want %s", nick, jids, want)
        rsm = rsm_of(p)
        expect(rsm.get("count") == str(len(want)), "search RSM count %r", rsm.get("count"))
        emit("search-form-submit", nick=nick, results=jids)
    with check("search-legacy"):
        qe = el(SEARCH, "query")
        qe.append(el(SEARCH, "nick", nick))
        p = await x.result("set", x.args.gateway, qe, q(SEARCH, "query"))
        jids = [i.get("jid") for i in p.findall(q(SEARCH, "item"))]
        if not jids:  # a gateway may answer a legacy query with a form
            res = p.find(q(DATA, "x"))
            jids = [] if res is None else [form_fields(i).get("jid", [""])[0] for i in res.findall(q(DATA, "item"))]
        expect(jids == want, "legacy search %r found %s, want %s", nick, jids, want)
        emit("search-legacy", nick=nick, results=jids)


async def hidden(x):
    """An existing but hidden endpoint must answer exactly like a missing one."""
    a = x.args
    probes = [
        ("disco-info", "get", lambda: disco_info()),
        ("disco-items", "get", lambda: disco_items()),
        ("tool-collection", "get", lambda: disco_items("%s#%s" % (TOOLS_NODE, a.version), 10)),
        ("tool-info", "get", lambda: disco_info("%s#%s#%s" % (TOOL, a.version, b64url("echo")))),
        ("manifest", "get", lambda: el(API, "manifest-request")),
        ("manifest-version", "get", lambda: el(API, "manifest-request", version=a.version)),
        ("schema", "get", lambda: schema_request("echo", a.version, a.hash)),
        ("vcard", "get", lambda: el("vcard-temp", "vCard")),
    ]
    for name, typ, mk in probes:
        with check("hidden-" + name):
            replies = []
            for to in (a.hidden, a.missing):
                r = await x.query(typ, to, mk(), iq_id="probe-" + name)
                expect(r.get("type") == "error", "%s to %s was answered: %s", name, to, ET.tostring(r)[:200])
                expect(error_condition(r) == "item-not-found", "%s to %s: %s", name, to, error_condition(r))
                r.attrib.pop("from", None)
                replies.append(ET.tostring(r, encoding="unicode"))
            expect(replies[0] == replies[1], "hidden and missing replies differ:\n%s\n%s", replies[0], replies[1])
            emit("hidden-" + name, reply=replies[0])
    with check("hidden-directory"):
        p = await x.result("get", a.gateway, disco_items(DIRECTORY, 50), q(DISCO_ITEMS, "query"))
        expect(not p.findall(q(DISCO_ITEMS, "item")), "directory lists endpoints to a remote principal")
        expect(rsm_of(p).get("count") in (None, "0"), "directory count %r", rsm_of(p).get("count"))
        emit("hidden-directory", items=0)
    with check("hidden-search"):
        qe = el(SEARCH, "query")
        qe.append(el(SEARCH, "nick", a.hidden.split("@")[0]))
        p = await x.result("set", a.gateway, qe, q(SEARCH, "query"))
        body = ET.tostring(p, encoding="unicode")
        expect(a.hidden not in body, "search reveals the hidden endpoint")
        emit("hidden-search", results=0)


async def scenario(x):
    a = x.args
    if a.mode == "hidden":
        await hidden(x)
        return
    expected = [e for e in a.endpoints.split(",") if e]
    await gateway_info(x)
    await directory(x, expected)
    for ep in octet_sorted(expected):
        await endpoint(x, ep)
    if a.search:
        await search(x, a.search, [j for j in a.search_expect.split(",") if j])


if __name__ == "__main__":
    run(scenario, extra_args)
