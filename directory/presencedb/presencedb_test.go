package presencedb_test

import (
	"testing"

	"github.com/agentgw/agentgw/directory/presencedb"
	"github.com/agentgw/agentgw/store/storetest"
)

// Memory passes the conformance suite, within one process.
func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	storetest.ExercisePresence(t, func(t *testing.T) (presencedb.Driver, func() presencedb.Driver) {
		m := presencedb.NewMemory()
		return m, func() presencedb.Driver { return m }
	})
}
