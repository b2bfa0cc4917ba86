package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestSelfRegConformance(t *testing.T) {
	storetest.ExerciseSelfReg(t, func(t *testing.T) (selfregdb.Driver, func() selfregdb.Driver) {
		path := filepath.Join(t.TempDir(), "s.db")
		open := func() selfregdb.Driver {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return sqlite.NewSelfReg(db)
		}
		return open(), open
	})
}
