package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/cluster"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
)

// chatBackend is a conversing backend that records what reaches it.
type chatBackend struct {
	*taskstest.Executor
	mu       sync.Mutex
	turns    []backendkit.Turn
	bounces  []backendkit.Bounce
	chat     backendkit.Chat
	refuse   error
	inbox    string
	converse bool
}

func (c *chatBackend) CanConverse(string) bool { return c.converse }
func (c *chatBackend) Converse(_ context.Context, t backendkit.Turn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.turns = append(c.turns, t)
	return c.refuse
}
func (c *chatBackend) AttachChat(ch backendkit.Chat) { c.mu.Lock(); c.chat = ch; c.mu.Unlock() }
func (c *chatBackend) ChatRecipients(string) []string {
	if c.inbox == "" {
		return nil
	}
	return []string{c.inbox}
}
func (c *chatBackend) ChatBounced(b backendkit.Bounce) {
	c.mu.Lock()
	c.bounces = append(c.bounces, b)
	c.mu.Unlock()
}
func (c *chatBackend) ChatPeerBack(string, string) {}

func (c *chatBackend) attached() backendkit.Chat {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chat
}

type nopChat struct{}

func (nopChat) Send(context.Context, backendkit.Message) error      { return nil }
func (nopChat) Ack(context.Context, backendkit.Ack) error           { return nil }
func (nopChat) Activity(context.Context, backendkit.Activity) error { return nil }

// member is one instance's leased chat backend for endpoint ep on a
// shared bus, and its leasedBackend.
func member(bus cluster.Bus, self, ep string, tmpl any) (*leasedChatBackend, *leasedBackend) {
	r := &leaseChat{self: self, bus: bus, log: slog.New(slog.DiscardHandler),
		eps: map[string]*leasedChatBackend{}, waiting: map[string]chan string{}}
	r.unsub = bus.Subscribe(leaseChatChannel, r.onMsg)
	lb := &leasedBackend{self: self}
	lc := &leasedChatBackend{Backend: lb, self: self, ep: ep, relay: r, tmpl: tmpl, local: lb.termBackend, holder: lb.holderNow}
	lb.attach = lc.attach
	r.eps[ep] = lc
	return lc, lb
}

// A leased conversing backend: the holder's term gets the messaging
// Chat (attached before or after the term starts), a member without the
// lease relays turns to the holder and reports its answer, refusals
// keep their meaning across the relay, consent comes from the
// configuration on every member, bounces reach the holder, and a holder
// that does not answer leaves the sender told "unavailable", bounded.
func TestLeasedChatRelaysToTheHolder(t *testing.T) {
	bus := cluster.NewLocal()
	const ep = "im@agents.example.test"
	tmpl := &chatBackend{inbox: "alice@example.test"}
	a, alb := member(bus, "gw-a", ep, tmpl)
	b, blb := member(bus, "gw-b", ep, tmpl)
	a.AttachChat(nopChat{})
	b.AttachChat(nopChat{})

	term := &chatBackend{Executor: taskstest.New(tasks.Features{}), inbox: "alice@example.test", converse: true}
	alb.setHolder("gw-a")
	blb.setHolder("gw-a")
	alb.set(&LeasedTerm{Backend: term})
	if term.attached() == nil {
		t.Fatal("the new term did not get the messaging Chat")
	}
	if !a.CanConverse(ep) || !b.CanConverse(ep) {
		t.Fatal("chat is not offered on both members while a holder converses")
	}
	if got := b.ChatRecipients(ep); len(got) != 1 || got[0] != "alice@example.test" {
		t.Fatalf("consent on a member without the lease: %v", got)
	}

	var wroteMu sync.Mutex
	var wrote []string
	a.relay.wrote = func(t backendkit.Turn) { wroteMu.Lock(); wrote = append(wrote, t.From); wroteMu.Unlock() }
	ctx := context.Background()
	if err := b.Converse(ctx, backendkit.Turn{Endpoint: ep, From: "alice@example.test/x", ID: "t1", Body: "hello"}); err != nil {
		t.Fatalf("relayed turn: %v", err)
	}
	wroteMu.Lock()
	if len(wrote) != 1 || wrote[0] != "alice@example.test/x" {
		t.Fatalf("the holder's messaging did not learn that the sender wrote (its consent to replies): %v", wrote)
	}
	wroteMu.Unlock()
	if err := a.Converse(ctx, backendkit.Turn{Endpoint: ep, From: "alice@example.test/x", ID: "t2", Body: "local"}); err != nil {
		t.Fatalf("local turn: %v", err)
	}
	term.mu.Lock()
	n := len(term.turns)
	first := term.turns[0]
	term.mu.Unlock()
	if n != 2 || first.ID != "t1" || first.Body != "hello" || first.From != "alice@example.test/x" {
		t.Fatalf("the holder's term got %d turns, first %+v", n, first)
	}
	for _, refusal := range []error{backendkit.ErrChatRateLimited, backendkit.ErrChatTooLarge, backendkit.ErrChatUnavailable, errors.New("this resource is not an open IM channel of the agent")} {
		term.mu.Lock()
		term.refuse = refusal
		term.mu.Unlock()
		err := b.Converse(ctx, backendkit.Turn{Endpoint: ep, From: "alice@example.test/x", ID: "t3", Body: "x"})
		if err == nil || err.Error() != refusal.Error() || (errors.Is(refusal, backendkit.ErrChatRateLimited) && !errors.Is(err, backendkit.ErrChatRateLimited)) {
			t.Fatalf("refusal %q came back across the relay as %v", refusal, err)
		}
	}

	b.ChatBounced(backendkit.Bounce{Endpoint: ep, Peer: "alice@example.test", ID: "im_1", Condition: "service-unavailable"})
	testkit.WaitFor(t, 5*time.Second, "the bounce at the holder's term", func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return len(term.bounces) == 1 && term.bounces[0].ID == "im_1"
	})

	// The holder is gone (no one answers on the bus): bounded, unavailable.
	blb.setHolder("gw-dead")
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := b.Converse(cctx, backendkit.Turn{Endpoint: ep, From: "alice@example.test/x", ID: "t4", Body: "x"}); !errors.Is(err, backendkit.ErrChatUnavailable) {
		t.Fatalf("a turn for a silent holder: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the relay waited %v past its context", d)
	}
	// Which leased backends chat: one that converses, takes the Chat and
	// has a recipient configured; not an IM connector without an inbox,
	// nor a backend that only runs tools.
	if !originatesChat(ep, tmpl) || originatesChat(ep, &chatBackend{}) || originatesChat(ep, taskstest.New(tasks.Features{})) {
		t.Fatal("originatesChat chose wrong")
	}
	// No holder at all: chat is not offered.
	blb.setHolder("")
	if b.CanConverse(ep) {
		t.Fatal("chat offered with no holder")
	}
}
