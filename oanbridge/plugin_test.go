package oanbridge

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit/bridgetest"
)

func TestOANAgentValidation(t *testing.T) {
	t.Parallel()
	base := `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "S"
[[agents]]
jid = "gofers@agents.example.test"
[agents.oan]
`
	c, err := bridgetest.Load(t, base+`base_url = "http://127.0.0.1:8080"
api_key_file = "oan.key"
owner = "alice@example.test"
`, Bridge)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := c.Agents[0].Section.(*Config); o == nil || c.Agents[0].Backend != "oan" || o.Owner != "alice@example.test" || o.APIKeyFile != "oan.key" {
		t.Fatalf("parsed %+v", c.Agents[0].Section)
	}
	_, err = bridgetest.Load(t, base+`base_url = "ftp://user:pw@host/x?q=1"
owner = "example.test"
reply_timeout_seconds = -1
`, Bridge)
	for _, want := range []string{
		"[agents.oan] base_url must be an http or https URL",
		"[agents.oan] api_key_file is required",
		"[agents.oan] owner must be a bare JID",
		"[agents.oan] reply_timeout_seconds must be between",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "pw") {
		t.Errorf("error quotes the URL's credentials: %v", err)
	}
}
