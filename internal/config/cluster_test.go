package config

import (
	"strings"
	"testing"
	"time"
)

func TestClusterLease(t *testing.T) {
	base := "[xmpp]\ncomponent_domain = \"agents.example.test\"\nserver = \"127.0.0.1:5347\"\nsecret_env = \"S\"\n"
	c, err := load(write(t, base))
	if err != nil || c.LeaseTTL() != 10*time.Second {
		t.Fatalf("default lease: %v %v", c.LeaseTTL(), err)
	}
	if c, err = load(write(t, base+"[cluster]\nlease_seconds = 3\n")); err != nil || c.LeaseTTL() != 3*time.Second {
		t.Fatalf("lease_seconds = 3: %v %v", c.LeaseTTL(), err)
	}
	for _, bad := range []string{"-1", "301"} {
		if _, err := load(write(t, base+"[cluster]\nlease_seconds = "+bad+"\n")); err == nil || !strings.Contains(err.Error(), "lease_seconds") {
			t.Errorf("lease_seconds = %s: %v", bad, err)
		}
	}
}
