package config

import "testing"

func TestClusterAllowMultiple(t *testing.T) {
	base := "[xmpp]\ncomponent_domain = \"agents.example.test\"\nserver = \"127.0.0.1:5347\"\nsecret_env = \"S\"\n"
	for text, want := range map[string]bool{
		"":                                    true,
		"[cluster]\nallow_multiple = true\n":  true,
		"[cluster]\nallow_multiple = false\n": false,
	} {
		c, err := load(write(t, base+text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got := c.ClusterAllowMultiple(); got != want {
			t.Errorf("%q: ClusterAllowMultiple() = %v, want %v", text, got, want)
		}
	}
}
