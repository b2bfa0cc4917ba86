package mcpfront

import (
	"strings"
	"testing"
	"time"
)

func TestStateToken(t *testing.T) {
	t.Parallel()
	f := New(newFake(t), Options{Logger: quiet()})
	now := time.Unix(1000, 0)
	tok := stateToken{Tool: "a.b", Endpoint: "a@x", TaskID: "task-1", Input: "in-1", Attempt: 1, Expires: 2000}
	s := f.seal(tok)
	got, err := f.open(s, now)
	if err != nil || got != tok {
		t.Fatalf("open = %+v, %v", got, err)
	}
	if _, err := f.open(s, time.Unix(2000, 0)); err == nil {
		t.Error("expired token accepted")
	}
	p, sig, _ := strings.Cut(s, ".")
	forged := f.seal(stateToken{Tool: "a.b", Endpoint: "a@x", TaskID: "task-2", Expires: 2000})
	fp, _, _ := strings.Cut(forged, ".")
	if _, err := f.open(fp+"."+sig, now); err == nil {
		t.Error("token with a foreign payload accepted")
	}
	if _, err := f.open(p, now); err == nil {
		t.Error("unsigned token accepted")
	}
	other := New(newFake(t), Options{Logger: quiet()})
	if _, err := other.open(s, now); err == nil {
		t.Error("token of another process accepted")
	}
}
