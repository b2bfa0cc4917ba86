// Package storetest opens fresh stores for the drivers' tests and
// conformance suites.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/internal/store"
)

// OpenTwo opens one fresh database with sets applied through two separate
// handles, as two processes (the gateway and an operator command) hold
// it. Both close when the test ends.
func OpenTwo(t *testing.T, sets ...store.Migrations) (first, second *store.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentgw.db")
	var dbs [2]*store.DB
	for i := range dbs {
		db, err := store.Open(context.Background(), path, sets...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs[0], dbs[1]
}
