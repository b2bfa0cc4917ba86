package pg_test

import (
	"os"
	"testing"

	"github.com/agentgw/agentgw/testkit/pgharness"
)

// The package's tests share one PostgreSQL server (a fresh database each)
// and run in parallel; Main stops the server at the end.
func TestMain(m *testing.M) { os.Exit(pgharness.Main(m)) }
