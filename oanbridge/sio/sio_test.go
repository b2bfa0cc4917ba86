package sio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentgw/agentgw/oanbridge/oantest"
	"github.com/agentgw/agentgw/oanbridge/sio"
	"github.com/agentgw/agentgw/testkit"
)

func startServer(t *testing.T) *oantest.Server {
	t.Helper()
	s, err := oantest.Start()
	if errors.Is(err, oantest.ErrNoNode) {
		testkit.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func redeem(t *testing.T, s *oantest.Server) string {
	t.Helper()
	code, err := s.PairingCode()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"code": code})
	resp, err := http.Post(s.URL+"/api/v1/auth/oan/pairing-codes/redeem", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct{ APIKey string }
	json.NewDecoder(resp.Body).Decode(&r)
	if r.APIKey == "" {
		t.Fatal("no key")
	}
	return r.APIKey
}

// TestAgainstNodeSocketIO connects to the real socket.io 4.8 server,
// receives events, survives heartbeats, and sees a refused handshake, a
// server disconnect and a transport drop each as what they are.
func TestAgainstNodeSocketIO(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	key := redeem(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	_, err := sio.Dial(ctx, sio.Options{URL: s.URL, Namespace: "/oan", Auth: map[string]string{"token": "gofers_wrong"}})
	var ce *sio.ConnectError
	if !errors.As(err, &ce) || ce.Message != "invalid token" {
		t.Fatalf("bad token: %v", err)
	}

	c, err := sio.Dial(ctx, sio.Options{URL: s.URL, Namespace: "/oan", Auth: map[string]string{"token": key}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Emit(map[string]any{"type": "system_notice", "payload": map[string]any{"kind": "hello"}}); err != nil {
		t.Fatal(err)
	}
	ev := <-c.Events()
	if ev.Name != "oan:event" || len(ev.Args) != 1 || !bytes.Contains(ev.Args[0], []byte(`"kind":"hello"`)) {
		t.Fatalf("event %+v", ev)
	}
	// Past two ping intervals (2 s each) the connection is still up.
	time.Sleep(5 * time.Second)
	if _, err := s.Emit(map[string]any{"type": "system_notice", "payload": map[string]any{"kind": "later"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-c.Events():
		if !bytes.Contains(ev.Args[0], []byte(`"later"`)) {
			t.Fatalf("event %+v", ev)
		}
	case <-c.Done():
		t.Fatalf("connection ended across heartbeats: %v", c.Err())
	}

	if err := s.ServerDisconnect(); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), sio.ErrServerDisconnect) {
		t.Fatalf("server disconnect: %v", c.Err())
	}

	c, err = sio.Dial(ctx, sio.Options{URL: s.URL, Namespace: "/oan", Auth: map[string]string{"token": key}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Drop(); err != nil {
		t.Fatal(err)
	}
	<-c.Done()
	if c.Err() == nil || errors.Is(c.Err(), sio.ErrServerDisconnect) {
		t.Fatalf("transport drop reported as %v", c.Err())
	}
}
