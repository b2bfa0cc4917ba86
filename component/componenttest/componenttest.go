// Package componenttest runs a component.Component for tests and benchmarks
// against a real XMPP server, and measures IQ round trips through it.
package componenttest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Start runs a component with cfg and r until the test ends, and waits for
// its first handshake. At cleanup it cancels Run and fails the test unless
// Run returns nil.
func Start(tb testing.TB, cfg component.Config, r *component.Router) *component.Component {
	tb.Helper()
	c := component.New(cfg, r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("component Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			tb.Errorf("component Run did not return after cancel")
		}
	})
	select {
	case <-c.Ready():
	case err := <-done:
		done <- err
		tb.Fatalf("component Run returned before the handshake: %v", err)
	case <-time.After(20 * time.Second):
		tb.Fatalf("component did not connect to %s", cfg.Addr)
	}
	return c
}

// IQRoundTrips sends b.N IQ gets from client to the JID to, with inFlight
// requests outstanding at a time, and reports "iqs/s". Every reply must be
// a result; anything else fails the benchmark. payload builds the request's
// child element.
func IQRoundTrips(b *testing.B, client *xmppclient.Client, to string, inFlight int, payload func() *xmltree.Element) {
	b.Helper()
	if inFlight < 1 {
		inFlight = 1
	}
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				iq := xmltree.New(xmppclient.NS, "iq", "type", "get", "to", to).Add(payload())
				reply, err := client.SendIQ(ctx, iq)
				if err == nil && reply.AttrValue("type") != "result" {
					err = errors.New("reply is not a result: " + xmppclient.StanzaErrorCondition(reply))
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if p := failed.Load(); p != nil {
		b.Fatalf("IQ round trip: %v", *p)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "iqs/s")
}
