package component

import (
	"context"
	"testing"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

type existsResolver map[string]bool

func (r existsResolver) Resolve(_, ep jid.JID) (bool, bool) { return r[ep.String()], r[ep.String()] }

// A rate-limited requester must get the same reply whether the addressee
// exists or not, or the limit itself becomes an existence oracle.
func TestLimiterRunsBeforeResolution(t *testing.T) {
	t.Parallel()
	domain := jid.MustParse("agents.example.test")
	r := NewRouter(domain, existsResolver{"weather@agents.example.test": true}, nil)
	r.HandleEndpointIQ(IQSet, "urn:x", "op", AccessExisting, IQHandlerFunc(func(context.Context, IQ) (*xmltree.Element, error) {
		return nil, nil
	}))
	budget := 2
	r.SetLimiter(func(jid.JID, string, string) bool { budget--; return budget >= 0 })
	ask := func(to string) string {
		iq := IQ{ID: "1", Type: "set", From: jid.MustParse("eve@remote.test/x"), To: jid.MustParse(to), Payload: xmltree.New("urn:x", "op")}
		reply := r.DispatchIQ(context.Background(), iq)
		reply.SetAttr("from", "")
		return reply.String()
	}
	ask("weather@agents.example.test")
	ask("nobody@agents.example.test")
	existing, missing := ask("weather@agents.example.test"), ask("nobody@agents.example.test")
	if existing != missing {
		t.Fatalf("limited replies differ:\n%s\n%s", existing, missing)
	}
	if want := "resource-constraint"; !contains(existing, want) {
		t.Fatalf("reply %s lacks %s", existing, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
