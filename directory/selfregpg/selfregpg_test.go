package selfregpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/directory/selfregdbtest"
	"github.com/agentgw/agentgw/directory/selfregpg"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestConformance(t *testing.T) {
	srv := pgharness.Start(t)
	selfregdbtest.Run(t, func(t *testing.T) (selfregdb.Driver, func() selfregdb.Driver) {
		dsn := srv.NewDatabase(t)
		open := func() selfregdb.Driver { return selfregpg.New(pgharness.Open(t, dsn, selfregpg.Migrations)) }
		return open(), open
	})
}

// A ban moves the change generation, which running gateways poll, as
// selfregsqlite's does.
func TestBanBumpsGeneration(t *testing.T) {
	db := pgharness.Start(t).Open(t, selfregpg.Migrations)
	ctx := context.Background()
	before, err := db.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := selfregpg.New(db).Ban(ctx, "bot@example.test", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if after, _ := db.Generation(ctx); after != before+1 {
		t.Fatalf("generation %d → %d, want one step", before, after)
	}
}
