package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// Both drivers fill the IM queue, ACC, OAN and self-registration stores,
// and what one opening writes, another opening of the same store reads
// (a gateway and an operator command).
func TestOpenStoresFillsEveryDriver(t *testing.T) {
	ctx := context.Background()
	sqliteCfg := &config.Config{Dir: t.TempDir(), Store: config.Store{Path: "agentgw.db"}}
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) *config.Config
	}{
		{"sqlite", func(*testing.T) *config.Config { return sqliteCfg }},
		{"postgres", func(t *testing.T) *config.Config { return pgConfig(t, pgharness.Start(t).NewDatabase(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(t)
			a, err := OpenStores(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := OpenStores(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for _, s := range []*Store{a, b} {
				if s.Chats == nil || s.ACC == nil || s.OAN == nil || s.SelfReg == nil {
					t.Fatalf("%s store lacks a driver: %+v", tc.name, s)
				}
			}
			now := time.Now()
			if _, _, err := a.Chats.Enqueue(ctx, chatdb.Item{Endpoint: "im@a.test", Direction: chatdb.Inbound, MessageID: "m1",
				Payload: []byte("{}"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if st, ok, err := b.Chats.Lookup(ctx, "im@a.test", chatdb.Inbound, "m1"); err != nil || !ok || st != chatdb.Pending {
				t.Fatalf("chat through the other opening: %s %v %v", st, ok, err)
			}
			if err := a.ACC.Enroll(ctx, accdb.Connector{Name: "farm", ID: "id-1", CertSHA256: "00000000000000000000000000000000000000000000000000000000000000ff", CreatedAt: "2026-01-01T00:00:00Z"}); err != nil {
				t.Fatal(err)
			}
			if c, ok, err := b.ACC.Connector(ctx, "farm"); err != nil || !ok || c.ID != "id-1" {
				t.Fatalf("ACC through the other opening: %+v %v %v", c, ok, err)
			}
			if err := a.OAN.SetStatus(ctx, "g@a.test", oandb.StatusRevoked, "fp"); err != nil {
				t.Fatal(err)
			}
			if st, key, err := b.OAN.Status(ctx, "g@a.test"); err != nil || st != oandb.StatusRevoked || key != "fp" {
				t.Fatalf("OAN through the other opening: %s %s %v", st, key, err)
			}
			if err := a.SelfReg.Ban(ctx, "bot@a.test", "spam", now); err != nil {
				t.Fatal(err)
			}
			if banned, err := b.SelfReg.Banned(ctx, "bot@a.test"); err != nil || !banned {
				t.Fatalf("ban through the other opening: %v %v", banned, err)
			}
		})
	}
}
