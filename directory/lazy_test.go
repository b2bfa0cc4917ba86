package directory

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/directory/dirdb"
	"github.com/agentgw/agentgw/store/sqlite"
)

// residentOnly hides the driver's point read, so the Registry keeps every
// manifest in memory as it did before issue 23.
type residentOnly struct{ dirdb.Driver }

// TestManifestsOnDemand: over a store with a point read the index holds no
// parsed manifest; each one is read back on use, exactly as registered,
// and the cache stays within its bound while every endpoint is used.
func TestManifestsOnDemand(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	const bound, n = 64, 200 // a small bound keeps the test quick
	seedEndpoints(t, db, n, 2)
	r := newRegistry(t, db)
	if r.fetch == nil {
		t.Fatal("dirsqlite offers no point read")
	}
	r.cache = newManifestCache(bound)
	want := make([]*Manifest, n)
	for i := range n {
		m, err := ParseManifest(manifestWithTools(fmt.Sprintf("agent%05d@agents.example", i), "1.0.0", 2, 3))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = m
	}
	for ep, e := range r.snap.Load().endpoints {
		for _, v := range e.versions {
			if v.m != nil {
				t.Fatalf("%s/%s is resident in the index", ep, v.version)
			}
		}
	}
	for round := range 2 { // the second round reads evicted versions back
		for i := range n {
			ep, want := want[i].Endpoint, want[i]
			m, ok := r.Active(ep)
			if !ok {
				t.Fatalf("round %d: %s has no active manifest", round, ep)
			}
			if m.Hash != want.Hash || string(m.Canonical) != string(want.Canonical) || len(m.Tools) != 2 || m.Tools[1].Name != "tool.1" {
				t.Fatalf("round %d: %s loaded as %s with %d tools", round, ep, m.Hash, len(m.Tools))
			}
			if v, ok := r.Manifest(ep, "1.0.0"); !ok || v.Hash != want.Hash {
				t.Fatalf("round %d: Manifest(%s, 1.0.0) = %v", round, ep, ok)
			}
			if v, h, ok := r.ActiveVersion(ep); !ok || v != "1.0.0" || h != want.Hash {
				t.Fatalf("ActiveVersion(%s) = %q %q %v", ep, v, h, ok)
			}
		}
		if l := r.cache.ll.Len(); l != bound || len(r.cache.at) != l {
			t.Fatalf("cache holds %d (map %d), bound %d", l, len(r.cache.at), bound)
		}
	}
	if _, ok := r.Manifest("agent00000@agents.example", "2.0.0"); ok {
		t.Fatal("an unregistered version loaded")
	}
	if _, _, ok := r.ActiveVersion("nobody@agents.example"); ok {
		t.Fatal("ActiveVersion of an unknown endpoint")
	}
}

// TestOnDemandAfterRemoval: a version removed by another process between
// the snapshot and the read is missing, not an error.
func TestOnDemandAfterRemoval(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	r := newRegistry(t, db)
	const ep = "cal@agents.example"
	register(t, r, minimal(ep, "1", ""))
	register(t, r, minimal(ep, "2", ""))
	// A fresh Registry holds neither version parsed.
	r2 := newRegistry(t, db)
	if err := r.RemoveVersion(context.Background(), ep, "1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r2.Manifest(ep, "1"); ok {
		t.Fatal("a removed version loaded from a stale snapshot")
	}
	if m, ok := r2.Manifest(ep, "2"); !ok || m.Version != "2" {
		t.Fatal("version 2 does not load")
	}
}

// TestStoredMismatchLeftOut: rows whose bytes do not match their hash or
// key are left out of the index at load, with a point read or without.
func TestStoredMismatchLeftOut(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"on-demand", "resident"} {
		t.Run(mode, func(t *testing.T) {
			db := openDB(t)
			good, err := ParseManifest([]byte(minimal("good@agents.example", "1", "")))
			if err != nil {
				t.Fatal(err)
			}
			other, err := ParseManifest([]byte(minimal("other@agents.example", "1", "")))
			if err != nil {
				t.Fatal(err)
			}
			ins := func(ep, version, hash string, c []byte) {
				t.Helper()
				if _, err := db.Write.Exec(`INSERT INTO directory_versions (endpoint, version, hash, canonical, active) VALUES (?, ?, ?, ?, 1)`,
					ep, version, hash, c); err != nil {
					t.Fatal(err)
				}
			}
			ins(good.Endpoint, good.Version, good.Hash, good.Canonical)
			ins("badhash@agents.example", "1", strings.Repeat("A", 43)+"=", good.Canonical)
			ins("wrongkey@agents.example", "1", other.Hash, other.Canonical) // another endpoint's bytes
			ins(other.Endpoint, "9", other.Hash, other.Canonical)            // its bytes say version 1
			var d dirdb.Driver = sqlite.NewDirectory(db)
			if mode == "resident" {
				d = residentOnly{d}
			}
			r, err := NewRegistry(context.Background(), d, nil)
			if err != nil {
				t.Fatal(err)
			}
			if (r.fetch == nil) != (mode == "resident") {
				t.Fatalf("mode %s, fetcher %v", mode, r.fetch != nil)
			}
			if p := r.List(nil, PageQuery{Index: -1}); p.Count != 1 || p.Items[0].JID != good.Endpoint {
				t.Fatalf("listed %+v, want only %s", p.Items, good.Endpoint)
			}
			for _, ep := range []string{"badhash@agents.example", "wrongkey@agents.example", other.Endpoint} {
				if r.Exists(ep) {
					t.Errorf("%s is in the index", ep)
				}
			}
			m, ok := r.Active(good.Endpoint)
			if !ok || m.Hash != good.Hash {
				t.Fatal("the good version does not load")
			}
			if p := r.Search(nil, "GOOD", PageQuery{Index: -1}); p.Count != 1 {
				t.Fatalf("search by localpart found %d", p.Count)
			}
		})
	}
}

// TestStoredAgentPaths: the fast scan of a leading agent object and the
// token decoder agree, including strings holding braces, quotes and
// escapes, and a document whose first key is not "agent".
func TestStoredAgentPaths(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		minimal("a@agents.example", "1", `,"title":"Braces } { and \"quotes\" and \\ back"`),
		minimal("b@agents.example", "2", `,"title":"Stra\u00dfe ]]"`),
		minimal("c@agents.example", "3", ""),
	} {
		m, err := ParseManifest([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		row := dirdb.Version{Endpoint: m.Endpoint, Version: m.Version, Hash: m.Hash, Canonical: m.Canonical}
		name, title, err := storedAgent(row)
		if err != nil || name != m.Agent.Name || title != m.Agent.Title {
			t.Fatalf("storedAgent = %q %q %v; want %q %q", name, title, err, m.Agent.Name, m.Agent.Title)
		}
		if leadingAgent(m.Canonical) == nil {
			t.Fatal("canonical bytes do not begin with the agent object")
		}
		var a struct{ JID, Name, Title, Version string }
		if ok, err := agentByTokens(m.Canonical, &a); !ok || err != nil || a.Title != m.Agent.Title || a.JID != m.Endpoint {
			t.Fatalf("agentByTokens = %v %v %+v", ok, err, a)
		}
	}
	// Not led by "agent": the token path still finds it.
	doc := []byte(`{"aaa":[1,{"x":"}"}],"agent":{"jid":"d@agents.example","name":"d","version":"1"}}`)
	if leadingAgent(doc) != nil {
		t.Fatal("leadingAgent accepted a document led by another key")
	}
	var a struct{ JID, Name, Title, Version string }
	if ok, err := agentByTokens(doc, &a); !ok || err != nil || a.Name != "d" {
		t.Fatalf("agentByTokens = %v %v %+v", ok, err, a)
	}
	// Truncated bytes are refused, never half-read.
	if leadingAgent([]byte(`{"agent":{"jid":"x@y"`)) != nil {
		t.Fatal("a truncated agent object was accepted")
	}
}
