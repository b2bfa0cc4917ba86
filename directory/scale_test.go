package directory

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/store/sqlite"
)

// seedEndpoints stores n active endpoints with tools tools each in one
// transaction, bypassing Register (one fsync per registration would make the
// setup slow, not the code under test).
func seedEndpoints(tb testing.TB, db *sqlite.DB, n, tools int) {
	tb.Helper()
	tx, err := db.Write.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	stmt, err := tx.Prepare(`INSERT INTO directory_versions (endpoint, version, hash, canonical, active) VALUES (?, ?, ?, ?, 1)`)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		m, err := ParseManifest(manifestWithTools(fmt.Sprintf("agent%05d@agents.example", i), "1.0.0", tools, 3))
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := stmt.Exec(m.Endpoint, m.Version, m.Hash, m.Canonical); err != nil {
			tb.Fatal(err)
		}
	}
	stmt.Close()
	if _, err := tx.Exec(`UPDATE change_generation SET generation = generation + 1`); err != nil {
		tb.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// domainPolicy is a realistic visibility func: one map lookup on the
// endpoint's domain.
func domainPolicy() func(string) bool {
	allowed := map[string]bool{"agents.example": true}
	return func(ep string) bool {
		_, d, _ := strings.Cut(ep, "@")
		return allowed[d]
	}
}

func BenchmarkList50Of10000(b *testing.B) {
	db := openDB(b)
	seedEndpoints(b, db, 10000, 1)
	r := newRegistry(b, db)
	visible := domainPolicy()
	for _, c := range []struct {
		name string
		q    PageQuery
	}{
		{"first", PageQuery{Max: 50, Index: -1}},
		{"after-middle", PageQuery{Max: 50, After: "agent05000@agents.example", Index: -1}},
		{"last", PageQuery{Max: 50, HasBefore: true, Index: -1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := r.List(visible, c.q)
				if len(p.Items) != 50 || p.Count != 10000 {
					b.Fatalf("page %d items, count %d", len(p.Items), p.Count)
				}
			}
		})
	}
	b.Run("search", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := r.Search(visible, "AGENT0", PageQuery{Max: 50, Index: -1})
			if len(p.Items) != 50 {
				b.Fatal(len(p.Items))
			}
		}
	})
}

func BenchmarkLoad10000(b *testing.B) {
	db := openDB(b)
	seedEndpoints(b, db, 10000, 3)
	b.ResetTimer()
	for b.Loop() {
		newRegistry(b, db)
	}
}

// TestMemory10000Endpoints loads 10,000 endpoints (3 tools each) and reports
// the heap and RSS growth; the target is under 100 MB.
func TestMemory10000Endpoints(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads 10,000 endpoints")
	}
	db := openDB(t)
	seedEndpoints(t, db, 10000, 3)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rssBefore := rssBytes()
	start := time.Now()
	r := newRegistry(t, db)
	loadTime := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	rssAfter := rssBytes()
	if p := r.List(nil, PageQuery{Index: -1}); p.Count != 10000 {
		t.Fatalf("count %d", p.Count)
	}
	var canon int
	if err := db.Read.QueryRow(`SELECT sum(length(canonical)) FROM directory_versions`).Scan(&canon); err != nil {
		t.Fatal(err)
	}
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("10000 endpoints (%.1f MB canonical): live heap +%.1f MB, heap in use +%.1f MB, RSS +%.1f MB (now %.1f MB), load %v",
		float64(canon)/1e6, float64(heap)/1e6, float64(int64(after.HeapInuse)-int64(before.HeapInuse))/1e6,
		float64(rssAfter-rssBefore)/1e6, float64(rssAfter)/1e6, loadTime)
	if heap > 100<<20 {
		t.Fatalf("heap grew %.1f MB for 10,000 endpoints; target < 100 MB", float64(heap)/1e6)
	}
	runtime.KeepAlive(r)
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkReload10000 is the cost of noticing one change (a generation
// bump) with 10,000 endpoints loaded: metadata reread, snapshot rebuilt,
// no manifest reparsed.
func BenchmarkReload10000(b *testing.B) {
	db := openDB(b)
	seedEndpoints(b, db, 10000, 1)
	r := newRegistry(b, db)
	ctx := b.Context()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if _, err := db.Write.Exec(`UPDATE change_generation SET generation = generation + 1`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if changed, err := r.refresh(ctx, nil); err != nil || !changed {
			b.Fatal(changed, err)
		}
	}
}
