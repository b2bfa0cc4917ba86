package oansqlite

import (
	"testing"

	"github.com/agentgw/agentgw/internal/store/storetest"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/oandbtest"
)

func TestConformance(t *testing.T) {
	oandbtest.Exercise(t, func(t *testing.T) (oandb.Driver, oandb.Driver) {
		a, b := storetest.OpenTwo(t, Migrations)
		return New(a), New(b)
	})
}
