package config

import (
	"strings"
	"testing"
)

func TestSelfRegisterDomains(t *testing.T) {
	c, err := load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.XMPP.SelfRegisterDomains) != 0 {
		t.Fatalf("self-registration is on by default: %v", c.XMPP.SelfRegisterDomains)
	}
	on := strings.Replace(valid, `admins = ["admin@example.test"]`, `admins = ["admin@example.test"]
self_register_domains = ["example.test"]`, 1)
	if c, err = load(write(t, on)); err != nil || len(c.XMPP.SelfRegisterDomains) != 1 {
		t.Fatalf("a local domain is refused: %v %v", c, err)
	}
	for _, b := range []struct{ entry, want string }{
		{"remote.test", `self_register_domains entry "remote.test" is not in local_domains`},
		{"bot@example.test", `self_register_domains entry "bot@example.test" is not a domain`},
		{"agents.example.test", `is the component domain`},
	} {
		bad := strings.Replace(valid, `admins = ["admin@example.test"]`, `admins = ["admin@example.test"]
self_register_domains = ["`+b.entry+`"]`, 1)
		if b.entry == "agents.example.test" {
			bad = strings.Replace(bad, `local_domains = ["example.test"]`, `local_domains = ["example.test", "agents.example.test"]`, 1)
		}
		if _, err := load(write(t, bad)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %v, want %q", b.entry, err, b.want)
		}
	}
}

func TestLoadHost(t *testing.T) {
	h, err := loadHost(write(t, `
name = "bot"
visible_to = ["ops@example.test"]
[mcp]
command = ["node", "server.js", "stdio"]
[tasks]
default_timeout_seconds = 600
`))
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "bot" || h.Backend != "mcp" || len((*h.Section.(*rawSection))["command"].([]any)) != 3 || h.Tasks.DefaultTimeoutSeconds != 600 || h.Dir == "" {
		t.Fatalf("host file = %+v", h)
	}
	for body, want := range map[string]string{
		`name = "x"`: "an [mcp] table (command or url) is required",
		"manifest = \"m.json\"\n[mcp]\nurl = \"http://x\"":          "manifest is not used",
		"[connector]\nbase_url = \"http://x\"\napi_key_env = \"K\"": "not supported by agentgw host",
		"visible_to = [\"a b\"]\n[mcp]\nurl = \"http://x\"":         "visible_to entry",
		"colour = 1\n[mcp]\nurl = \"http://x\"":                     "unknown keys: colour",
	} {
		if _, err := loadHost(write(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", body, err, want)
		}
	}
}
