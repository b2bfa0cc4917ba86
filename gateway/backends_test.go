package gateway

import (
	"os"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/internal/config"
)

func TestConnectorOptions(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/key", []byte("sk-from-file\n"), 0o600)
	cfg := &config.Config{Dir: dir}
	a := config.Agent{JID: "im@agents.example.test", Title: "IM", Connector: &config.Connector{BaseURL: "http://127.0.0.1:1", APIKeyFile: "key"}}
	o, err := ConnectorOptions(cfg, a)
	if err != nil || o.APIKey != "sk-from-file" || o.Endpoint != a.JID || o.Title != "IM" || o.BaseURL != "http://127.0.0.1:1" {
		t.Fatalf("%+v %v", o, err)
	}
	a.Connector = &config.Connector{BaseURL: "http://127.0.0.1:1", APIKeyEnv: "AGENTGW_TEST_CONNECTOR_KEY"}
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", "")
	if _, err := ConnectorOptions(cfg, a); err == nil || !strings.Contains(err.Error(), "AGENTGW_TEST_CONNECTOR_KEY") {
		t.Errorf("empty env: %v", err)
	}
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", "sk-env")
	if o, err := ConnectorOptions(cfg, a); err != nil || o.APIKey != "sk-env" {
		t.Errorf("env: %v", err)
	}
	a.Connector = nil
	if _, err := ConnectorOptions(cfg, a); err == nil {
		t.Error("agent without connector accepted")
	}
}

func TestMCPOptions(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/tok", []byte("file-token\n"), 0o600)
	cfg := &config.Config{Dir: dir}
	a := config.Agent{JID: "m@agents.example.test", Name: "n", Version: "1", MCP: &config.MCP{
		URL:         "http://127.0.0.1:1/mcp",
		HeadersEnv:  map[string]string{"Authorization": "AGENTGW_TEST_MCP_AUTH"},
		HeadersFile: map[string]string{"X-Token": "tok"},
	}}
	t.Setenv("AGENTGW_TEST_MCP_AUTH", "Bearer env-token")
	o := MCPOptions(cfg, a)
	if o.JID != a.JID || o.Name != "n" || o.Version != "1" || o.URL != a.MCP.URL || o.ConfigDir != dir || o.Headers == nil {
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
	s := MCPOptions(cfg, config.Agent{JID: a.JID, MCP: &config.MCP{Command: []string{"srv"}, Env: map[string]string{"K": "v"}}})
	if len(s.Command) != 1 || s.Env["K"] != "v" || s.Headers != nil {
		t.Errorf("stdio: %+v", s)
	}
}
