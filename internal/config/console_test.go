package config

import (
	"strings"
	"testing"
)

func TestConsoleValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		c    Console
		want string
	}{
		"off":                 {Console{}, ""},
		"loopback token":      {Console{Listen: "127.0.0.1:8090", TokenEnv: "T"}, ""},
		"loopback xmpp":       {Console{Listen: "[::1]:8090", LoginServer: "localhost:5222"}, ""},
		"remote with tls":     {Console{Listen: "0.0.0.0:8443", TokenFile: "t", TLSCert: "c", TLSKey: "k"}, ""},
		"remote without tls":  {Console{Listen: "0.0.0.0:8090", TokenEnv: "T"}, "not a loopback address"},
		"no login":            {Console{Listen: "127.0.0.1:8090"}, "nobody could log in"},
		"keys without listen": {Console{TokenEnv: "T"}, "listen is empty"},
		"bad listen":          {Console{Listen: "8090", TokenEnv: "T"}, "host:port"},
		"half tls":            {Console{Listen: "127.0.0.1:1", TokenEnv: "T", TLSCert: "c"}, "go together"},
		"bad login server":    {Console{Listen: "127.0.0.1:1", LoginServer: "localhost"}, "login_server"},
		"both token sources":  {Console{Listen: "127.0.0.1:1", TokenEnv: "T", TokenFile: "f"}, "exclusive"},
	} {
		tc.c.applyDefaults()
		errs := tc.c.validate()
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		all := strings.Join(got, "; ")
		if (tc.want == "") != (len(errs) == 0) || !strings.Contains(all, tc.want) {
			t.Errorf("%s: %q, want %q", name, all, tc.want)
		}
	}
}

func TestConsoleTokenIsSecret(t *testing.T) {
	c := &Config{Console: Console{Listen: "127.0.0.1:8090", TokenEnv: "AGENTGW_TEST_CONSOLE_TOKEN"}}
	if !strings.Contains(strings.Join(c.SecretEnvNames(), " "), "AGENTGW_TEST_CONSOLE_TOKEN") {
		t.Error("token_env is not a secret variable")
	}
	t.Setenv("AGENTGW_TEST_CONSOLE_TOKEN", "short")
	if _, err := c.ConsoleToken(); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("a short token: %v", err)
	}
	t.Setenv("AGENTGW_TEST_CONSOLE_TOKEN", strings.Repeat("k", 32))
	if tok, err := c.ConsoleToken(); err != nil || tok != strings.Repeat("k", 32) {
		t.Errorf("token: %q %v", tok, err)
	}
}
