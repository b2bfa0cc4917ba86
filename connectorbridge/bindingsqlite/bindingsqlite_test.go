package bindingsqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/bindingdbtest"
	"github.com/agentgw/agentgw/internal/store"
)

func TestConformance(t *testing.T) {
	bindingdbtest.Exercise(t, func(t *testing.T) (bindingdb.Driver, bindingdb.Driver) {
		path := filepath.Join(t.TempDir(), "gw.db")
		var handles [2]bindingdb.Driver
		for i := range handles {
			db, err := store.Open(context.Background(), path, Migrations)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			handles[i] = New(db)
		}
		return handles[0], handles[1]
	})
}
