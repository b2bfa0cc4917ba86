package accbridge

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit/bridgetest"
)

const valid = `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "X_SECRET"
`

func TestACCDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	c, err := bridgetest.Load(t, valid+`
[acc]
listen = "127.0.0.1:9443"

[[agents]]
jid = "hermes@agents.example.test"
[agents.acc]
connector = "farm"
agent_id = "a-1"
`, Bridge)
	if err != nil {
		t.Fatal(err)
	}
	x := c.ACC
	if x.CertFile != "acc/server.crt" || x.ClientCAKeyFile != "acc/ca.key" || x.JWTKeyFile != "acc/jwt.key" ||
		x.HeartbeatSeconds != 30 || x.RegisterTimeoutSeconds != 10 || x.AcceptTimeoutSeconds != 30 ||
		x.CancelTimeoutSeconds != 15 || x.BusyRetrySeconds != 60 || x.ApprovalTimeoutSeconds != 300 ||
		x.URL != "wss://127.0.0.1:9443/v1/connector" || x.MaxFrameBytes != 1<<20 {
		t.Fatalf("defaults: %+v", x)
	}

	_, err = bridgetest.Load(t, valid+`
[acc]
listen = "nowhere"
url = "http://x"
max_frame_bytes = 10
high_risk_approvers = ["*@example.test"]

[[agents]]
jid = "a@agents.example.test"
max_running = 4
[agents.acc]
connector = "farm"

[[agents]]
jid = "b@agents.example.test"
[agents.acc]
connector = "farm"
`, Bridge)
	if err == nil {
		t.Fatal("a bad [acc] loaded")
	}
	for _, want := range []string{"listen \"nowhere\" is not host:port", "url must be a wss:// URL", "max_frame_bytes",
		"high_risk_approvers", "needs connector and agent_id", "max_running must be 1", "maps the same connector agent"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_, err = bridgetest.Load(t, valid+`
[[agents]]
jid = "c@agents.example.test"
[agents.acc]
connector = "farm"
agent_id = "x"
`, Bridge)
	if err == nil || !strings.Contains(err.Error(), "needs an [acc] section") {
		t.Fatalf("[agents.acc] without [acc]: %v", err)
	}
}
