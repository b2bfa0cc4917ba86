package bindingsqlite

import (
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/bindingdbtest"
	"github.com/agentgw/agentgw/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	bindingdbtest.Exercise(t, func(t *testing.T) (bindingdb.Driver, bindingdb.Driver) {
		a, b := storetest.OpenTwo(t, Migrations)
		return New(a), New(b)
	})
}
