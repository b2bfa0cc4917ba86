package a2abridge

import (
	"strings"
	"testing"
)

// TestBridgeDetailsNoQuery: the console's row for a card names its URL
// without the query or fragment, where a token may sit.
func TestBridgeDetailsNoQuery(t *testing.T) {
	b, err := New(Options{Endpoint: "a@agents.example.test", CardURL: "https://agent.example/.well-known/agent-card.json?token=s3cr3t-9f#frag"})
	if err != nil {
		t.Fatal(err)
	}
	d := b.BridgeDetails()
	if len(d) != 1 || d[0].Kind != "a2a card" || d[0].State != "not fetched" ||
		d[0].Detail != "card https://agent.example/.well-known/agent-card.json, signature not required" || strings.Contains(d[0].Detail, "s3cr3t") {
		t.Errorf("details %+v", d)
	}
}
