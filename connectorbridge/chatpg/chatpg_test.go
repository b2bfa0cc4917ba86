package chatpg

import (
	"context"
	"testing"

	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/connectorbridge/chatdbtest"
	"github.com/agentgw/agentgw/internal/pgstore"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func open(t *testing.T, dsn string) (*Store, *pgstore.DB) {
	t.Helper()
	db := pgharness.Open(t, dsn, Migrations)
	return New(db), db
}

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	chatdbtest.Exercise(t, func(t *testing.T) (chatdb.Driver, chatdb.Driver) {
		dsn := srv.NewDatabase(t)
		a, _ := open(t, dsn)
		b, _ := open(t, dsn)
		return a, b
	})
}

// The schema's CHECKs hold for a writer that skips the driver's checks
// (the same list as chatsqlite's table).
func TestStoreGuards(t *testing.T) {
	srv := pgharness.Start(t)
	_, db := open(t, srv.NewDatabase(t))
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
