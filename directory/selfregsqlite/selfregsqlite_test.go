package selfregsqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/directory/selfregdbtest"
	"github.com/agentgw/agentgw/directory/selfregsqlite"
	"github.com/agentgw/agentgw/internal/store"
)

func TestConformance(t *testing.T) {
	selfregdbtest.Run(t, func(t *testing.T) (selfregdb.Driver, func() selfregdb.Driver) {
		path := filepath.Join(t.TempDir(), "s.db")
		open := func() selfregdb.Driver {
			db, err := store.Open(context.Background(), path, selfregsqlite.Migrations)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return selfregsqlite.New(db)
		}
		return open(), open
	})
}
