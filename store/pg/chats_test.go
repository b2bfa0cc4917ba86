package pg_test

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func openChats(t *testing.T, dsn string) (*pg.Chats, *pg.DB) {
	t.Helper()
	db := pgharness.Open(t, dsn)
	return pg.NewChats(db), db
}

func TestChatsConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseChats(t, func(t *testing.T) (chatdb.Driver, chatdb.Driver) {
		dsn := srv.NewDatabase(t)
		a, _ := openChats(t, dsn)
		b, _ := openChats(t, dsn)
		return a, b
	})
}

// The schema's CHECKs hold for a writer that skips the driver's checks
// (the same list as store/sqlite's table).
func TestChatsStoreGuards(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	_, db := openChats(t, srv.NewDatabase(t))
	ctx := context.Background()
	ins := `INSERT INTO connector_chat_queue (endpoint, direction, message_id, payload, expires_at, created_at, state)
		VALUES ($1, $2, $3, $4, 0, 0, $5)`
	ok := []any{"im@agents.example", "in", "m1", []byte("{}"), "pending"}
	if _, err := db.Pool.Exec(ctx, ins, ok...); err != nil {
		t.Fatalf("a valid row was refused: %v", err)
	}
	for name, args := range map[string][]any{
		"unknown direction": {"im@agents.example", "up", "m2", []byte("{}"), "pending"},
		"unknown state":     {"im@agents.example", "in", "m3", []byte("{}"), "lost"},
		"empty message id":  {"im@agents.example", "in", "", []byte("{}"), "pending"},
		"oversize payload":  {"im@agents.example", "in", "m4", make([]byte, chatdb.MaxPayload+1), "pending"},
		"short endpoint":    {"im", "in", "m5", []byte("{}"), "pending"},
		"no payload":        {"im@agents.example", "in", "m6", nil, "pending"},
		"duplicate key":     ok,
	} {
		if _, err := db.Pool.Exec(ctx, ins, args...); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE connector_chat_queue SET attempts = -1`); err == nil {
		t.Error("negative attempts accepted")
	}
}
