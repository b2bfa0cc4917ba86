package sqlite_test

import (
	"testing"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestACCConformance(t *testing.T) {
	storetest.ExerciseACC(t, func(t *testing.T) (accdb.Driver, accdb.Driver) {
		a, b := storetest.OpenTwo(t)
		return sqlite.NewACC(a), sqlite.NewACC(b)
	})
}
