package fuzzcheck

import "testing"

func TestForeign(t *testing.T) {
	v := Vocabulary(t, "agentproto/ns")
	if !v["urn"] || !v["xmpp"] || !v["agent"] {
		t.Fatalf("vocabulary of agentproto/ns lacks its own words: %d words", len(v))
	}
	if w := v.Foreign("urn:xmpp:agent-task:0 (sha-256 12)"); w != "" {
		t.Fatalf("known text reported foreign word %q", w)
	}
	if w := v.Foreign("urn:xmpp:agent-task:0 évil"); w != "évil" {
		t.Fatalf("Foreign = %q, want évil", w)
	}
	if w := v.Foreign("urn zzqxmarker"); w != "zzqxmarker" {
		t.Fatalf("Foreign = %q, want zzqxmarker", w)
	}
}
