package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/testkit/pgharness"
)

// TestDoctorCluster: doctor lists the instances sharing the database with
// their leases, the connection leases, and checks LISTEN/NOTIFY.
func TestDoctorCluster(t *testing.T) {
	srv := pgharness.Start(t)
	dsn := srv.NewDatabase(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	path := filepath.Join(t.TempDir(), "agentgw.toml")
	os.WriteFile(path, []byte(fmt.Sprintf(`[xmpp]
component_domain = "agents.example.test"
server = %q
secret_env = "AGENTGW_DOCTOR_CL_SECRET"
[store]
driver = "postgres"
dsn_env = "AGENTGW_DOCTOR_CL_DSN"
[cluster]
instance = "gw-a"
`, ln.Addr().String())), 0o600)
	t.Setenv("AGENTGW_DOCTOR_CL_SECRET", "s")
	t.Setenv("AGENTGW_DOCTOR_CL_DSN", dsn)

	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := gateway.OpenStores(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cl := st.Tasks.(taskdb.Cluster)
	cl.Join(ctx, "gw-a", time.Minute)
	cl.Join(ctx, "gw-old", time.Millisecond)
	bus, err := st.OpenCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	bus.Acquire(ctx, "connector:im@agents.example.test", "gw-a", time.Minute)
	time.Sleep(10 * time.Millisecond)

	var out, errb bytes.Buffer
	run(ctx, []string{"doctor", "--timeout", "5s", "--config", path}, &out, &errb)
	got := out.String()
	t.Log(got)
	for _, want := range []string{
		"ok   cluster: 2 instances known, 1 live; this config is instance gw-a",
		"ok   instance gw-a (this config): live, lease until ",
		"ok   instance gw-old: not running (lease expired ",
		"ok   cluster notifications: LISTEN/NOTIFY round trip works",
		"ok   lease connector:im@agents.example.test: held by gw-a (live, until ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
}
