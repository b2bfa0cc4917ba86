package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/directory/presencedb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestPresenceConformance(t *testing.T) {
	t.Parallel()
	storetest.ExercisePresence(t, func(t *testing.T) (presencedb.Driver, func() presencedb.Driver) {
		path := filepath.Join(t.TempDir(), "p.db")
		open := func() presencedb.Driver {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return sqlite.NewPresence(db)
		}
		return open(), open
	})
}
