package lease

import (
	"os"
	"testing"

	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestMain stops the package's shared PostgreSQL and ejabberd (one of each
// for the package instead of one per test) when the tests end.
func TestMain(m *testing.M) {
	code := xmppharness.Main(m)
	pgharness.CloseShared()
	os.Exit(code)
}
