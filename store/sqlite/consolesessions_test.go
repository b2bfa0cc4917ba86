package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/console/sessiondb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestConsoleSessionsConformance(t *testing.T) {
	t.Parallel()
	storetest.ExerciseConsoleSessions(t, func(t *testing.T) (sessiondb.Driver, func() sessiondb.Driver) {
		path := filepath.Join(t.TempDir(), "s.db")
		open := func() sessiondb.Driver {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return sqlite.NewConsoleSessions(db)
		}
		return open(), open
	})
}

func TestConsoleSessionsMemoryConformance(t *testing.T) {
	t.Parallel()
	storetest.ExerciseConsoleSessions(t, func(t *testing.T) (sessiondb.Driver, func() sessiondb.Driver) {
		d := sessiondb.NewMemory()
		return d, func() sessiondb.Driver { return d }
	})
}
