package mcpbridge

import (
	"os"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/internal/config"
)

func TestAgentOptions(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/tok", []byte("file-token\n"), 0o600)
	cfg := &config.Config{Dir: dir}
	a := config.Agent{JID: "m@agents.example.test", Name: "n", Version: "1", Backend: "mcp", Section: &Config{
		URL:         "http://127.0.0.1:1/mcp",
		HeadersEnv:  map[string]string{"Authorization": "AGENTGW_TEST_MCP_AUTH"},
		HeadersFile: map[string]string{"X-Token": "tok"},
	}}
	t.Setenv("AGENTGW_TEST_MCP_AUTH", "Bearer env-token")
	o := AgentOptions(cfg, a)
	if o.JID != a.JID || o.Name != "n" || o.Version != "1" || o.URL != a.Section.(*Config).URL || o.ConfigDir != dir || o.Headers == nil {
		t.Fatalf("%+v", o)
	}
	h, err := o.Headers()
	if err != nil || h.Get("Authorization") != "Bearer env-token" || h.Get("X-Token") != "file-token" {
		t.Fatalf("headers %v %v", h, err)
	}
	t.Setenv("AGENTGW_TEST_MCP_AUTH", "")
	if _, err := o.Headers(); err == nil || !strings.Contains(err.Error(), "header Authorization") || !strings.Contains(err.Error(), "AGENTGW_TEST_MCP_AUTH") {
		t.Errorf("missing env: %v", err)
	}
	s := AgentOptions(cfg, config.Agent{JID: a.JID, Backend: "mcp", Section: &Config{Command: []string{"srv"}, Env: map[string]string{"K": "v"}}})
	if len(s.Command) != 1 || s.Env["K"] != "v" || s.Headers != nil {
		t.Errorf("stdio: %+v", s)
	}
}
