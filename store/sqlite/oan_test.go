package sqlite_test

import (
	"testing"

	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestOANConformance(t *testing.T) {
	storetest.ExerciseOAN(t, func(t *testing.T) (oandb.Driver, oandb.Driver) {
		a, b := storetest.OpenTwo(t)
		return sqlite.NewOAN(a), sqlite.NewOAN(b)
	})
}
