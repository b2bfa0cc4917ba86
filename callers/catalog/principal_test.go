package catalog

import (
	"context"
	"encoding/json"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
)

// recorder is a Client that records the principal each call's ctx names.
type recorder struct{ got []string }

func (r *recorder) note(ctx context.Context) {
	p, _ := agentclient.PrincipalOf(ctx)
	r.got = append(r.got, p.String())
}

func (r *recorder) JID() jid.JID { return jid.MustParse("front@example.test/r") }
func (r *recorder) FindGateways(ctx context.Context, _ jid.JID) ([]jid.JID, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) AllItems(ctx context.Context, _ jid.JID, _ string, _ int) ([]agentclient.Item, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) Endpoint(ctx context.Context, _ jid.JID) (*agentclient.EndpointInfo, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) GetManifest(ctx context.Context, _ jid.JID, _ string) (*agentclient.Manifest, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) Invoke(ctx context.Context, _ jid.JID, _ *agentclient.InvokeRequest) (*agentclient.Accepted, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) Follow(ctx context.Context, _ jid.JID, _ *agentclient.Accepted, _ agentclient.CallOptions) (*agentclient.Outcome, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) Subscribe(jid.JID, string) (<-chan agentclient.Event, func()) {
	return nil, func() {}
}
func (r *recorder) State(ctx context.Context, _ jid.JID, _ string) (*agentclient.TaskState, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) Result(ctx context.Context, _ jid.JID, _ string) (*agentclient.TaskResult, error) {
	r.note(ctx)
	return nil, nil
}
func (r *recorder) Cancel(ctx context.Context, _ jid.JID, _ string, _ int64, _ *string) (int64, error) {
	r.note(ctx)
	return 0, nil
}
func (r *recorder) ProvideInput(ctx context.Context, _ jid.JID, _, _ string, _ int64, _ json.RawMessage) (int64, error) {
	r.note(ctx)
	return 0, nil
}

// Every request of an As view names the principal, and the view is no
// catalog watcher (pushes are the front account's).
func TestAsNamesThePrincipalOnEveryCall(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	a := As(rec, jid.MustParse("alice@example.test/phone"))
	ctx, ep := context.Background(), jid.MustParse("weather@agents.example.test")
	a.FindGateways(ctx, ep)
	a.AllItems(ctx, ep, "", 0)
	a.Endpoint(ctx, ep)
	a.GetManifest(ctx, ep, "")
	a.Invoke(ctx, ep, nil)
	a.Follow(ctx, ep, nil, agentclient.CallOptions{})
	a.State(ctx, ep, "t")
	a.Result(ctx, ep, "t")
	a.Cancel(ctx, ep, "t", 0, nil)
	a.ProvideInput(ctx, ep, "t", "r", 0, nil)
	if len(rec.got) != 10 {
		t.Fatalf("%d calls recorded", len(rec.got))
	}
	for i, p := range rec.got {
		if p != "alice@example.test" {
			t.Fatalf("call %d named %q", i, p)
		}
	}
	if _, ok := a.(watcher); ok {
		t.Fatal("an As view is a catalog watcher")
	}
	if PrincipalOf(a).String() != "alice@example.test" || PrincipalOf(rec).String() != "front@example.test" {
		t.Fatalf("PrincipalOf: %s / %s", PrincipalOf(a), PrincipalOf(rec))
	}
}
