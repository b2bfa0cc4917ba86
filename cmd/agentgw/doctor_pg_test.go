package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/testkit/pgharness"
)

// TestDoctorPostgres: with [store] driver = "postgres" doctor names the
// driver, connects, migrates and checks writes; a refused database or an
// unset DSN variable fail with advice, and no line shows the password.
func TestDoctorPostgres(t *testing.T) {
	pg := pgharness.Start(t)
	dsn := pg.NewDatabase(t)
	const pw = "doctor-pg-Pa55word"
	withPW := strings.Replace(dsn, "agentgw@", "agentgw:"+pw+"@", 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // no XMPP server: only the store lines matter
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgw.toml")
	cfg := fmt.Sprintf(`[xmpp]
component_domain = "agents.example.test"
server = %q
secret_env = "AGENTGW_DOCTOR_PG_SECRET"
[store]
driver = "postgres"
dsn_env = "AGENTGW_DOCTOR_PG_DSN"
[cluster]
instance = "gw-doctor"
`, ln.Addr().String())
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTGW_DOCTOR_PG_SECRET", "some-component-secret")
	doctor := func() string {
		var out, errb bytes.Buffer
		run(context.Background(), []string{"doctor", "--timeout", "5s", "--config", path}, &out, &errb)
		t.Logf("%s%s", out.String(), errb.String())
		if strings.Contains(out.String()+errb.String(), pw) {
			t.Errorf("doctor printed the DSN password")
		}
		return out.String()
	}
	storeLine := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " store: ") {
				return l
			}
		}
		return ""
	}

	t.Setenv("AGENTGW_DOCTOR_PG_DSN", withPW)
	want := regexp.MustCompile(`^ok   store: postgres ` + regexp.QuoteMeta(pg.Addr+"/"+dbName(dsn)) + ` answers, takes writes, [1-9][0-9]* migrations applied \(instance gw-doctor\)$`)
	if got := storeLine(doctor()); !want.MatchString(got) {
		t.Errorf("store line\n got: %s\nwant: %s", got, want)
	}

	t.Setenv("AGENTGW_DOCTOR_PG_DSN", strings.Replace(withPW, dbName(dsn), "no_such_db", 1))
	if got := storeLine(doctor()); !strings.HasPrefix(got, "FAIL store: ") || !strings.Contains(got, "no_such_db") || !strings.Contains(got, "pg_hba.conf") {
		t.Errorf("missing database: %s", got)
	}

	t.Setenv("AGENTGW_DOCTOR_PG_DSN", "")
	if got := storeLine(doctor()); got != "FAIL store: [store] DSN: environment variable AGENTGW_DOCTOR_PG_DSN is not set or empty — set it to the database's libpq URL (postgresql://user:password@host:5432/database)" {
		t.Errorf("unset DSN: %s", got)
	}
}

// dbName is the database of a harness URL.
func dbName(dsn string) string {
	s := dsn[strings.LastIndex(dsn, "/")+1:]
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i]
	}
	return s
}
