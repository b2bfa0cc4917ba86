package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The operator commands that print data print JSON with --json, on a real
// SQLite store: what a grant, a registration and a ban wrote is what the
// JSON says.
func TestOperatorCommandsPrintJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("secret", "s3cret\n")
	write("weather.json", weatherManifest)
	write("agentgw.toml", `[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:1"
secret_file = "secret"
local_domains = ["example.test"]
self_register_domains = ["example.test"]

[store]
path = "agentgw.db"

[acc]
listen = "127.0.0.1:0"
`)
	cfg := filepath.Join(dir, "agentgw.toml")
	agentgw := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(args, "--config", cfg), &out, &errb); code != 0 {
			t.Fatalf("agentgw %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		return out.String()
	}
	decode := func(s string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(s), v); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, s)
		}
	}

	var grants []map[string]any
	decode(agentgw("trust", "list", "--json"), &grants)
	if len(grants) != 0 {
		t.Fatalf("grants before any: %v", grants)
	}
	agentgw("trust", "grant", "--visibility", "--invocation", "partner.example")
	agentgw("trust", "grant", "--visibility", "--endpoint", "weather@agents.example.test", "bot@other.example")
	decode(agentgw("trust", "list", "--json"), &grants)
	got := map[string]string{}
	for _, g := range grants {
		b, _ := json.Marshal(g["scope"])
		got[g["principal"].(string)+" "+stringOf(g["endpoint"])] = string(b)
		if g["since"] == "" {
			t.Errorf("grant without since: %v", g)
		}
	}
	want := map[string]string{"partner.example ": `["visibility","invocation"]`, "bot@other.example weather@agents.example.test": `["visibility"]`}
	if len(got) != len(want) {
		t.Fatalf("grants %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("grant %q: scope %s, want %s", k, got[k], v)
		}
	}

	agentgw("admin", "register", "--activate", filepath.Join(dir, "weather.json"))
	var st struct {
		Endpoint string `json:"endpoint"`
		Active   string `json:"active_version"`
		Versions []struct {
			Version string `json:"version"`
			Hash    string `json:"sha256"`
			Active  bool   `json:"active"`
		} `json:"versions"`
	}
	decode(agentgw("admin", "status", "weather@agents.example.test", "--json"), &st)
	if st.Endpoint != "weather@agents.example.test" || st.Active == "" || len(st.Versions) != 1 || !st.Versions[0].Active || st.Versions[0].Hash == "" || st.Versions[0].Version != st.Active {
		t.Errorf("admin status --json: %+v", st)
	}

	agentgw("admin", "ban", "--reason", "spam", "bot@example.test")
	var regs []map[string]any
	decode(agentgw("admin", "self-registered", "--json"), &regs)
	if len(regs) != 1 || regs[0]["endpoint"] != "bot@example.test" || regs[0]["banned"] != true || regs[0]["ban_reason"] != "spam" {
		t.Errorf("admin self-registered --json: %v", regs)
	}

	agentgw("acc", "init")
	agentgw("acc", "enroll", "--name", "farm", "--out", filepath.Join(dir, "farm"))
	agentgw("acc", "enroll", "--name", "barn", "--out", filepath.Join(dir, "barn"))
	agentgw("acc", "revoke", "barn")
	var conns []map[string]any
	decode(agentgw("acc", "list", "--json"), &conns)
	state := map[string]bool{}
	for _, c := range conns {
		state[c["name"].(string)] = c["revoked"].(bool)
		if c["connector_id"] == "" {
			t.Errorf("connector without id: %v", c)
		}
	}
	if len(state) != 2 || state["farm"] || !state["barn"] {
		t.Errorf("acc list --json: %v", conns)
	}
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// doctor --json prints the same checks as its lines, as one JSON array,
// and still exits 1 when one fails.
func TestDoctorJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "agentgw.toml")
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s3cret-doctor-json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "[xmpp]\ncomponent_domain = \"agents.example.test\"\nserver = \"" + closedPort(t) + "\"\nsecret_file = \"secret\"\n[store]\npath = \"agentgw.db\"\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--json", "--timeout", "1s", "--config", path}, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d, want 1 (the server is down)", code)
	}
	var checks []struct{ Status, Check, Message string }
	if err := json.Unmarshal(out.Bytes(), &checks); err != nil {
		t.Fatalf("not one JSON array: %v\n%s", err, out.String())
	}
	byCheck := map[string]string{}
	for _, c := range checks {
		byCheck[c.Check] = c.Status
	}
	for check, want := range map[string]string{"config": "ok", "component secret": "ok", "xmpp server": "fail", "store": "ok"} {
		if byCheck[check] != want {
			t.Errorf("check %q: %q, want %q (all: %+v)", check, byCheck[check], want, checks)
		}
	}
	if strings.Contains(out.String(), "s3cret-doctor-json") {
		t.Error("the JSON carries the component secret")
	}
}

// version --json names the version and the Go release, as the text does.
func TestVersionJSON(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v struct {
		Version, Go string
		Settings    map[string]string
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Fatalf("version --json: %+v %v\n%s", v, err, out.String())
	}
}
