package selfreg

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/endpointhost"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// scriptedHost is a scripted executor with the Start an endpointhost
// backend needs.
type scriptedHost struct{ *taskstest.Executor }

func (scriptedHost) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// startInprocHost runs endpointhost in-process for user (resource "" is
// the default) with a scripted backend until the test ends, waits until it
// is connected, and returns the backend's publisher.
func startInprocHost(t *testing.T, e *e2e.Env, user, resource string) backendkit.Publisher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var pub backendkit.Publisher
	h, err := endpointhost.New(ctx, endpointhost.Options{
		JID: e.JID(user), Password: e2e.Password + user, Resource: resource, Server: e.Server.C2SAddr, TLS: &tls.Config{InsecureSkipVerify: true},
		Gateway: e.Domain, StorePath: filepath.Join(e.Dir, "inproc-host-"+user+".db"),
		NewBackend: func(p backendkit.Publisher, _ backendkit.Availability) (endpointhost.Backend, error) {
			pub = p
			return scriptedHost{e2e.DefaultExecutor()}, nil
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; h.Close() })
	select {
	case <-h.Connected():
	case err := <-done:
		t.Fatalf("host stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("host did not connect")
	}
	return pub
}

// TestHostKeepsRegistrationCurrent runs endpointhost in-process with a
// scripted backend: each manifest the backend publishes (its tools
// changed) becomes the active version at the gateway while older versions
// stay registered, and a Go caller (agentclient) invokes the hosted
// endpoint at its full JID.
func TestHostKeepsRegistrationCurrent(t *testing.T) {
	t.Parallel()
	e := e2e.SelfRegEnv(t, e2e.Options{Users: []string{"alice", "bot"}})
	bot := e.JID("bot")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pub := startInprocHost(t, e, "bot", "")

	v1 := strings.Replace(e2e.DefaultManifest("bot@x"), `"bot@x"`, `"`+bot+`"`, 1)
	if _, _, err := pub.Publish(ctx, []byte(v1)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "version 1.0.0 active at the gateway", func() bool {
		m, ok := e.Gateway.Registry.Active(bot)
		return ok && m.Version == "1.0.0"
	})
	// The tools change: a new version, published while connected.
	v2 := strings.Replace(strings.Replace(v1, `"version":"1.0.0"`, `"version":"1.1.0"`, 1), `"Returns its arguments."`, `"Returns its arguments, now documented."`, 1)
	if _, _, err := pub.Publish(ctx, []byte(v2)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "version 1.1.0 active at the gateway", func() bool {
		m, ok := e.Gateway.Registry.Active(bot)
		return ok && m.Version == "1.1.0"
	})
	if _, ok := e.Gateway.Registry.Manifest(bot, "1.0.0"); !ok {
		t.Fatal("the previous version was dropped at the gateway")
	}

	c := e.Dial("alice")
	out, err := c.Call(ctx, jid.MustParse(bot+"/agent"), "echo", json.RawMessage(`{"message":"hello hosted"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "hello hosted") {
		t.Fatalf("echo at the hosted endpoint: %v %+v", err, out)
	}
	testkit.WaitFor(t, 10*time.Second, "the gateway sees the host online", func() bool { return e.Gateway.SelfReg.Online(bot) })

	// The XMPP server restarts: the host reconnects on its own, the
	// gateway follows its presence again, and it serves as before.
	// (The echo answers only once the host has a new session; the
	// gateway's presence state was reset when its own stream came back.)
	if err := e.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "the gateway's stream is back", func() bool { return e.Gateway.Component.Stats().Connects >= 2 })
	c = e.Dial("alice")
	testkit.WaitFor(t, 60*time.Second, "the hosted endpoint answers after the restart", func() bool {
		_, err := c.GetManifest(ctx, jid.MustParse(bot+"/agent"), "")
		return err == nil
	})
	out, err = c.Call(ctx, jid.MustParse(bot+"/agent"), "echo", json.RawMessage(`{"message":"after the restart"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "after the restart") {
		t.Fatalf("echo after the restart: %v %+v", err, out)
	}
	testkit.WaitFor(t, 10*time.Second, "the gateway sees the host online after the restart", func() bool { return e.Gateway.SelfReg.Online(bot) })
}

// TestSelfRegisteredListedAfterPresenceRace forces, through Prosody, the
// interleaving behind issue 27's "registered, activated, answering, but
// not listed": Prosody acknowledges the gateway's first subscribe with
// unavailable from the account's bare JID, then, after the host's
// approval, sends the host's presence from its full JID. Here the
// gateway's handling of the bare JID's stanzas is held up (a hold
// presence from a decoy account that the component queues on the same
// inbound worker as the bot's bare JID) until the host's presence could
// have been handled; then the hold is released. The endpoint must be
// listed: its bare "unavailable" came first on the wire and must not
// erase the resource seen after it.
//
// The decoy and resources are chosen for the component's sharding (FNV-1a
// of the sender mod its 16 default workers): the decoy shares the bot's
// bare JID's worker whether senders are keyed by full or by bare JID, and
// the host's full JID would have another worker if keyed by full JID.
func TestSelfRegisteredListedAfterPresenceRace(t *testing.T) {
	t.Parallel()
	e2e.NeedSlixmpp(t)
	var (
		decoy       atomic.Value // bare JID string of the decoy
		holding     = make(chan struct{})
		release     = make(chan struct{})
		holdOnce    sync.Once
		releaseOnce sync.Once
	)
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	e := e2e.SelfRegEnv(t, e2e.Options{Users: []string{"alice", "bot"}, BeforeRun: func(gw *gateway.Gateway) {
		gw.Router.HandlePresence(func(_ context.Context, pr component.Presence) {
			if d, _ := decoy.Load().(string); d == "" || pr.From.Bare().String() != d || pr.Type != "" {
				return
			}
			first := false
			holdOnce.Do(func() { first = true; close(holding) })
			if first {
				select {
				case <-release:
				case <-time.After(2 * time.Minute):
				}
			}
		})
	}})
	t.Cleanup(unhold) // before the gateway stops, which waits for its workers

	const workers = 16 // component.Config's default, which the gateway uses
	shard := func(s string) uint32 { h := fnv.New32a(); h.Write([]byte(s)); return h.Sum32() % workers }
	bot := e.JID("bot")
	want := shard(bot)
	pick := func(what string, ok func(string) bool, format string) string {
		for i := 0; i < 10000; i++ {
			if s := fmt.Sprintf(format, i); ok(s) {
				return s
			}
		}
		t.Fatalf("no %s found", what)
		return ""
	}
	botRes := pick("host resource", func(r string) bool { return shard(bot+"/"+r) != want }, "agent%d")
	decoyUser := pick("decoy account", func(u string) bool { return shard(e.JID(u)) == want }, "decoy%d")
	decoyRes := pick("decoy resource", func(r string) bool { return shard(e.JID(decoyUser)+"/"+r) == want }, "r%d")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := e.Server.Register(ctx, decoyUser, e2e.Password+decoyUser); err != nil {
		t.Fatal(err)
	}
	decoy.Store(e.JID(decoyUser))
	dc, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID: e.JID(decoyUser) + "/" + decoyRes, Password: e2e.Password + decoyUser, Server: e.Server.C2SAddr,
		TLS: &tls.Config{InsecureSkipVerify: true}, IQTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	pub := startInprocHost(t, e, "bot", botRes)

	// Hold the worker, then register and activate.
	if err := dc.Send(ctx, xmltree.New(xmppclient.NS, "presence", "to", e.Domain)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the hold presence never reached the gateway")
	}
	m := strings.Replace(e2e.DefaultManifest("bot@x"), `"bot@x"`, `"`+bot+`"`, 1)
	if _, _, err := pub.Publish(ctx, []byte(m)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "the host's manifest active at the gateway", func() bool {
		_, ok := e.Gateway.Registry.Active(bot)
		return ok
	})
	// The host's presence follows its approval within moments; with
	// per-account ordering it waits behind the hold instead, so this
	// wait may run out without failing anything.
	deadline := time.Now().Add(10 * time.Second)
	for !e.Gateway.SelfReg.Online(bot) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	unhold()

	e2e.RunSlixmpp(t, e, "selfreg.py", "alice", "--mode", "listed", "--target", bot, "--wait", "30")
	if !e.Gateway.SelfReg.Online(bot) {
		t.Fatal("listed but not online")
	}
}
