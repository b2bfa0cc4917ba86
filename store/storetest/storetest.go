// Package storetest is the conformance suite of the store drivers: one
// file per feature (tasks.go, directory.go, grants.go, bindings.go,
// chats.go, acc.go, oan.go, selfreg.go), each an Exercise function that
// both store/sqlite and store/pg run against their driver, plus OpenTwo,
// which opens one fresh SQLite database through two handles.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/store/sqlite"
)

// OpenTwo opens one fresh SQLite database through two separate handles,
// as two processes (the gateway and an operator command) hold it. Both
// close when the test ends.
func OpenTwo(t *testing.T) (first, second *sqlite.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentgw.db")
	var dbs [2]*sqlite.DB
	for i := range dbs {
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs[0], dbs[1]
}
