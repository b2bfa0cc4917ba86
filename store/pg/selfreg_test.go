package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/store/pg"
	"github.com/agentgw/agentgw/store/storetest"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

func TestSelfRegConformance(t *testing.T) {
	t.Parallel()
	srv := pgharness.Shared(t)
	storetest.ExerciseSelfReg(t, func(t *testing.T) (selfregdb.Driver, func() selfregdb.Driver) {
		dsn := srv.NewDatabase(t)
		open := func() selfregdb.Driver { return pg.NewSelfReg(pgharness.Open(t, dsn)) }
		return open(), open
	})
}

// A ban moves the change generation, which running gateways poll, as
// store/sqlite's does.
func TestBanBumpsGeneration(t *testing.T) {
	t.Parallel()
	db := pgharness.Shared(t).Open(t)
	ctx := context.Background()
	before, err := db.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.NewSelfReg(db).Ban(ctx, "bot@example.test", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if after, _ := db.Generation(ctx); after != before+1 {
		t.Fatalf("generation %d → %d, want one step", before, after)
	}
}
