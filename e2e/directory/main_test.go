package directory

import (
	"os"
	"testing"

	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// TestMain stops the package's shared ejabberd when the tests end.
func TestMain(m *testing.M) { os.Exit(xmppharness.Main(m)) }

// sharedEjabberd is the test's own tenant (virtual host, component domain
// and listener) of one ejabberd for the package: one node start instead of
// one per test.
func sharedEjabberd(t *testing.T) *xmppharness.Server {
	t.Helper()
	return xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{})
}
