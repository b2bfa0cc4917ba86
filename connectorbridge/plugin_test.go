package connectorbridge

import (
	"os"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/internal/config"
)

func TestAgentOptions(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/key", []byte("sk-from-file\n"), 0o600)
	cfg := &config.Config{Dir: dir}
	a := config.Agent{JID: "im@agents.example.test", Title: "IM", Backend: "connector", Section: &Config{BaseURL: "http://127.0.0.1:1", APIKeyFile: "key"}}
	o, err := AgentOptions(cfg, a)
	if err != nil || o.APIKey != "sk-from-file" || o.Endpoint != a.JID || o.Title != "IM" || o.BaseURL != "http://127.0.0.1:1" {
		t.Fatalf("%+v %v", o, err)
	}
	a.Section = &Config{BaseURL: "http://127.0.0.1:1", APIKeyEnv: "AGENTGW_TEST_CONNECTOR_KEY"}
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", "")
	if _, err := AgentOptions(cfg, a); err == nil || !strings.Contains(err.Error(), "AGENTGW_TEST_CONNECTOR_KEY") {
		t.Errorf("empty env: %v", err)
	}
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", "sk-env")
	if o, err := AgentOptions(cfg, a); err != nil || o.APIKey != "sk-env" {
		t.Errorf("env: %v", err)
	}
	a.Backend, a.Section = "", nil
	if _, err := AgentOptions(cfg, a); err == nil {
		t.Error("agent without connector accepted")
	}
}
