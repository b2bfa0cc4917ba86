package directory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/store/sqlite"
)

func openDB(t testing.TB) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "agentgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newRegistry(t testing.TB, db *sqlite.DB) *Registry {
	t.Helper()
	r, err := NewRegistry(context.Background(), sqlite.NewDirectory(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func generation(t testing.TB, db *sqlite.DB) int64 {
	t.Helper()
	var g int64
	if err := db.Read.QueryRow(`SELECT generation FROM change_generation WHERE id = 1`).Scan(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

func countRows(t testing.TB, db *sqlite.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Read.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func register(t testing.TB, r *Registry, doc string) *Manifest {
	t.Helper()
	m, err := r.Register(context.Background(), []byte(doc))
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return m
}

type refs map[string]bool // "endpoint version" -> referenced

func (r refs) VersionReferenced(endpoint, version string) (bool, error) {
	return r[endpoint+" "+version], nil
}

func TestRejectedManifestsStoreNothing(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	r := newRegistry(t, db)
	ctx := context.Background()
	g0 := generation(t, db)
	for _, doc := range []string{
		`{"manifestSpecVersion":"0","manifestSpecVersion":"0","agent":{"jid":"a@b.example","name":"n","version":"1"},"tools":[]}`,
		minimal("a@b.example", "1", `,"title":"\ud800"`),
		withTool(`{"name":"t","inputSchema":{"type":"object","maximum":1e400}}`),
		withTool(`{"name":"t","inputSchema":{"type":"object","x":"` + strings.Repeat("x", 10<<20) + `"}}`),
		withTool(`{"name":"t","inputSchema":{"type":"object","x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}`),
		withTool(`{"name":"t","inputSchema":{"type":"object","properties":{"a":{"$ref":"https://evil.example/s.json"}}}}`),
		`{"manifestSpecVersion":"0","agent":{"jid":"a@b.example","name":"n","version":"1"},"tools":[],"extra":1}`,
		minimal("a@b.example", "1 0", ""),
		minimal("a@b.example", "1", `,"homepage":"http://b.example/"`),
	} {
		if _, err := r.Register(ctx, []byte(doc)); err == nil {
			t.Fatalf("accepted %.80s", doc)
		}
	}
	if n := countRows(t, db, "directory_versions"); n != 0 {
		t.Fatalf("%d versions stored", n)
	}
	if g := generation(t, db); g != g0 {
		t.Fatalf("generation moved %d -> %d", g0, g)
	}
	if r.Exists("a@b.example") || r.Exists("a@agents.example") {
		t.Fatal("rejected endpoint exists")
	}
}

func TestRegisterActivateLifecycle(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	r := newRegistry(t, db)
	ctx := context.Background()
	const ep = "weather@agents.example"
	var notified atomic.Int32
	r.OnChange(func() { notified.Add(1) })

	m1 := register(t, r, minimal(ep, "1", ""))
	g1 := generation(t, db)
	if !r.Exists(ep) {
		t.Fatal("registered endpoint does not exist")
	}
	if _, ok := r.Active(ep); ok {
		t.Fatal("registration activated")
	}
	if got, ok := r.Manifest(ep, "1"); !ok || got.Hash != m1.Hash {
		t.Fatal("Manifest lookup failed")
	}
	if n := notified.Load(); n != 1 {
		t.Fatalf("OnChange called %d times", n)
	}

	// Idempotent: same content with different formatting.
	again := register(t, r, " "+strings.ReplaceAll(minimal(ep, "1", ""), ",", " , "))
	if again.Hash != m1.Hash || generation(t, db) != g1 {
		t.Fatal("identical re-registration changed something")
	}
	// Different content, same version: conflict.
	if _, err := r.Register(ctx, []byte(minimal(ep, "1", `,"title":"other"`))); !errors.Is(err, ErrConflict) {
		t.Fatalf("different content: %v, want ErrConflict", err)
	}

	m2 := register(t, r, minimal(ep, "2", `,"title":"Two"`))
	if err := r.Activate(ctx, ep, "1", m2.Hash); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("wrong hash: %v", err)
	}
	if err := r.Activate(ctx, ep, "3", m2.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown version: %v", err)
	}
	if err := r.Activate(ctx, "nobody@agents.example", "1", m1.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown endpoint: %v", err)
	}
	if err := r.Activate(ctx, "not a jid@/x", "1", m1.Hash); !errors.Is(err, ErrBadEndpoint) {
		t.Fatalf("bad endpoint: %v", err)
	}
	if err := r.Activate(ctx, ep, "1", m1.Hash); err != nil {
		t.Fatal(err)
	}
	if a, ok := r.Active(ep); !ok || a.Version != "1" {
		t.Fatal("activation not visible")
	}
	g := generation(t, db)
	if err := r.Activate(ctx, ep, "1", m1.Hash); err != nil || generation(t, db) != g {
		t.Fatalf("re-activation: %v / generation moved", err)
	}
	// Switching: the pointer moves, one active at a time.
	if err := r.Activate(ctx, "WEATHER@agents.example", "2", m2.Hash); err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != "2" || len(st.Versions) != 2 || st.Versions[0].Version != "1" || st.Versions[0].Active || !st.Versions[0].Removable ||
		!st.Versions[1].Active || st.Versions[1].Removable || st.Versions[1].Hash != m2.Hash {
		t.Fatalf("status %+v", st)
	}
	if a, _ := r.Active(ep); a.Version != "2" {
		t.Fatal("switch not visible")
	}
	p := r.List(nil, PageQuery{})
	if p.Count != 1 || p.Items[0].JID != ep || p.Items[0].Name != "Two" {
		t.Fatalf("list %+v", p)
	}

	if err := r.Deactivate(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Active(ep); ok {
		t.Fatal("still active")
	}
	if !r.Exists(ep) {
		t.Fatal("deactivation removed the endpoint")
	}
	if p := r.List(nil, PageQuery{}); p.Count != 0 {
		t.Fatal("deactivated endpoint listed")
	}
	if err := r.Deactivate(ctx, ep); err != nil {
		t.Fatalf("idempotent deactivate: %v", err)
	}
	if err := r.Deactivate(ctx, "nobody@agents.example"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deactivate unknown: %v", err)
	}
	if _, err := r.Status(ctx, "nobody@agents.example"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("status unknown: %v", err)
	}
	if st, _ := r.Status(ctx, ep); st.Active != "" {
		t.Fatal("status shows an active version after deactivate")
	}

	// The store itself refuses mutation of an immutable version.
	if _, err := db.Write.Exec(`UPDATE directory_versions SET canonical = x'00' WHERE endpoint = ?`, ep); err == nil {
		t.Fatal("schema allowed changing a version's bytes")
	}
}

func TestRemovalAndTombstones(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	r := newRegistry(t, db)
	ctx := context.Background()
	const ep = "cal@agents.example"
	rc := refs{}
	var mu sync.Mutex
	r.SetReferenceChecker(refChecker{lockedRefs{rc, &mu}})

	m1 := register(t, r, minimal(ep, "1", ""))
	m2 := register(t, r, minimal(ep, "2", ""))
	if err := r.Activate(ctx, ep, "2", m2.Hash); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveVersion(ctx, ep, "2"); !errors.Is(err, ErrActive) {
		t.Fatalf("remove active: %v", err)
	}
	rc[ep+" 1"] = true
	if err := r.RemoveVersion(ctx, ep, "1"); !errors.Is(err, ErrReferenced) {
		t.Fatalf("remove referenced: %v", err)
	}
	if st, _ := r.Status(ctx, ep); st.Versions[0].Removable {
		t.Fatal("referenced version shown removable")
	}
	if err := r.RemoveEndpoint(ctx, ep); !errors.Is(err, ErrReferenced) {
		t.Fatalf("remove endpoint with a referenced version: %v", err)
	}
	if _, ok := r.Manifest(ep, "1"); !ok {
		t.Fatal("refused removal removed something")
	}
	delete(rc, ep+" 1")
	if err := r.RemoveVersion(ctx, ep, "9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove unknown: %v", err)
	}
	if err := r.RemoveVersion(ctx, ep, "1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Manifest(ep, "1"); ok {
		t.Fatal("removed version still served")
	}
	// Tombstone: different content under version 1 is a conflict forever,
	// identical content may be restored.
	if _, err := r.Register(ctx, []byte(minimal(ep, "1", `,"title":"new"`))); !errors.Is(err, ErrConflict) {
		t.Fatalf("different content over tombstone: %v", err)
	}
	if m := register(t, r, minimal(ep, "1", "")); m.Hash != m1.Hash {
		t.Fatal("restore changed the hash")
	}
	if _, ok := r.Manifest(ep, "1"); !ok {
		t.Fatal("restored version not served")
	}
	// Remove it again: the tombstone stays single and permanent.
	if err := r.RemoveVersion(ctx, ep, "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write.Exec(`DELETE FROM directory_tombstones`); err == nil {
		t.Fatal("schema allowed deleting tombstones")
	}

	// RemoveEndpoint removes the active version too.
	if err := r.RemoveEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if r.Exists(ep) {
		t.Fatal("endpoint exists after removal")
	}
	if p := r.List(nil, PageQuery{}); p.Count != 0 {
		t.Fatal("removed endpoint listed")
	}
	if err := r.RemoveEndpoint(ctx, ep); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove removed endpoint: %v", err)
	}
	if n := countRows(t, db, "directory_tombstones"); n != 2 {
		t.Fatalf("%d tombstones, want 2", n)
	}
	if _, err := r.Register(ctx, []byte(minimal(ep, "2", `,"title":"x"`))); !errors.Is(err, ErrConflict) {
		t.Fatalf("different content after endpoint removal: %v", err)
	}
	register(t, r, minimal(ep, "2", ""))
	register(t, r, minimal(ep, "3", ""))
	if st, err := r.Status(ctx, ep); err != nil || len(st.Versions) != 2 || st.Active != "" {
		t.Fatalf("status after restore: %+v %v", st, err)
	}

	// A second registry on the same file loads the same state.
	r2 := newRegistry(t, db)
	if !r2.Exists(ep) || r2.Generation() != r.Generation() {
		t.Fatal("reload differs")
	}
	if m, ok := r2.Manifest(ep, "2"); !ok || m.Hash != m2.Hash || string(m.Canonical) != string(m2.Canonical) {
		t.Fatal("reloaded manifest differs")
	}
}

type lockedRefs struct {
	r  refs
	mu *sync.Mutex
}

func (l lockedRefs) VersionReferenced(e, v string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.VersionReferenced(e, v)
}

type failingRefs struct{}

func (failingRefs) VersionReferenced(string, string) (bool, error) {
	return false, errors.New("tasks store down")
}

func TestReferenceCheckerFailureRefusesRemoval(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	r := newRegistry(t, db)
	register(t, r, minimal("x@agents.example", "1", ""))
	r.SetReferenceChecker(failingRefs{})
	if err := r.RemoveVersion(context.Background(), "x@agents.example", "1"); err == nil {
		t.Fatal("removal went ahead without a reference answer")
	}
	if !r.Exists("x@agents.example") {
		t.Fatal("removed")
	}
}

func TestWatchSeesOtherProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgw.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db1, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db1.Close()
	db2, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	gateway := newRegistry(t, db1)
	admin := newRegistry(t, db2)

	changed := make(chan struct{}, 16)
	gateway.OnChange(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	done := make(chan struct{})
	go func() { defer close(done); gateway.Watch(ctx, 250*time.Millisecond) }()

	const ep = "remote@agents.example"
	m, err := admin.Register(ctx, []byte(minimal(ep, "1", `,"title":"Remote"`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Activate(ctx, ep, "1", m.Hash); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The one-second contract rests on the 250 ms Watch interval; the wait
	// is generous so that a loaded CI machine's stall is not a failure, and
	// the latency seen is logged.
	deadline := time.After(10 * time.Second)
	for {
		if a, ok := gateway.Active(ep); ok && a.Hash == m.Hash {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("change not visible within 10 s")
		}
	}
	t.Logf("visible after %v", time.Since(start))
	if p := gateway.List(nil, PageQuery{}); p.Count != 1 || p.Items[0].Name != "Remote" {
		t.Fatalf("list %+v", p)
	}
	// A removal by the other process disappears as well.
	if err := admin.Deactivate(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if err := admin.RemoveEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	deadline = time.After(10 * time.Second)
	for gateway.Exists(ep) {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("removal not visible within 10 s")
		}
	}
	cancel()
	<-done
}

// pagingRegistry registers and activates n endpoints named e00@..., in
// scrambled order.
func pagingRegistry(t *testing.T, n int) *Registry {
	t.Helper()
	r := newRegistry(t, openDB(t))
	ctx := context.Background()
	for i := range n {
		j := (i * 7) % n
		ep := fmt.Sprintf("e%02d@agents.example", j)
		m := register(t, r, minimal(ep, "1", fmt.Sprintf(`,"title":"Agent %d"`, j)))
		if err := r.Activate(ctx, ep, "1", m.Hash); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func jids(p Page) string {
	s := make([]string, len(p.Items))
	for i, it := range p.Items {
		s[i] = strings.TrimSuffix(it.JID, "@agents.example")
	}
	return strings.Join(s, ",")
}

func TestPagingWalksOnce(t *testing.T) {
	t.Parallel()
	r := pagingRegistry(t, 5)
	var seen []string
	q := PageQuery{Max: 2, Index: -1}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		p := r.List(nil, q)
		if p.Count != 5 {
			t.Fatalf("count %d", p.Count)
		}
		if len(p.Items) == 0 {
			break
		}
		if p.FirstIndex != len(seen) || p.First != p.Items[0].JID || p.Last != p.Items[len(p.Items)-1].JID {
			t.Fatalf("page %+v after %d", p, len(seen))
		}
		for _, it := range p.Items {
			seen = append(seen, it.JID)
		}
		q.After = p.Last
	}
	if got := strings.Join(seen, " "); got != "e00@agents.example e01@agents.example e02@agents.example e03@agents.example e04@agents.example" {
		t.Fatalf("walk %s", got)
	}

	// Backwards from the end with <before/>.
	var back []string
	backItems := 0
	q = PageQuery{Max: 2, HasBefore: true, Index: -1}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("backward paging does not end")
		}
		p := r.List(nil, q)
		if len(p.Items) == 0 {
			break
		}
		if p.FirstIndex != 5-backItems-len(p.Items) {
			t.Fatalf("backward page %+v firstIndex", p)
		}
		backItems += len(p.Items)
		back = append([]string{jids(p)}, back...)
		q.Before = p.First
	}
	if got := strings.Join(back, ","); got != "e00,e01,e02,e03,e04" {
		t.Fatalf("backward pages %s", got)
	}

	cases := []struct {
		q     PageQuery
		items string
		first int
	}{
		{PageQuery{Max: 2, HasBefore: true, Index: -1}, "e03,e04", 3},
		{PageQuery{Max: 10, HasBefore: true, Index: -1}, "e00,e01,e02,e03,e04", 0},
		{PageQuery{Max: 2, Before: "e03@agents.example", HasBefore: true, Index: -1}, "e01,e02", 1},
		{PageQuery{Max: 2, Before: "e00@agents.example", HasBefore: true, Index: -1}, "", 0},
		{PageQuery{Max: 2, After: "e04@agents.example", Index: -1}, "", 5},
		{PageQuery{Max: 2, After: "e025@agents.example", Index: -1}, "e02,e03", 2}, // a cursor that never existed (sorts before e02@)
		{PageQuery{Max: 2, After: "a@agents.example", Index: -1}, "e00,e01", 0},
		{PageQuery{Max: 2, Index: 3}, "e03,e04", 3},
		{PageQuery{Max: 2, Index: 9}, "", 9},
		{PageQuery{Max: 0, Index: -1}, "e00,e01,e02,e03,e04", 0},
		{PageQuery{Max: 1000, Index: -1}, "e00,e01,e02,e03,e04", 0},
	}
	for _, c := range cases {
		p := r.List(nil, c.q)
		if jids(p) != c.items || p.Count != 5 || (len(p.Items) > 0 && p.FirstIndex != c.first) {
			t.Errorf("%+v: got %s first %d count %d, want %s first %d", c.q, jids(p), p.FirstIndex, p.Count, c.items, c.first)
		}
	}
}

func TestPagingVisibility(t *testing.T) {
	t.Parallel()
	r := pagingRegistry(t, 10)
	calls := 0
	even := func(ep string) bool {
		calls++
		return (ep[2]-'0')%2 == 0
	}
	p := r.List(even, PageQuery{Max: 2, Index: -1})
	if jids(p) != "e00,e02" || p.Count != 5 || p.FirstIndex != 0 {
		t.Fatalf("page %+v", p)
	}
	if calls != 10 {
		t.Fatalf("visible called %d times for 10 endpoints", calls)
	}
	p = r.List(even, PageQuery{Max: 2, After: "e02@agents.example", Index: -1})
	if jids(p) != "e04,e06" || p.Count != 5 || p.FirstIndex != 2 {
		t.Fatalf("page %+v", p)
	}
	// A cursor naming a hidden endpoint pages as if it were there.
	p = r.List(even, PageQuery{Max: 2, After: "e03@agents.example", Index: -1})
	if jids(p) != "e04,e06" || p.FirstIndex != 2 {
		t.Fatalf("page %+v", p)
	}
	p = r.List(even, PageQuery{Max: 3, HasBefore: true, Index: -1})
	if jids(p) != "e04,e06,e08" || p.FirstIndex != 2 {
		t.Fatalf("last page %+v", p)
	}
	none := r.List(func(string) bool { return false }, PageQuery{Index: -1})
	if none.Count != 0 || len(none.Items) != 0 || none.First != "" {
		t.Fatalf("hidden page %+v", none)
	}
	s := r.Search(even, "agent 1", PageQuery{Index: -1})
	if jids(s) != "" || s.Count != 0 {
		t.Fatalf("search across hidden %+v", s)
	}
	s = r.Search(even, "AGENT", PageQuery{Max: 2, Index: -1})
	if jids(s) != "e00,e02" || s.Count != 5 {
		t.Fatalf("search %+v", s)
	}
}

func TestSearchFolding(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, openDB(t))
	ctx := context.Background()
	for _, a := range []struct{ ep, name, title string }{
		{"weather@agents.example", "weather", "Weather Agent"},
		{"strasse@agents.example", "roads", "Straße Info"},
		{"zz@agents.example", "ΣΊΣΥΦΟΣ", ""},
		{"calendar@agents.example", "cal", "Calendar"},
	} {
		extra := ""
		if a.title != "" {
			extra = `,"title":"` + a.title + `"`
		}
		doc := strings.Replace(minimal(a.ep, "1", extra), `"name":"n"`, `"name":"`+a.name+`"`, 1)
		m := register(t, r, doc)
		if err := r.Activate(ctx, a.ep, "1", m.Hash); err != nil {
			t.Fatal(err)
		}
	}
	for nick, want := range map[string]string{
		"WEATHER": "weather",
		"weather": "weather",
		"Agent":   "weather",
		"STRASSE": "strasse", // localpart and the title "Straße" (ß folds to ss)
		"straße":  "strasse",
		"STRAẞE":  "strasse", // capital sharp s
		"roads":   "strasse",
		"σίσυφος": "zz", // final sigma folds like sigma
		"cal":     "calendar",
		"":        "calendar,strasse,weather,zz",
		"nomatch": "",
		"@agents": "", // the domain is not searched
	} {
		p := r.Search(nil, nick, PageQuery{Index: -1})
		got := make([]string, len(p.Items))
		for i, it := range p.Items {
			got[i] = strings.TrimSuffix(it.JID, "@agents.example")
		}
		if strings.Join(got, ",") != want || p.Count != len(got) {
			t.Errorf("search %q: %v (count %d), want %s", nick, got, p.Count, want)
		}
	}
}

func TestConcurrentReadersDuringWrites(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, openDB(t))
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := r.List(nil, PageQuery{Index: -1})
				if len(p.Items) > p.Count {
					t.Error("inconsistent page")
					return
				}
				r.Search(nil, "a", PageQuery{Index: -1})
				r.Active("e1@agents.example")
			}
		}()
	}
	for i := range 20 {
		ep := fmt.Sprintf("e%d@agents.example", i)
		m := register(t, r, minimal(ep, "1", ""))
		if err := r.Activate(ctx, ep, "1", m.Hash); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if p := r.List(nil, PageQuery{Index: -1}); p.Count != 20 {
		t.Fatalf("count %d", p.Count)
	}
}
