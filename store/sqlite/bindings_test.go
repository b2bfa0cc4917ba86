package sqlite_test

import (
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestBindingsConformance(t *testing.T) {
	storetest.ExerciseBindings(t, func(t *testing.T) (bindingdb.Driver, bindingdb.Driver) {
		a, b := storetest.OpenTwo(t)
		return sqlite.NewBindings(a), sqlite.NewBindings(b)
	})
}
