package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
)

// configSchema is `agentgw config schema`, compiled.
func configSchema(t *testing.T) *schema.Schema {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"config", "schema"}, &out, &errb); code != 0 {
		t.Fatalf("config schema: exit %d: %s", code, errb.String())
	}
	s, err := schema.CompileTrusted(out.Bytes())
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// tomlAsJSON decodes a TOML document into the JSON value the schema sees.
func tomlAsJSON(t *testing.T, doc string) any {
	t.Helper()
	var m map[string]any
	if _, err := toml.Decode(doc, &m); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ijson.Parse(b, ijson.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The shipped configs, which the loader accepts, are valid under the
// schema; a key the loader refuses, or a value of the wrong type, is not.
func TestConfigSchema(t *testing.T) {
	t.Parallel()
	s := configSchema(t)
	for _, p := range []string{"../../deploy/agentgw.example.toml", "../../deploy/cluster/agentgw-cluster.toml"} {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(p); err != nil {
			t.Logf("%s: the loader refuses it here (%v); checking the schema only", filepath.Base(p), err)
		}
		if err := s.Validate(tomlAsJSON(t, string(doc))); err != nil {
			t.Errorf("%s is invalid under the schema: %v", p, err)
		}
	}
	good := `
[xmpp]
component_domain = "agents.example.com"
server = "127.0.0.1:5275"
[[agents]]
jid = "echo@agents.example.com"
[agents.mcp]
command = ["npx", "server"]
max_sessions = 2
`
	if err := s.Validate(tomlAsJSON(t, good)); err != nil {
		t.Fatalf("a minimal MCP config is invalid: %v", err)
	}
	for name, bad := range map[string]string{
		"unknown table":       good + "[nosuch]\nx = 1\n",
		"unknown key":         good + "[store]\npathh = \"x.db\"\n",
		"wrong type":          good + "[tasks]\nmax_active = \"many\"\n",
		"unknown bridge key":  good + "greeting = \"hi\"\n",
		"unknown agent table": good + "[agents.nosuch]\nx = 1\n",
	} {
		if err := s.Validate(tomlAsJSON(t, bad)); err == nil {
			t.Errorf("%s: valid under the schema", name)
		}
	}
}
