package component_test

// These tests run the component against real servers (Prosody, and ejabberd
// for compatibility) and drive it with a real C2S client.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/component/componenttest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

const nsTest = "urn:agentgw:test"

// resolver knows a fixed set of endpoints.
type resolver map[string]bool // localpart → visible

func (r resolver) Resolve(_, endpoint jid.JID) (exists, visible bool) {
	visible, exists = r[endpoint.Localpart()]
	return exists, visible
}

// fixture is one server, one component and one logged-in client.
type fixture struct {
	srv    *xmppharness.Server
	domain jid.JID
	router *component.Router
	comp   *component.Component
	client *xmppclient.Client

	messages    chan component.Message
	release     chan struct{} // unblocks the "hang" handler
	releaseOnce sync.Once
}

// unhang lets the "hang" handler return. It holds a worker while it
// hangs, and each worker also serves one shard of the inbound messages:
// a message whose sender hashes to that shard waits until it returns.
func (f *fixture) unhang() { f.releaseOnce.Do(func() { close(f.release) }) }

func newRouter(t testing.TB, domain jid.JID, f *fixture) *component.Router {
	r := component.NewRouter(domain, resolver{"weather": true, "hidden": false}, testLogger(t))
	r.HandleGatewayIQ(component.IQGet, nsTest, "echo", component.IQHandlerFunc(func(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
		return xmltree.New(nsTest, "echo").WithText(iq.From.Bare().String()), nil
	}))
	r.HandleEndpointIQ(component.IQGet, nsTest, "echo", component.AccessVisible, component.IQHandlerFunc(func(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
		return xmltree.New(nsTest, "echo").WithText(iq.To.String()), nil
	}))
	r.HandleEndpointIQ(component.IQSet, nsTest, "fail", component.AccessExisting, component.IQHandlerFunc(func(context.Context, component.IQ) (*xmltree.Element, error) {
		return nil, errors.New("backend exploded")
	}))
	r.HandleEndpointIQ(component.IQSet, nsTest, "panic", component.AccessExisting, component.IQHandlerFunc(func(context.Context, component.IQ) (*xmltree.Element, error) {
		panic("handler bug")
	}))
	r.HandleEndpointIQ(component.IQSet, nsTest, "hang", component.AccessExisting, component.IQHandlerFunc(func(ctx context.Context, _ component.IQ) (*xmltree.Element, error) {
		select {
		case <-f.release:
		case <-ctx.Done():
		}
		return nil, nil
	}))
	r.HandleMessage(func(_ context.Context, m component.Message) {
		select {
		case f.messages <- m:
		default:
		}
	})
	return r
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func componentConfig(t testing.TB, srv *xmppharness.Server) component.Config {
	return component.Config{
		Domain:       jid.MustParse(srv.ComponentDomain),
		Addr:         srv.ComponentAddr,
		Secret:       srv.ComponentSecret,
		Logger:       testLogger(t),
		MinBackoff:   50 * time.Millisecond,
		MaxBackoff:   500 * time.Millisecond,
		PingInterval: time.Hour, // tests that want keepalives set it
	}
}

func startFixture(t testing.TB, srv *xmppharness.Server, cfg func(*component.Config)) *fixture {
	t.Helper()
	f := &fixture{
		srv:      srv,
		domain:   jid.MustParse(srv.ComponentDomain),
		messages: make(chan component.Message, 16),
		release:  make(chan struct{}),
	}
	t.Cleanup(f.unhang)
	f.router = newRouter(t, f.domain, f)
	c := componentConfig(t, srv)
	if cfg != nil {
		cfg(&c)
	}
	f.comp = componenttest.Start(t, c, f.router)
	f.client = dialClient(t, srv, "alice")
	return f
}

func dialClient(t testing.TB, srv *xmppharness.Server, user string) *xmppclient.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Register(ctx, user, "pw-"+user); err != nil {
		t.Fatalf("register %s: %v", user, err)
	}
	cl, err := xmppclient.Dial(ctx, xmppclient.Options{
		JID:       user + "@" + srv.Domain,
		Password:  "pw-" + user,
		Server:    srv.C2SAddr,
		TLS:       &tls.Config{InsecureSkipVerify: true}, // loopback test server, self-signed
		IQTimeout: 15 * time.Second,
		Presence:  true,
	})
	if err != nil {
		t.Fatalf("dial %s: %v", user, err)
	}
	// No cl.Close at cleanup: it races with the client's Serve (mellium's
	// SetCloseDeadline); stopping the server ends the stream instead.
	return cl
}

func iq(typ, to string, payload *xmltree.Element) *xmltree.Element {
	return xmltree.New(xmppclient.NS, "iq", "type", typ, "to", to).Add(payload)
}

// ask sends an IQ from the client and returns "result" or the error
// condition of the reply.
func ask(t testing.TB, cl *xmppclient.Client, el *xmltree.Element) (string, *xmltree.Element) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	reply, err := cl.SendIQ(ctx, el)
	if err != nil {
		t.Fatalf("IQ %s: %v", el, err)
	}
	if reply.AttrValue("type") == "result" {
		return "result", reply
	}
	return xmppclient.StanzaErrorCondition(reply), reply
}

// checkDispatch is the dispatch table both servers must pass.
func checkDispatch(t *testing.T, f *fixture) {
	d := f.domain.String()
	ping := func() *xmltree.Element { return xmltree.New(ns.Ping, "ping") }
	cases := []struct {
		name, typ, to string
		payload       *xmltree.Element
		want          string
	}{
		{"ping gateway", "get", d, ping(), "result"},
		{"ping endpoint", "get", "weather@" + d, ping(), "result"},
		{"ping endpoint resource", "get", "weather@" + d + "/x", ping(), "result"},
		{"ping hidden endpoint", "get", "hidden@" + d, ping(), "item-not-found"},
		{"ping nonexistent endpoint", "get", "nobody@" + d, ping(), "item-not-found"},
		{"unknown payload at gateway", "get", d, xmltree.New("urn:example:nope", "q"), "service-unavailable"},
		{"unknown payload at endpoint", "set", "weather@" + d, xmltree.New("urn:example:nope", "q"), "service-unavailable"},
		{"unknown payload at hidden endpoint", "get", "hidden@" + d, xmltree.New("urn:example:nope", "q"), "item-not-found"},
		{"no payload", "get", d, nil, "bad-request"}, // the server may answer this itself
		{"handler error", "set", "weather@" + d, xmltree.New(nsTest, "fail"), "internal-server-error"},
		{"handler panic", "set", "weather@" + d, xmltree.New(nsTest, "panic"), "internal-server-error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reply := ask(t, f.client, iq(tc.typ, tc.to, tc.payload))
			if got != tc.want {
				t.Fatalf("got %s, want %s: %s", got, tc.want, reply)
			}
			if tc.want == "item-not-found" && strings.Contains(reply.String(), "text") {
				t.Fatalf("item-not-found carries text: %s", reply)
			}
		})
	}

	// The recipient JID picks the handler, then the payload.
	got, reply := ask(t, f.client, iq("get", d, xmltree.New(nsTest, "echo")))
	if got != "result" || reply.Child(nsTest, "echo").Text != f.client.JID().Bare().String() {
		t.Fatalf("gateway echo: %s", reply)
	}
	got, reply = ask(t, f.client, iq("get", "weather@"+d, xmltree.New(nsTest, "echo")))
	if got != "result" || reply.Child(nsTest, "echo").Text != "weather@"+d {
		t.Fatalf("endpoint echo: %s", reply)
	}
	if reply.AttrValue("from") != "weather@"+d {
		t.Fatalf("reply from %q", reply.AttrValue("from"))
	}
}

// checkOneReplyEach fires many IQs at once and checks that the component
// wrote exactly one stanza per request.
func checkOneReplyEach(t *testing.T, f *fixture) {
	d := f.domain.String()
	const n = 200
	// An earlier case may still have a reply in flight: ejabberd answers an
	// IQ without payload itself and also forwards it, so the component's
	// own (ignored) reply can be written after that case ended, and on a
	// loaded machine after this count starts. Start from a quiet counter.
	before := quietSent(t, f.comp)
	targets := []string{d, "weather@" + d, "hidden@" + d, "nobody@" + d}
	payloads := []func() *xmltree.Element{
		func() *xmltree.Element { return xmltree.New(ns.Ping, "ping") },
		func() *xmltree.Element { return xmltree.New("urn:example:nope", "q") },
		func() *xmltree.Element { return xmltree.New(nsTest, "fail") },
		func() *xmltree.Element { return xmltree.New(nsTest, "echo") },
	}
	var wg sync.WaitGroup
	var answered atomic.Int64
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_, err := f.client.SendIQ(ctx, iq("get", targets[i%len(targets)], payloads[(i/len(targets))%len(payloads)]()))
			if err != nil {
				errs <- err
				return
			}
			answered.Add(1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("IQ without reply: %v", err)
	}
	// The client can read a reply before the writer has counted it: wait
	// for the count, then give a duplicate reply time to show up in it.
	testkit.WaitFor(t, testkit.MinWait, "the component to count its replies", func() bool { return f.comp.Stats().Sent-before >= n })
	time.Sleep(200 * time.Millisecond)
	if sent := f.comp.Stats().Sent - before; sent != n || answered.Load() != n {
		t.Fatalf("%d IQs, %d answered, component wrote %d stanzas", n, answered.Load(), sent)
	}
}

func TestProsodyDispatch(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	f := startFixture(t, srv, func(c *component.Config) {
		c.MaxStanzaBytes = 8 << 10
		c.IQTimeout = 2 * time.Second
	})
	checkDispatch(t, f)
	t.Run("one reply each", func(t *testing.T) { checkOneReplyEach(t, f) })

	t.Run("oversize IQ", func(t *testing.T) {
		big := xmltree.New(nsTest, "echo").WithText(strings.Repeat("x", 20<<10))
		got, reply := ask(t, f.client, iq("set", "weather@"+f.domain.String(), big))
		if got != "resource-constraint" {
			t.Fatalf("got %s: %.200s", got, reply)
		}
		// The stream survived.
		if got, _ := ask(t, f.client, iq("get", f.domain.String(), xmltree.New(ns.Ping, "ping"))); got != "result" {
			t.Fatalf("ping after oversize IQ: %s", got)
		}
	})

	t.Run("messages both ways", func(t *testing.T) {
		to := "weather@" + f.domain.String()
		if err := f.client.Send(context.Background(), xmltree.New(xmppclient.NS, "message", "to", to, "id", "m1").Add(
			xmltree.New(xmppclient.NS, "body").WithText("hi"))); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-f.messages:
			if m.ID != "m1" || !m.From.Equal(f.client.JID()) || m.To.String() != to {
				t.Fatalf("message %+v", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("message not dispatched")
		}

		got := make(chan *xmltree.Element, 1)
		f.client.OnMessage(func(el *xmltree.Element) { got <- el })
		msg := component.NewMessage("m2", jid.MustParse(to), f.client.JID(), xmltree.New(component.NSComponent, "body").WithText("hello"))
		if err := f.comp.Send(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		select {
		case el := <-got:
			if el.AttrValue("from") != to || el.Child("", "body").Text != "hello" {
				t.Fatalf("client got %s", el)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("client got no message")
		}
	})

	t.Run("SendIQ to client", func(t *testing.T) {
		ctx := context.Background()
		from := jid.MustParse("weather@" + f.domain.String())
		reply, err := f.comp.SendIQ(ctx, component.NewIQ("get", "", from, f.client.JID(), xmltree.New(ns.Ping, "ping")))
		if err != nil || reply.AttrValue("type") != "result" {
			t.Fatalf("ping client: %v %v", reply, err)
		}
		reply, err = f.comp.SendIQ(ctx, component.NewIQ("get", "", from, f.client.JID(), xmltree.New("urn:example:nope", "q")))
		if !errors.Is(err, agentproto.ErrServiceUnavailable()) || reply == nil {
			t.Fatalf("unknown payload to client: %v %v", reply, err)
		}
		// A peer that never answers: our own "hang" endpoint, through the server.
		_, err = f.comp.SendIQ(ctx, component.NewIQ("set", "", f.domain, jid.MustParse("weather@"+f.domain.String()), xmltree.New(nsTest, "hang")))
		if !errors.Is(err, component.ErrIQTimeout) {
			t.Fatalf("unanswered IQ: %v, want ErrIQTimeout", err)
		}
		if n := f.comp.Stats().PendingIQs; n != 0 {
			t.Fatalf("%d IQs still pending after the timeout", n)
		}
		// The server answers for itself.
		reply, err = f.comp.SendIQ(ctx, component.NewIQ("get", "", f.domain, jid.MustParse(srv.Domain), xmltree.New(ns.Ping, "ping")))
		if err != nil || reply.AttrValue("type") != "result" {
			t.Fatalf("ping server: %v %v", reply, err)
		}
	})
}

func TestProsodyKeepalive(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	f := startFixture(t, srv, func(c *component.Config) {
		c.PingInterval = 100 * time.Millisecond
		// Generous: a healthy but CPU-starved server must not count as dead.
		c.PingTimeout = 30 * time.Second
	})
	deadline := time.Now().Add(20 * time.Second)
	for f.comp.Stats().Sent < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("no keepalive pings: %+v", f.comp.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := f.comp.Stats(); st.PingFailures != 0 || st.Connects != 1 {
		t.Fatalf("keepalive against a healthy server: %+v", st)
	}
	if got, _ := ask(t, f.client, iq("get", f.domain.String(), xmltree.New(ns.Ping, "ping"))); got != "result" {
		t.Fatalf("ping: %s", got)
	}
}

// A server that stops answering (SIGSTOP) fails the keepalive ping; the
// component drops the stream and reconnects once the server is back.
func TestProsodyKeepaliveFailure(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	f := startFixture(t, srv, func(c *component.Config) {
		c.PingInterval = 200 * time.Millisecond
		c.PingTimeout = 500 * time.Millisecond
		c.HandshakeTimeout = time.Second
	})
	pid := srv.PID()
	if pid <= 0 {
		t.Fatal("no server PID")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	testkit.WaitFor(t, 20*time.Second, "the keepalive to fail", func() bool {
		return f.comp.Stats().PingFailures >= 1 && !f.comp.Connected()
	})
	// A stopped server still accepts TCP connections; the handshake must
	// time out rather than hang.
	testkit.WaitFor(t, 20*time.Second, "a handshake to time out", func() bool {
		return f.comp.Stats().Reconnects >= 2
	})
	if f.comp.Connected() {
		t.Fatal("connected to a stopped server")
	}
	resume()
	testkit.WaitFor(t, 20*time.Second, "the component to reconnect", func() bool {
		return f.comp.Connected() && f.comp.Stats().Connects >= 2
	})
	client := dialClient(t, srv, "carol")
	if got, _ := ask(t, client, iq("get", f.domain.String(), xmltree.New(ns.Ping, "ping"))); got != "result" {
		t.Fatalf("ping after reconnect: %s", got)
	}
}

// A graceful server restart (system-shutdown stream error) is transient.
func TestProsodyGracefulRestart(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	f := startFixture(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the component to reconnect", func() bool {
		return f.comp.Connected() && f.comp.Stats().Connects == 2
	})
	client := dialClient(t, srv, "dave")
	if got, _ := ask(t, client, iq("get", "weather@"+f.domain.String(), xmltree.New(ns.Ping, "ping"))); got != "result" {
		t.Fatalf("ping after restart: %s", got)
	}
}

func TestSendAfterRunReturned(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	cfg := componentConfig(t, srv)
	c := component.New(cfg, component.NewRouter(cfg.Domain, nil, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-c.Ready()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if c.Connected() {
		t.Fatal("still connected after Run returned")
	}
	if err := c.Send(context.Background(), component.NewPresence("", cfg.Domain, jid.MustParse("alice@"+srv.Domain))); !errors.Is(err, component.ErrNotConnected) {
		t.Fatalf("Send after Run returned: %v", err)
	}
}

func runUntilFatal(t *testing.T, cfg component.Config) (error, time.Duration) {
	t.Helper()
	c := component.New(cfg, component.NewRouter(cfg.Domain, nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Run(ctx)
	return err, time.Since(start)
}

func TestProsodyWrongSecret(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	cfg := componentConfig(t, srv)
	cfg.Secret = "wrong-" + srv.ComponentSecret
	var logs lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	err, _ := runUntilFatal(t, cfg)
	var fe *component.FatalError
	if !errors.As(err, &fe) || fe.Condition != "not-authorized" {
		t.Fatalf("Run returned %v, want FatalError not-authorized", err)
	}
	if l := logs.String(); !strings.Contains(l, "not-authorized") || strings.Contains(l, srv.ComponentSecret) {
		t.Fatalf("logs lack the condition or reveal the secret:\n%s", l)
	}
	msg := err.Error()
	if strings.Contains(msg, cfg.Secret) || strings.Contains(msg, srv.ComponentSecret) {
		t.Fatalf("error reveals the secret: %s", msg)
	}
	if !strings.Contains(msg, "secret") || !strings.Contains(msg, srv.ComponentDomain) {
		t.Fatalf("error does not tell the operator what to fix: %s", msg)
	}
}

func TestProsodyUnknownDomain(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	cfg := componentConfig(t, srv)
	cfg.Domain = jid.MustParse("unknown." + srv.Domain)
	cfg.StartupGrace = -1 // a typo in the domain must not wait for the grace
	err, _ := runUntilFatal(t, cfg)
	var fe *component.FatalError
	if !errors.As(err, &fe) || fe.Condition != "host-unknown" {
		t.Fatalf("Run returned %v, want FatalError host-unknown", err)
	}
}

// Prosody's default (component_conflict_resolve = "kick_new") refuses the
// second session with conflict and keeps the first.
func TestProsodyConflict(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	f := startFixture(t, srv, nil)
	err, _ := runUntilFatal(t, componentConfig(t, srv))
	var fe *component.FatalError
	if !errors.As(err, &fe) || fe.Condition != "conflict" {
		t.Fatalf("second component: Run returned %v, want FatalError conflict", err)
	}
	if !strings.Contains(err.Error(), "stop the other gateway instance") {
		t.Fatalf("advice: %s", err)
	}
	if !f.comp.Connected() {
		t.Fatal("first component lost its stream")
	}
	if got, _ := ask(t, f.client, iq("get", f.domain.String(), xmltree.New(ns.Ping, "ping"))); got != "result" {
		t.Fatalf("first component no longer serves: %s", got)
	}
}

// Killing the server fails a pending SendIQ with ErrStreamLost; after a
// restart the component reconnects, serves again, and sends what was queued
// meanwhile.
func TestProsodyKillAndRestart(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	f := startFixture(t, srv, func(c *component.Config) { c.IQTimeout = 10 * time.Minute })
	d := f.domain.String()

	// An IQ to our own "hang" endpoint goes through the server and back to
	// a handler that never answers.
	errc := make(chan error, 1)
	go func() {
		req := component.NewIQ("set", "", f.domain, jid.MustParse("weather@"+d), xmltree.New(nsTest, "hang"))
		_, err := f.comp.SendIQ(context.Background(), req)
		errc <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the IQ to be pending", func() bool { return f.comp.Stats().PendingIQs == 1 && f.comp.Stats().Received >= 1 })

	srv.Kill()
	select {
	case err := <-errc:
		if !errors.Is(err, component.ErrStreamLost) {
			t.Fatalf("pending SendIQ: %v, want ErrStreamLost", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("pending SendIQ hangs after the server died")
	}
	// The hung handler holds a worker, and with it (1 time in 16) the
	// shard the message queued below comes back on: that message would
	// wait for the test's end. Its IQ has failed; let it go.
	f.unhang()
	testkit.WaitFor(t, 10*time.Second, "Connected() to turn false", func() bool { return !f.comp.Connected() })
	if _, err := f.comp.SendIQ(context.Background(), component.NewIQ("get", "", f.domain, jid.MustParse(srv.Domain), xmltree.New(ns.Ping, "ping"))); !errors.Is(err, component.ErrNotConnected) {
		t.Fatalf("SendIQ while down: %v, want ErrNotConnected", err)
	}
	// Queued while down, delivered after the reconnect (to ourselves).
	queued := component.NewMessage("queued", f.domain, jid.MustParse("weather@"+d))
	if err := f.comp.Send(context.Background(), queued); err != nil {
		t.Fatalf("Send while down: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "the component to reconnect", func() bool { return f.comp.Connected() })
	if st := f.comp.Stats(); st.Connects != 2 || st.Reconnects < 1 {
		t.Fatalf("stats after reconnect: %+v", st)
	}
	select {
	case m := <-f.messages:
		if m.ID != "queued" {
			t.Fatalf("message %+v", m)
		}
	case <-time.After(testkit.MinWait):
		t.Fatalf("the message queued while down never arrived (stats %+v)", f.comp.Stats())
	}
	client := dialClient(t, srv, "bob")
	if got, _ := ask(t, client, iq("get", "weather@"+d, xmltree.New(ns.Ping, "ping"))); got != "result" {
		t.Fatalf("ping after reconnect: %s", got)
	}
}

func TestEjabberdDispatch(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	f := startFixture(t, srv, nil)
	checkDispatch(t, f)
	t.Run("one reply each", func(t *testing.T) { checkOneReplyEach(t, f) })
}

func TestEjabberdWrongSecret(t *testing.T) {
	t.Parallel()
	srv := xmppharness.StartEjabberd(t, xmppharness.EjabberdOptions{})
	cfg := componentConfig(t, srv)
	cfg.Secret = "wrong-" + srv.ComponentSecret
	err, _ := runUntilFatal(t, cfg)
	var fe *component.FatalError
	if !errors.As(err, &fe) || fe.Condition != "not-authorized" {
		t.Fatalf("Run returned %v, want FatalError not-authorized", err)
	}
}

type lockedBuffer = testkit.SyncBuffer

// BenchmarkIQRoundTrip measures client → Prosody → component (trivial
// handler) → client: the baseline without persistence that admission
// benchmarks compare against.
func BenchmarkIQRoundTrip(b *testing.B) {
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	domain := jid.MustParse(srv.ComponentDomain)
	r := component.NewRouter(domain, resolver{"weather": true}, slog.New(slog.DiscardHandler))
	cfg := component.Config{Domain: domain, Addr: srv.ComponentAddr, Secret: srv.ComponentSecret, Logger: slog.New(slog.DiscardHandler)}
	componenttest.Start(b, cfg, r)
	client := dialClient(b, srv, "bench")
	for _, inFlight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			componenttest.IQRoundTrips(b, client, "weather@"+srv.ComponentDomain, inFlight,
				func() *xmltree.Element { return xmltree.New(ns.Ping, "ping") })
		})
	}
}

// quietSent waits until the component has nothing queued and its sent
// counter held still for a moment, and returns the counter.
func quietSent(t *testing.T, c *component.Component) uint64 {
	t.Helper()
	deadline := time.Now().Add(testkit.MinWait)
	last := c.Stats().Sent
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		st := c.Stats()
		if st.Sent == last && st.QueueLen == 0 {
			return last
		}
		last = st.Sent
	}
	t.Fatalf("the component kept sending: %+v", c.Stats())
	return 0
}
