package config

import (
	"strings"
	"testing"
)

func TestMessagingDefaultsAndBounds(t *testing.T) {
	c, err := load(write(t, valid))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Messaging
	if m.MaxBodyBytes != 16<<10 || m.MaxFiles != 8 || m.PerConversationPerSecond != 2 || m.PerConversationBurst != 10 || m.MaxQueued != 256 {
		t.Fatalf("[messaging] defaults not applied: %+v", m)
	}
	_, err = load(write(t, valid+`
[messaging]
max_body_bytes = 1048576
max_files = -1
per_conversation_per_second = -2
per_conversation_burst = -1
max_queued = -5
`))
	if err == nil {
		t.Fatal("out-of-range [messaging] values were accepted")
	}
	for _, key := range []string{"max_body_bytes", "max_files", "per_conversation_per_second", "per_conversation_burst", "max_queued"} {
		if !strings.Contains(err.Error(), "[messaging] "+key) {
			t.Errorf("the error does not name %s: %v", key, err)
		}
	}
}
