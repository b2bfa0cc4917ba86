package porttest

import (
	"net"
	"strconv"
	"testing"
)

// Free gives bindable ports outside the ephemeral range, each once.
func TestFree(t *testing.T) {
	start := ephemeralStart()
	seen := map[int]bool{}
	for range 50 {
		p, err := Free("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if start-low >= minRoom && (p < low || p >= start) {
			t.Fatalf("port %d not in [%d, %d)", p, low, start)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}

// Ports handed out stay bindable while the earlier ones are held.
func TestFreeSkipsTaken(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 20 {
		p, err := Free("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not bindable (handed out while taken?): %v", p, err)
		}
		held = append(held, l)
	}
}
