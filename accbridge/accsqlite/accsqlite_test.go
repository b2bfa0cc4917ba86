package accsqlite

import (
	"testing"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/accbridge/accdbtest"
	"github.com/agentgw/agentgw/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	accdbtest.Exercise(t, func(t *testing.T) (accdb.Driver, accdb.Driver) {
		a, b := storetest.OpenTwo(t, Migrations)
		return New(a), New(b)
	})
}
