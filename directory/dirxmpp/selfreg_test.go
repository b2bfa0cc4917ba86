package dirxmpp

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/store/sqlite"
)

// selfHarness is a router with Self Registration for example.net accounts
// over a real registry and self-registration store.
type selfHarness struct {
	router *component.Router
	reg    *directory.Registry
	store  *sqlite.SelfReg
	sr     *SelfRegistration
	sender *fakeSender
}

func newSelfHarness(t *testing.T) *selfHarness {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := directory.NewRegistry(ctx, sqlite.NewDirectory(db), log)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetDomain(domain)
	pol := testPolicy()
	st := sqlite.NewSelfReg(db)
	// partner.example is allowed here only to show that a remote domain is
	// refused even then: it is not a local domain of the policy.
	sr := NewSelfRegistration([]string{"example.net", "partner.example"}, reg, st, nil, log)
	r := component.NewRouter(jid.MustParse(domain), NewResolver(reg, pol), log)
	s := &fakeSender{}
	Register(r, Deps{Domain: jid.MustParse(domain), Reader: reg, Admin: reg, Policy: pol, Sender: s, Log: log, SelfRegister: sr})
	return &selfHarness{router: r, reg: reg, store: st, sr: sr, sender: s}
}

func (h *selfHarness) do(t *testing.T, typ, from, payload string) string {
	t.Helper()
	return condition(h.router.DispatchIQ(context.Background(), iq(t, typ, from, domain, payload)))
}

func ownManifest(account, version string) string {
	local := account[:strings.IndexByte(account, '@')]
	return `<register xmlns='urn:xmpp:agent-api:0'><manifest media-type='application/json'>{"manifestSpecVersion":"0","agent":{"jid":"` +
		account + `","name":"` + local + `","version":"` + version + `"},"tools":[]}</manifest></register>`
}

func activateXML(t *testing.T, reg *directory.Registry, ep, version string) string {
	m, ok := reg.Manifest(ep, version)
	if !ok {
		t.Fatalf("%s %s not registered", ep, version)
	}
	return `<activate xmlns='urn:xmpp:agent-api:0' jid='` + ep + `' version='` + version + `'><hash xmlns='urn:xmpp:hashes:2' algo='sha-256'>` + m.Hash + `</hash></activate>`
}

func listed(t *testing.T, h *selfHarness, from string) []string {
	t.Helper()
	q := payload(t, h.router.DispatchIQ(context.Background(), iq(t, "get", from, domain, `<query xmlns='http://jabber.org/protocol/disco#items'/>`)))
	var out []string
	for _, it := range q.Children {
		out = append(out, it.AttrValue("jid"))
	}
	return out
}

func TestSelfRegistration(t *testing.T) {
	h := newSelfHarness(t)
	const bot = "bot@example.net"

	// Registration for another JID, and everything from a remote domain,
	// is forbidden; nothing is stored.
	for _, c := range []struct{ from, body string }{
		{juliet, ownManifest(bot, "1")},
		{"romeo@partner.example/pda", ownManifest("romeo@partner.example", "1")},
		{bot + "/agent", ownManifest("weather@agents.example", "1")},
	} {
		if got := h.do(t, "set", c.from, c.body); got != "forbidden" {
			t.Errorf("%s registering %s: %q, want forbidden", c.from, c.body[90:130], got)
		}
	}
	if h.reg.Exists(bot) || h.reg.Exists("romeo@partner.example") || h.reg.Exists("weather@agents.example") {
		t.Fatal("a refused registration was stored")
	}

	// The account registers and activates its own JID; identical content is
	// idempotent, different content under the version conflicts.
	if got := h.do(t, "set", bot+"/agent", ownManifest(bot, "1")); got != "" {
		t.Fatalf("own registration: %s", got)
	}
	if got := h.do(t, "set", bot+"/other", ownManifest(bot, "1")); got != "" {
		t.Fatalf("idempotent re-registration: %s", got)
	}
	if got := h.do(t, "set", bot+"/agent", strings.Replace(ownManifest(bot, "1"), `"name":"bot"`, `"name":"changed"`, 1)); got != "conflict" {
		t.Fatalf("different content under version 1: %q, want conflict", got)
	}
	if got := h.do(t, "set", juliet, activateXML(t, h.reg, bot, "1")); got != "forbidden" {
		t.Fatalf("another account activating bot: %q", got)
	}
	if got := h.do(t, "set", bot+"/agent", activateXML(t, h.reg, bot, "1")); got != "" {
		t.Fatalf("own activation: %s", got)
	}
	if got := h.do(t, "set", bot+"/agent", `<remove-endpoint xmlns='urn:xmpp:agent-api:0' jid='`+bot+`'/>`); got != "forbidden" {
		t.Fatalf("removal by the account: %q, want forbidden (administrators only)", got)
	}
	// The gateway asked for the account's presence.
	sent := h.sender.take()
	if !slices.ContainsFunc(sent, func(s string) bool {
		return strings.Contains(s, "type='subscribe'") || strings.Contains(s, `type="subscribe"`)
	}) {
		t.Fatalf("no presence subscription sent: %v", sent)
	}

	// Listed only while online.
	if l := listed(t, h, juliet); slices.Contains(l, bot) {
		t.Fatalf("listed before any presence: %v", l)
	}
	h.router.DispatchPresence(context.Background(), presence(t, "", bot+"/agent", domain))
	if l := listed(t, h, juliet); !slices.Contains(l, bot) {
		t.Fatalf("not listed while online: %v", l)
	}
	if l := listed(t, h, "romeo@partner.example/pda"); slices.Contains(l, bot) {
		t.Fatalf("listed to a remote principal without a grant: %v", l)
	}
	h.router.DispatchPresence(context.Background(), presence(t, "unavailable", bot+"/agent", domain))
	if l := listed(t, h, juliet); slices.Contains(l, bot) {
		t.Fatalf("still listed after unavailable: %v", l)
	}

	// Feature: offered to local accounts of allowed domains only.
	info := func(from string) []string {
		return featureVars(payload(t, h.router.DispatchIQ(context.Background(), iq(t, "get", from, domain, `<query xmlns='http://jabber.org/protocol/disco#info'/>`))))
	}
	if !slices.Contains(info(juliet), ns.APISelfRegister) {
		t.Error("#self-register not advertised to a local account")
	}
	mustLack(t, "remote features", info("romeo@partner.example/pda"), ns.APISelfRegister)

	// A ban refuses registration and activation, and outlives the
	// in-memory state (it is read from the store).
	if err := h.store.Ban(context.Background(), bot, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := h.do(t, "set", bot+"/agent", ownManifest(bot, "2")); got != "forbidden" {
		t.Fatalf("banned registration: %q", got)
	}
	if got := h.do(t, "set", bot+"/agent", activateXML(t, h.reg, bot, "1")); got != "forbidden" {
		t.Fatalf("banned activation: %q", got)
	}
	recs, err := h.store.Records(context.Background())
	if err != nil || len(recs) != 1 || recs[0].Endpoint != bot {
		t.Fatalf("records %v %v", recs, err)
	}
}
