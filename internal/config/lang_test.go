package config

import (
	"strings"
	"testing"
)

// TestLang: [xmpp] lang defaults to "en", takes a BCP 47 tag, and a value
// that is not one is refused with a message naming the key.
func TestLang(t *testing.T) {
	c, err := load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	if c.XMPP.Lang != "en" {
		t.Fatalf("default lang %q, want en", c.XMPP.Lang)
	}
	withLang := func(v string) string {
		return strings.Replace(valid, "[xmpp]\n", "[xmpp]\nlang = \""+v+"\"\n", 1)
	}
	for _, ok := range []string{"de", "de-CH", "zh-Hant-TW", "i-klingon"} {
		c, err := load(write(t, withLang(ok)))
		if err != nil || c.XMPP.Lang != ok {
			t.Errorf("lang %q: %v (%+v)", ok, err, c)
		}
	}
	for _, bad := range []string{"en_US", "english language", "-en", "en-", "toolongtag1"} {
		_, err := load(write(t, withLang(bad)))
		if err == nil || !strings.Contains(err.Error(), "[xmpp] lang") {
			t.Errorf("lang %q: %v, want a [xmpp] lang error", bad, err)
		}
	}
}
