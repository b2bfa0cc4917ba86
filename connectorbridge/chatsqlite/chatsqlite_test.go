package chatsqlite

import (
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/connectorbridge/chatdbtest"
	"github.com/agentgw/agentgw/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	chatdbtest.Exercise(t, func(t *testing.T) (chatdb.Driver, chatdb.Driver) {
		a, b := storetest.OpenTwo(t, Migrations)
		return New(a), New(b)
	})
}
