package a2abridge

import (
	"errors"
	"strings"
	"testing"
)

// sseEvents joins an event's data lines, accepts \r\n and "data:" without
// the space, skips other fields, reads an event of exactly max bytes whole
// and refuses one byte more with errTooLarge (never a cut event).
func TestSSEEvents(t *testing.T) {
	collect := func(in string, max int64) ([]string, error) {
		var out []string
		for d, err := range sseEvents(strings.NewReader(in), max) {
			if err != nil {
				return out, err
			}
			out = append(out, string(d))
		}
		return out, nil
	}
	got, err := collect("id: 1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\n: comment\nevent: x\ndata: two\n\ndata: unterminated", 100)
	if err != nil || len(got) != 2 || got[0] != "{\"a\":\n1}" || got[1] != "two" {
		t.Fatalf("got %q, %v", got, err)
	}
	big := strings.Repeat("x", 200<<10) // over bufio.Scanner's 64 KiB
	if got, err := collect("data: "+big+"\n\n", 200<<10); err != nil || len(got) != 1 || got[0] != big {
		t.Fatalf("an event of exactly the cap: %d events, %v", len(got), err)
	}
	if _, err := collect("data: "+big+"x\n\n", 200<<10); !errors.Is(err, errTooLarge) {
		t.Fatalf("an event over the cap: %v", err)
	}
	if _, err := collect("data: "+big[:100<<10]+"\ndata: "+big[:100<<10]+"\n\n", 200<<10); !errors.Is(err, errTooLarge) {
		t.Fatalf("an event over the cap in two lines: %v", err)
	}
}
