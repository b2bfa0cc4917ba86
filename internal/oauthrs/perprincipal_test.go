package oauthrs

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"mellium.im/xmpp/jid"
)

// One handler per bare JID, made once however many requests race for it,
// and no more principals than the cap.
func TestPerPrincipalMakesOnceAndCaps(t *testing.T) {
	t.Parallel()
	var made atomic.Int32
	pp := &perPrincipal{ctx: context.Background(), max: 2, m: map[string]*principalHandler{},
		make: func(_ context.Context, p jid.JID) (http.Handler, error) {
			made.Add(1)
			if p.Localpart() == "broken" {
				return nil, errors.New("no front")
			}
			return http.NotFoundHandler(), nil
		}}
	alice := jid.MustParse("alice@example.test/phone")
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ph := pp.get(alice); ph == nil || ph.h == nil {
				t.Error("alice got no handler")
			}
		}()
	}
	wg.Wait()
	if n := made.Load(); n != 1 {
		t.Fatalf("alice's handler made %d times, want 1", n)
	}
	if ph := pp.get(jid.MustParse("alice@example.test")); ph == nil || made.Load() != 1 {
		t.Fatalf("the bare JID made another handler (%d made)", made.Load())
	}
	if ph := pp.get(jid.MustParse("broken@example.test")); ph == nil || ph.err == nil {
		t.Fatalf("a failed make: %+v", ph)
	}
	if ph := pp.get(jid.MustParse("carol@example.test")); ph != nil {
		t.Fatal("a third principal was served past the cap of 2")
	}
}
