package sqlite_test

import (
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/store/storetest"
)

func TestChatsConformance(t *testing.T) {
	storetest.ExerciseChats(t, func(t *testing.T) (chatdb.Driver, chatdb.Driver) {
		a, b := storetest.OpenTwo(t)
		return sqlite.NewChats(a), sqlite.NewChats(b)
	})
}
