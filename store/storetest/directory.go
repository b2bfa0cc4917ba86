// This file is the conformance suite of dirdb.Driver: every
// directory driver (store/sqlite now, a PostgreSQL driver later)
// runs Exercise from its tests and must pass it unchanged.

package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/directory/dirdb"
)

// Open returns two drivers on one fresh, empty, migrated store, as two
// processes (the gateway and `agentgw admin`) would hold them.
type OpenDirectory func(t *testing.T) (first, second dirdb.Driver)

// Exercise runs every check of the suite against drivers from open.
func ExerciseDirectory(t *testing.T, open OpenDirectory) {
	t.Run("Register", func(t *testing.T) { testRegister(t, open) })
	t.Run("ActivateDeactivate", func(t *testing.T) { testActivate(t, open) })
	t.Run("RemoveVersion", func(t *testing.T) { testRemoveVersion(t, open) })
	t.Run("RemoveEndpoint", func(t *testing.T) { testRemoveEndpoint(t, open) })
	t.Run("Load", func(t *testing.T) { testLoad(t, open) })
	t.Run("LoadMany", func(t *testing.T) { testLoadMany(t, open) })
	t.Run("OtherHandle", func(t *testing.T) { testDirOtherHandle(t, open) })
	t.Run("Canonical", func(t *testing.T) { testCanonical(t, open) })
}

const (
	dirEP  = "weather@agents.example"
	dirEP2 = "news@agents.example"
)

var dirCtx = context.Background()

// hash returns a distinct value of the stored hash shape (44 characters).
func hash(c byte) string { return strings.Repeat(string(c), 43) + "=" }

func dirGen(t *testing.T, d dirdb.Driver) int64 {
	t.Helper()
	g, err := d.Generation(dirCtx)
	if err != nil {
		t.Fatalf("Generation: %v", err)
	}
	return g
}

func register(t *testing.T, d dirdb.Driver, endpoint, version, h string) {
	t.Helper()
	if ins, err := d.Register(dirCtx, endpoint, version, h, []byte(endpoint+"/"+version)); err != nil || !ins {
		t.Fatalf("Register(%s, %s) = %v, %v", endpoint, version, ins, err)
	}
}

// versions renders an endpoint's versions as "version:hash-letter[*]"
// with * for the active one.
func versions(t *testing.T, d dirdb.Driver, endpoint string) []string {
	t.Helper()
	vs, err := d.Versions(dirCtx, endpoint)
	if err != nil {
		t.Fatalf("Versions(%s): %v", endpoint, err)
	}
	out := []string{}
	for _, v := range vs {
		if v.Endpoint != endpoint || v.Canonical != nil {
			t.Errorf("Versions row %+v: wrong endpoint or canonical bytes included", v)
		}
		s := v.Version + ":" + v.Hash[:1]
		if v.Active {
			s += "*"
		}
		out = append(out, s)
	}
	return out
}

func want(t *testing.T, got []string, w ...string) {
	t.Helper()
	if !slices.Equal(got, w) {
		t.Errorf("versions = %q, want %q", got, w)
	}
}

// moved checks that f moved the generation (or did not, for a no-op).
func moved(t *testing.T, d dirdb.Driver, change bool, what string, f func()) {
	t.Helper()
	g0 := dirGen(t, d)
	f()
	g1 := dirGen(t, d)
	if change && g1 <= g0 {
		t.Errorf("%s: generation %d -> %d, want it to grow", what, g0, g1)
	}
	if !change && g1 != g0 {
		t.Errorf("%s: generation %d -> %d, want it unchanged", what, g0, g1)
	}
}

func testRegister(t *testing.T, open OpenDirectory) {
	d, _ := open(t)
	want(t, versions(t, d, dirEP))
	moved(t, d, true, "register", func() { register(t, d, dirEP, "2", hash('A')) })
	moved(t, d, false, "identical register", func() {
		if ins, err := d.Register(dirCtx, dirEP, "2", hash('A'), []byte(dirEP+"/2")); err != nil || ins {
			t.Errorf("identical register = %v, %v; want false, nil", ins, err)
		}
	})
	moved(t, d, false, "conflicting register", func() {
		if _, err := d.Register(dirCtx, dirEP, "2", hash('B'), []byte("other")); !errors.Is(err, dirdb.ErrConflict) {
			t.Errorf("different content under a version: %v, want ErrConflict", err)
		}
	})
	register(t, d, dirEP, "1", hash('C'))
	register(t, d, dirEP, "10", hash('D'))
	register(t, d, dirEP2, "1", hash('E'))
	// Registration order, not version order; registration does not activate.
	want(t, versions(t, d, dirEP), "2:A", "1:C", "10:D")
	want(t, versions(t, d, dirEP2), "1:E")
	want(t, versions(t, d, "nobody@agents.example"))
}

func testActivate(t *testing.T, open OpenDirectory) {
	d, _ := open(t)
	register(t, d, dirEP, "1", hash('A'))
	register(t, d, dirEP, "2", hash('B'))
	moved(t, d, false, "refused activations", func() {
		if _, err := d.Activate(dirCtx, dirEP, "3", hash('A')); !errors.Is(err, dirdb.ErrNotFound) {
			t.Errorf("unknown version: %v, want ErrNotFound", err)
		}
		if _, err := d.Activate(dirCtx, dirEP2, "1", hash('A')); !errors.Is(err, dirdb.ErrNotFound) {
			t.Errorf("unknown endpoint: %v, want ErrNotFound", err)
		}
		if _, err := d.Activate(dirCtx, dirEP, "2", hash('A')); !errors.Is(err, dirdb.ErrHashMismatch) {
			t.Errorf("wrong hash: %v, want ErrHashMismatch", err)
		}
	})
	want(t, versions(t, d, dirEP), "1:A", "2:B")
	moved(t, d, true, "activate", func() {
		if ch, err := d.Activate(dirCtx, dirEP, "2", hash('B')); err != nil || !ch {
			t.Errorf("activate = %v, %v", ch, err)
		}
	})
	moved(t, d, false, "activate the active version", func() {
		if ch, err := d.Activate(dirCtx, dirEP, "2", hash('B')); err != nil || ch {
			t.Errorf("activate again = %v, %v; want false, nil", ch, err)
		}
	})
	// At most one active version: activating another moves the pointer.
	if ch, err := d.Activate(dirCtx, dirEP, "1", hash('A')); err != nil || !ch {
		t.Fatalf("switch = %v, %v", ch, err)
	}
	want(t, versions(t, d, dirEP), "1:A*", "2:B")
	if _, err := d.Deactivate(dirCtx, dirEP2); !errors.Is(err, dirdb.ErrNotFound) {
		t.Errorf("deactivate an unknown endpoint: %v, want ErrNotFound", err)
	}
	moved(t, d, true, "deactivate", func() {
		if ch, err := d.Deactivate(dirCtx, dirEP); err != nil || !ch {
			t.Errorf("deactivate = %v, %v", ch, err)
		}
	})
	moved(t, d, false, "deactivate again", func() {
		if ch, err := d.Deactivate(dirCtx, dirEP); err != nil || ch {
			t.Errorf("deactivate again = %v, %v; want false, nil", ch, err)
		}
	})
	want(t, versions(t, d, dirEP), "1:A", "2:B")
}

func testRemoveVersion(t *testing.T, open OpenDirectory) {
	d, _ := open(t)
	register(t, d, dirEP, "1", hash('A'))
	register(t, d, dirEP, "2", hash('B'))
	if _, err := d.Activate(dirCtx, dirEP, "2", hash('B')); err != nil {
		t.Fatal(err)
	}
	moved(t, d, false, "refused removals", func() {
		if err := d.RemoveVersion(dirCtx, dirEP, "2"); !errors.Is(err, dirdb.ErrActive) {
			t.Errorf("remove the active version: %v, want ErrActive", err)
		}
		if err := d.RemoveVersion(dirCtx, dirEP, "3"); !errors.Is(err, dirdb.ErrNotFound) {
			t.Errorf("remove an unknown version: %v, want ErrNotFound", err)
		}
	})
	moved(t, d, true, "remove", func() {
		if err := d.RemoveVersion(dirCtx, dirEP, "1"); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	want(t, versions(t, d, dirEP), "2:B*")
	if err := d.RemoveVersion(dirCtx, dirEP, "1"); !errors.Is(err, dirdb.ErrNotFound) {
		t.Errorf("remove twice: %v, want ErrNotFound", err)
	}
	// The tombstone is permanent: different content never, identical
	// content again.
	if _, err := d.Register(dirCtx, dirEP, "1", hash('C'), []byte("other")); !errors.Is(err, dirdb.ErrConflict) {
		t.Errorf("different content over a tombstone: %v, want ErrConflict", err)
	}
	register(t, d, dirEP, "1", hash('A'))
	want(t, versions(t, d, dirEP), "2:B*", "1:A")
	// And it survives a second removal of the same content.
	if err := d.RemoveVersion(dirCtx, dirEP, "1"); err != nil {
		t.Errorf("remove re-registered content: %v", err)
	}
	if _, err := d.Register(dirCtx, dirEP, "1", hash('C'), []byte("other")); !errors.Is(err, dirdb.ErrConflict) {
		t.Errorf("different content after a second removal: %v, want ErrConflict", err)
	}
}

func testRemoveEndpoint(t *testing.T, open OpenDirectory) {
	d, _ := open(t)
	register(t, d, dirEP, "1", hash('A'))
	register(t, d, dirEP, "2", hash('B'))
	register(t, d, dirEP2, "1", hash('C'))
	if _, err := d.Activate(dirCtx, dirEP, "1", hash('A')); err != nil {
		t.Fatal(err)
	}
	moved(t, d, false, "refused endpoint removals", func() {
		for _, expect := range [][]string{{"1"}, {"1", "2", "3"}, nil} {
			if err := d.RemoveEndpoint(dirCtx, dirEP, expect); !errors.Is(err, dirdb.ErrChanged) {
				t.Errorf("remove expecting %q: %v, want ErrChanged", expect, err)
			}
		}
		if err := d.RemoveEndpoint(dirCtx, "nobody@agents.example", nil); !errors.Is(err, dirdb.ErrNotFound) {
			t.Errorf("remove an unknown endpoint: %v, want ErrNotFound", err)
		}
	})
	want(t, versions(t, d, dirEP), "1:A*", "2:B")
	// The expected set is a set: its order does not matter. The active
	// version goes too.
	moved(t, d, true, "remove endpoint", func() {
		if err := d.RemoveEndpoint(dirCtx, dirEP, []string{"2", "1"}); err != nil {
			t.Errorf("remove endpoint: %v", err)
		}
	})
	want(t, versions(t, d, dirEP))
	want(t, versions(t, d, dirEP2), "1:C")
	if err := d.RemoveEndpoint(dirCtx, dirEP, nil); !errors.Is(err, dirdb.ErrNotFound) {
		t.Errorf("remove a removed endpoint: %v, want ErrNotFound", err)
	}
	if _, err := d.Register(dirCtx, dirEP, "2", hash('D'), []byte("other")); !errors.Is(err, dirdb.ErrConflict) {
		t.Errorf("different content over an endpoint tombstone: %v, want ErrConflict", err)
	}
	register(t, d, dirEP, "3", hash('E'))
	want(t, versions(t, d, dirEP), "3:E")
}

func testLoad(t *testing.T, open OpenDirectory) {
	d, _ := open(t)
	g0, rows, err := d.Load(dirCtx, func(string, string, string) bool { t.Error("need called on an empty store"); return true },
		func(dirdb.Version) error { t.Error("content called on an empty store"); return nil })
	if err != nil || len(rows) != 0 || g0 != dirGen(t, d) {
		t.Fatalf("empty load: gen %d rows %d %v", g0, len(rows), err)
	}
	register(t, d, dirEP, "1", hash('A'))
	register(t, d, dirEP, "2", hash('B'))
	register(t, d, dirEP2, "1", hash('C'))
	if _, err := d.Activate(dirCtx, dirEP, "2", hash('B')); err != nil {
		t.Fatal(err)
	}
	var needed, got []string
	g, rows, err := d.Load(dirCtx,
		func(e, v, h string) bool {
			needed = append(needed, e+"/"+v+":"+h[:1])
			return e == dirEP // only the first endpoint's content
		},
		func(v dirdb.Version) error {
			if string(v.Canonical) != v.Endpoint+"/"+v.Version {
				t.Errorf("content of %s/%s = %q", v.Endpoint, v.Version, v.Canonical)
			}
			got = append(got, v.Endpoint+"/"+v.Version)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if g != dirGen(t, d) {
		t.Errorf("Load generation %d, Generation %d", g, dirGen(t, d))
	}
	var listed []string
	for _, r := range rows {
		if r.Canonical != nil {
			t.Errorf("Load row %s/%s carries its canonical bytes", r.Endpoint, r.Version)
		}
		s := r.Endpoint + "/" + r.Version + ":" + r.Hash[:1]
		if r.Active {
			s += "*"
		}
		listed = append(listed, s)
	}
	slices.Sort(listed)
	slices.Sort(needed)
	slices.Sort(got)
	if w := []string{dirEP2 + "/1:C", dirEP + "/1:A", dirEP + "/2:B*"}; !slices.Equal(listed, w) {
		t.Errorf("Load rows %q, want %q", listed, w)
	}
	if w := []string{dirEP2 + "/1:C", dirEP + "/1:A", dirEP + "/2:B"}; !slices.Equal(needed, w) {
		t.Errorf("need asked for %q, want %q", needed, w)
	}
	if w := []string{dirEP + "/1", dirEP + "/2"}; !slices.Equal(got, w) {
		t.Errorf("content for %q, want %q", got, w)
	}
	// content's error ends Load with it.
	stop := errors.New("stop")
	if _, _, err := d.Load(dirCtx, func(string, string, string) bool { return true },
		func(dirdb.Version) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("content error: %v, want it returned", err)
	}
}

// testLoadMany loads enough missing versions that a driver may read them
// in one scan rather than one by one.
func testLoadMany(t *testing.T, open OpenDirectory) {
	d, _ := open(t)
	const n = 100
	for i := range n {
		register(t, d, fmt.Sprintf("e%03d@agents.example", i), "1", hash('A'))
	}
	seen := map[string]bool{}
	_, rows, err := d.Load(dirCtx, func(e, _, _ string) bool { return e != "e000@agents.example" },
		func(v dirdb.Version) error {
			if string(v.Canonical) != v.Endpoint+"/1" || seen[v.Endpoint] {
				t.Errorf("content %s = %q (seen before: %v)", v.Endpoint, v.Canonical, seen[v.Endpoint])
			}
			seen[v.Endpoint] = true
			return nil
		})
	if err != nil || len(rows) != n || len(seen) != n-1 || seen["e000@agents.example"] {
		t.Fatalf("rows %d, contents %d, err %v", len(rows), len(seen), err)
	}
}

func testDirOtherHandle(t *testing.T, open OpenDirectory) {
	gw, admin := open(t)
	g0 := dirGen(t, gw)
	register(t, admin, dirEP, "1", hash('A'))
	if _, err := admin.Activate(dirCtx, dirEP, "1", hash('A')); err != nil {
		t.Fatal(err)
	}
	if g := dirGen(t, gw); g <= g0 {
		t.Errorf("the other handle's change did not move the generation: %d -> %d", g0, g)
	}
	want(t, versions(t, gw, dirEP), "1:A*")
	// A writer that checked an older version set is refused.
	register(t, admin, dirEP, "2", hash('B'))
	if err := gw.RemoveEndpoint(dirCtx, dirEP, []string{"1"}); !errors.Is(err, dirdb.ErrChanged) {
		t.Errorf("remove with a stale version set: %v, want ErrChanged", err)
	}
}

// testCanonical checks the optional point read of one version's bytes,
// which the directory uses to load manifests on demand.
func testCanonical(t *testing.T, open OpenDirectory) {
	d, other := open(t)
	f, ok := d.(dirdb.Fetcher)
	if !ok {
		t.Skip("the driver keeps no point read; manifests stay resident")
	}
	register(t, d, dirEP, "1", hash('A'))
	register(t, d, dirEP, "2", hash('B'))
	c, err := f.Canonical(dirCtx, dirEP, "2")
	if err != nil || string(c) != dirEP+"/2" {
		t.Fatalf("Canonical(%s, 2) = %q, %v", dirEP, c, err)
	}
	if _, err := f.Canonical(dirCtx, dirEP, "3"); !errors.Is(err, dirdb.ErrNotFound) {
		t.Errorf("Canonical of an unregistered version: %v, want ErrNotFound", err)
	}
	if _, err := f.Canonical(dirCtx, dirEP2, "1"); !errors.Is(err, dirdb.ErrNotFound) {
		t.Errorf("Canonical of an unknown endpoint: %v, want ErrNotFound", err)
	}
	if err := d.RemoveVersion(dirCtx, dirEP, "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Canonical(dirCtx, dirEP, "1"); !errors.Is(err, dirdb.ErrNotFound) {
		t.Errorf("Canonical of a removed version: %v, want ErrNotFound", err)
	}
	if of, ok := other.(dirdb.Fetcher); ok {
		if c, err := of.Canonical(dirCtx, dirEP, "2"); err != nil || string(c) != dirEP+"/2" {
			t.Errorf("Canonical through the other handle = %q, %v", c, err)
		}
	}
}
