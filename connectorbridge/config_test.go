package connectorbridge

import (
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit/bridgetest"
	"github.com/agentgw/agentgw/internal/config"
)

const valid = `
[xmpp]
component_domain = "agents.example.test"
server = "127.0.0.1:5347"
secret_env = "X_SECRET"
local_domains = ["example.test"]

[[agents]]
jid = "im@agents.example.test"
[agents.connector]
base_url = "http://127.0.0.1:19090"
api_key_env = "IM_KEY"
`

func load(t *testing.T, body string) (*config.Config, error) { return bridgetest.Load(t, body, Bridge) }

// The IM Profile v2 keys of [agents.connector].
func TestConnectorIMKeys(t *testing.T) {
	t.Parallel()
	good := strings.Replace(valid, `api_key_env = "IM_KEY"`, `api_key_env = "IM_KEY"
inbox = "alice@example.test"
upload_service = "upload.example.test"
download_origins = ["https://share.example.test", "http://127.0.0.1:5280"]
max_file_bytes = 2048`, 1)
	c, err := load(t, good)
	if err != nil {
		t.Fatal(err)
	}
	var conn *Config
	for _, a := range c.Agents {
		if x, ok := a.Section.(*Config); ok {
			conn = x
		}
	}
	if conn.Inbox != "alice@example.test" || conn.UploadService != "upload.example.test" ||
		len(conn.DownloadOrigins) != 2 || conn.MaxFileBytes != 2048 {
		t.Fatalf("connector = %+v", conn)
	}
	for bad, want := range map[string]string{
		`inbox = "alice@example.test/phone"`:                 "inbox must be a bare JID",
		`inbox = "not a jid"`:                                "inbox must be a bare JID",
		`upload_service = "svc@upload.example.test"`:         "upload_service must be a service JID",
		`download_origins = ["https://u:p@share.test"]`:      "download_origins entries must be scheme://host[:port]",
		`download_origins = ["https://share.test/path?x=1"]`: "download_origins entries must be scheme://host[:port]",
		`download_origins = ["ftp://share.test"]`:            "download_origins entries must be scheme://host[:port]",
		`max_file_bytes = -1`:                                "max_file_bytes must be between",
		`max_file_bytes = 2147483648`:                        "max_file_bytes must be between",
	} {
		_, err := load(t, strings.Replace(valid, `api_key_env = "IM_KEY"`, `api_key_env = "IM_KEY"`+"\n"+bad, 1))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", bad, err, want)
		}
	}
}
