package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentgw.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const valid = `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "X_SECRET"
local_domains = ["example.test"]
admins = ["admin@example.test"]

[[agents]]
jid = "weather@agents.example.test"
manifest = "weather.json"

[[agents]]
jid = "everything@agents.example.test"
[agents.mcp]
command = ["npx", "server-everything"]

[[agents]]
jid = "im@agents.example.test"
[agents.connector]
base_url = "http://127.0.0.1:19090"
api_key_env = "IM_KEY"
`

func TestLoadValidAppliesDefaults(t *testing.T) {
	c, err := Load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Path != "agentgw.db" || c.Tasks.ReplaySeconds != 86400 || c.XMPP.IQTimeoutSeconds != 30 || c.Log.Format != "text" {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if got := c.Path("weather.json"); got != filepath.Join(c.Dir, "weather.json") {
		t.Fatalf("relative path = %s", got)
	}
}

func TestLoadReportsEveryProblemClearly(t *testing.T) {
	bad := `
[xmpp]
component_domain = "user@agents.example.test"
secret_env = "A"
secret_file = "b"
typo_key = 1

[[agents]]
jid = "not a jid"

[[agents]]
jid = "x@elsewhere.test"
manifest = "x.json"
[agents.mcp]
url = "ftp://x"
max_sessions = 65
`
	_, err := Load(write(t, bad))
	if err == nil {
		t.Fatal("bad config accepted")
	}
	// Unknown keys are reported before validation.
	if !strings.Contains(err.Error(), "unknown keys: xmpp.typo_key") {
		t.Fatalf("unknown key not named: %v", err)
	}
	_, err = Load(write(t, strings.Replace(bad, "typo_key = 1\n", "", 1)))
	for _, want := range []string{
		"component_domain \"user@agents.example.test\" is not a bare domain",
		"server is required",
		"exactly one of secret_env or secret_file",
		"jid \"not a jid\" is not a bare JID",
		"is not below component_domain",
		"url must be an http or https URL",
		"[agents.mcp] max_sessions must be between 1 and 64",
		"set exactly one backend: manifest, [agents.mcp], [agents.connector], [agents.oan], [agents.acc] or [agents.a2a]",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestReadSecretNeverShowsTheValue(t *testing.T) {
	t.Setenv("X_SECRET", "")
	if _, err := ReadSecret("X_SECRET", ""); err == nil || !strings.Contains(err.Error(), "X_SECRET") {
		t.Fatalf("empty env: %v", err)
	}
	p := filepath.Join(t.TempDir(), "s")
	os.WriteFile(p, []byte("hunter2-secret\n"), 0o600)
	v, err := ReadSecret("", p)
	if err != nil || v != "hunter2-secret" {
		t.Fatalf("file secret = %q, %v", v, err)
	}
	if _, err := ReadSecret("", p+".missing"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("missing file: %v", err)
	}
}

// Remote rates stay at the top of [federation]; local principals' rates
// live in [federation.local] under the same key names.
func TestFederationRemoteAndLocalRates(t *testing.T) {
	c, err := Load(write(t, valid+`
[federation]
input_burst = 40
domain_multiplier = 3

[federation.local]
input_per_second = 900
input_burst = 9000
`))
	if err != nil {
		t.Fatal(err)
	}
	f := c.Federation
	if f.InputBurst != 40 || f.DomainMultiplier != 3 || f.Local.InputPerSecond != 900 || f.Local.InputBurst != 9000 || f.Local.InvokeBurst != 0 {
		t.Fatalf("federation rates decoded as %+v", f)
	}
	if _, err := Load(write(t, valid+"\n[federation.local]\ninput_brust = 1\n")); err == nil || !strings.Contains(err.Error(), "federation.local.input_brust") {
		t.Fatalf("misspelt local key: %v", err)
	}
}

// TestPrincipalListsRefuseBadEntries: an entry of visible_to, invocable_by
// or a [policy] list that is not a principal stops the config, naming the
// agent (or policy entry) and the entry. Dropping it instead would empty a
// restriction list, and an empty list means "all local principals".
func TestPrincipalListsRefuseBadEntries(t *testing.T) {
	const agent = `
[[agents]]
jid = "secret@agents.example.test"
manifest = "secret.json"
`
	bad := []struct{ name, entry, why string }{
		{"trailing space", "ops@example.test ", "disallowed rune U+0020"},
		{"wildcard", "*.example.test", "wildcards are not supported"},
		{"resource", "ops@example.test/phone", "has a resource part"},
		{"empty", "", "is not a bare JID or a domain"},
		{"no localpart", "@example.test", "is not a bare JID or a domain"},
	}
	for _, b := range bad {
		for _, shape := range []struct{ name, toml, want string }{
			{"visible_to", agent + "visible_to = [\"alice@example.test\", %q]\n",
				`[[agents]] #4 (jid "secret@agents.example.test"): visible_to entry %q`},
			{"invocable_by", agent + "invocable_by = [%q]\n",
				`[[agents]] #4 (jid "secret@agents.example.test"): invocable_by entry %q`},
			{"permissions", "[policy.permissions]\n\"payments.write\" = [%q]\n",
				`[policy.permissions] "payments.write": entry %q`},
			{"approvals", "[[policy.approvals]]\nendpoint = \"secret@agents.example.test\"\ntool = \"pay\"\nprincipals = [%q]\n",
				`[[policy.approvals]] #1 (endpoint "secret@agents.example.test"): principals entry %q`},
		} {
			t.Run(shape.name+"/"+b.name, func(t *testing.T) {
				_, err := Load(write(t, valid+fmt.Sprintf(shape.toml, b.entry)))
				want := fmt.Sprintf(shape.want, b.entry)
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), b.why) {
					t.Fatalf("error = %v\nwant it to contain %q and %q", err, want, b.why)
				}
			})
		}
	}
	for _, c := range []struct{ name, toml, want string }{
		{"admin domain", strings.Replace(valid, `admins = ["admin@example.test"]`, `admins = ["example.test"]`, 1),
			`[xmpp] admins entry "example.test" is not a bare JID localpart@domain`},
		{"approval endpoint", valid + "[[policy.approvals]]\nendpoint = \"agents.example.test\"\ntool = \"pay\"\nprincipals = [\"alice@example.test\"]\n",
			`[[policy.approvals]] #1: endpoint "agents.example.test" is not a bare JID localpart@domain`},
		{"approval tool", valid + "[[policy.approvals]]\nendpoint = \"secret@agents.example.test\"\nprincipals = [\"alice@example.test\"]\n",
			`[[policy.approvals]] #1: tool is required`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(write(t, c.toml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
	// Well-formed entries in any letter case are accepted and normalize.
	c, err := Load(write(t, valid+agent+"visible_to = [\"Alice@Example.TEST\", \"Example.TEST\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePrincipals(c.Agents[3].VisibleTo)
	if err != nil || strings.Join(got, " ") != "alice@example.test example.test" {
		t.Fatalf("normalized = %q, %v", got, err)
	}
}

func TestA2AAgentURL(t *testing.T) {
	base := "[xmpp]\nserver = \"127.0.0.1:5347\"\ncomponent_domain = \"agents.example.test\"\nsecret_env = \"S\"\n[[agents]]\njid = \"remote@agents.example.test\"\n[agents.a2a]\n"
	for u, ok := range map[string]bool{
		"http://127.0.0.1:9/.well-known/agent-card.json": true,
		"https://a.example/.well-known/agent-card.json":  true,
		"ftp://a.example/card":                           false,
		"https://user:pw@a.example/card":                 false,
		"/relative/card":                                 false,
	} {
		_, err := Load(write(t, base+"url = \""+u+"\"\n"))
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "[agents.a2a] url must be")) {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestStoreDriverAndCluster(t *testing.T) {
	base := `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "S"
`
	c, err := Load(write(t, base))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if c.Store.Driver != DriverSQLite || c.Cluster.Instance == "" || (instanceName.MatchString(host) && c.Cluster.Instance != host) {
		t.Fatalf("defaults: driver %q instance %q (host %q)", c.Store.Driver, c.Cluster.Instance, host)
	}
	c, err = Load(write(t, base+`
[store]
driver = "postgres"
dsn_env = "AGENTGW_DATABASE_URL"
[cluster]
instance = "gw-2"
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Driver != DriverPostgres || c.Cluster.Instance != "gw-2" {
		t.Fatalf("postgres: %+v %+v", c.Store, c.Cluster)
	}
	if got := c.SecretEnvNames(); !slices.Contains(got, "AGENTGW_DATABASE_URL") {
		t.Errorf("dsn_env is not a secret variable: %v", got)
	}
	t.Setenv("AGENTGW_DATABASE_URL", "postgresql://agentgw:pw@db/agentgw")
	if dsn, err := c.StoreDSN(); err != nil || dsn != "postgresql://agentgw:pw@db/agentgw" {
		t.Errorf("StoreDSN = %q, %v", dsn, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "dsn"), []byte("postgresql://agentgw:filepw@db/agentgw\n"), 0o600)
	c.Store.DSNEnv, c.Store.DSNFile, c.Dir = "", "dsn", dir
	if dsn, err := c.StoreDSN(); err != nil || dsn != "postgresql://agentgw:filepw@db/agentgw" {
		t.Errorf("StoreDSN from a file = %q, %v", dsn, err)
	}
	c.Store.DSNFile = "missing"
	if _, err := c.StoreDSN(); err == nil || !strings.Contains(err.Error(), "[store]") {
		t.Errorf("missing DSN file: %v", err)
	}
	for name, tc := range map[string]struct{ extra, want string }{
		"unknown driver":      {"[store]\ndriver = \"mysql\"\n", `driver "mysql"`},
		"postgres without":    {"[store]\ndriver = \"postgres\"\n", "exactly one of dsn_env or dsn_file"},
		"postgres with both":  {"[store]\ndriver = \"postgres\"\ndsn_env = \"A\"\ndsn_file = \"b\"\n", "exactly one of dsn_env or dsn_file"},
		"dsn on sqlite":       {"[store]\ndsn_env = \"A\"\n", "apply to driver = \"postgres\""},
		"bad instance":        {"[cluster]\ninstance = \"gw 1\"\n", "[cluster] instance \"gw 1\""},
		"long instance":       {"[cluster]\ninstance = \"" + strings.Repeat("a", 65) + "\"\n", "[cluster] instance"},
		"unknown cluster key": {"[cluster]\nname = \"x\"\n", "cluster.name"},
	} {
		_, err := Load(write(t, base+tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
}
