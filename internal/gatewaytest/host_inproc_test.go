package gatewaytest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentclient"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/endpointhost"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// scriptedHost is a scripted executor with the Start an endpointhost
// backend needs.
type scriptedHost struct{ *taskstest.Executor }

func (scriptedHost) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// TestHostKeepsRegistrationCurrent runs endpointhost in-process with a
// scripted backend: each manifest the backend publishes (its tools
// changed) becomes the active version at the gateway while older versions
// stay registered, and a Go caller (agentclient) invokes the hosted
// endpoint at its full JID.
func TestHostKeepsRegistrationCurrent(t *testing.T) {
	e := selfRegEnv(t, Options{Users: []string{"alice", "bot"}})
	bot := e.JID("bot")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var pub backendkit.Publisher
	h, err := endpointhost.New(ctx, endpointhost.Options{
		JID: bot, Password: Password + "bot", Server: e.Server.C2SAddr, TLS: &tls.Config{InsecureSkipVerify: true},
		Gateway: e.Domain, StorePath: filepath.Join(e.Dir, "inproc-host.db"),
		NewBackend: func(p backendkit.Publisher, _ backendkit.Availability) (endpointhost.Backend, error) {
			pub = p
			return scriptedHost{DefaultExecutor()}, nil
		},
	})
	if err != nil {
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

	v1 := strings.Replace(DefaultManifest("bot@x"), `"bot@x"`, `"`+bot+`"`, 1)
	if _, _, err := pub.Publish(ctx, []byte(v1)); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 20*time.Second, "version 1.0.0 active at the gateway", func() bool {
		m, ok := e.Gateway.Registry.Active(bot)
		return ok && m.Version == "1.0.0"
	})
	// The tools change: a new version, published while connected.
	v2 := strings.Replace(strings.Replace(v1, `"version":"1.0.0"`, `"version":"1.1.0"`, 1), `"Returns its arguments."`, `"Returns its arguments, now documented."`, 1)
	if _, _, err := pub.Publish(ctx, []byte(v2)); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 20*time.Second, "version 1.1.0 active at the gateway", func() bool {
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
	WaitFor(t, 10*time.Second, "the gateway sees the host online", func() bool { return e.Gateway.SelfReg.Online(bot) })

	// The XMPP server restarts: the host reconnects on its own, the
	// gateway follows its presence again, and it serves as before.
	// (The echo answers only once the host has a new session; the
	// gateway's presence state was reset when its own stream came back.)
	if err := e.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 60*time.Second, "the gateway's stream is back", func() bool { return e.Gateway.Component.Stats().Connects >= 2 })
	c = e.Dial("alice")
	WaitFor(t, 60*time.Second, "the hosted endpoint answers after the restart", func() bool {
		_, err := c.GetManifest(ctx, jid.MustParse(bot+"/agent"), "")
		return err == nil
	})
	out, err = c.Call(ctx, jid.MustParse(bot+"/agent"), "echo", json.RawMessage(`{"message":"after the restart"}`), agentclient.CallOptions{})
	if err != nil || out.State != "completed" || !strings.Contains(string(out.Payload), "after the restart") {
		t.Fatalf("echo after the restart: %v %+v", err, out)
	}
	WaitFor(t, 10*time.Second, "the gateway sees the host online after the restart", func() bool { return e.Gateway.SelfReg.Online(bot) })
}
