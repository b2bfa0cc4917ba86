package mcpbridge

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/store/sqlite"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskstest"
)

// dirPublisher registers and activates through the directory's own
// validation, as the gateway's publisher does.
type dirPublisher struct {
	dir *taskstest.Directory
	m   chan *directory.Manifest
}

func (p *dirPublisher) Publish(_ context.Context, raw []byte) (string, string, error) {
	m, err := directory.ParseManifest(raw)
	if err != nil {
		return "", "", err
	}
	p.dir.Add(m, true)
	p.m <- m
	return m.Version, m.Hash, nil
}

const alice = "alice@example.test"

// The bridge under the real task engine (SQLite store, lifecycle schema
// validation of every event) against the real reference server.
func TestEngineWithEverything(t *testing.T) {
	t.Parallel()
	cmd := everythingCmd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "agentgw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dir := taskstest.NewDirectory()
	pub := &dirPublisher{dir: dir, m: make(chan *directory.Manifest, 8)}
	log, logs := testLogger(t)
	b, err := New(Options{JID: testJID, Command: cmd, Publisher: pub, Logger: log, MinBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	bctx, stopBackend := context.WithCancel(ctx)
	backendDone := make(chan struct{})
	go func() { b.Start(bctx); close(backendDone) }()
	defer func() { stopBackend(); <-backendDone }()
	var m *directory.Manifest
	select {
	case m = <-pub.m:
	case <-ctx.Done():
		t.Fatalf("not published; log:\n%s", logs.String())
	}

	rec := taskstest.NewRecorder()
	eng, err := tasks.New(tasks.Config{
		Driver:    sqlite.NewTasks(db),
		Directory: dir,
		Policy:    taskstest.NewPolicy([2]string{alice, testJID}),
		Backends: func(endpoint string) (tasks.Backend, bool) {
			return b, endpoint == testJID
		},
		Notifier: rec,
		Clock:    clock.Real{},
		Log:      log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	admit := func(tool, args string) string {
		t.Helper()
		acc, err := eng.Admit(ctx, tasks.Invocation{
			Caller: alice, Route: alice + "/r", Endpoint: testJID, RequestID: ids.New("req-"),
			Tool: tool, APIVersion: m.Version, ManifestHash: m.Hash, Arguments: []byte(args), MediaType: "application/json",
		})
		if err != nil {
			t.Fatalf("admit %s: %v", tool, err)
		}
		return acc.TaskID
	}
	terminal := func(id string) tasks.Event {
		t.Helper()
		ev, err := rec.Terminal(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	resultText := func(ev tasks.Event) string {
		var p struct {
			Result tasks.ToolResult `json:"result"`
		}
		json.Unmarshal(ev.Payload, &p)
		return textOf(t, &p.Result)
	}

	t.Run("echo", func(t *testing.T) {
		ev := terminal(admit("echo", `{"message":"via engine"}`))
		if ev.Type != agentproto.EventCompleted || resultText(ev) != "Echo: via engine" {
			t.Errorf("%s %s", ev.Type, ev.Payload)
		}
	})
	t.Run("structured content validated against the translated output schema", func(t *testing.T) {
		ev := terminal(admit("get-structured-content", `{"location":"New York"}`))
		if ev.Type != agentproto.EventCompleted || !strings.Contains(string(ev.Payload), `"structuredContent":{"conditions":"Cloudy"`) {
			t.Errorf("%s %s", ev.Type, ev.Payload)
		}
	})
	t.Run("progress then completed, gap-free", func(t *testing.T) {
		id := admit("trigger-long-running-operation", `{"duration":0.5,"steps":5}`)
		terminal(id)
		evs := rec.Events(id)
		var percents []float64
		for i, ev := range evs {
			if ev.Revision != int64(i+1) {
				t.Errorf("event %d has revision %d", i, ev.Revision)
			}
			if ev.Type == agentproto.EventProgress {
				percents = append(percents, taskstest.Field(ev.Payload, "percent").(float64))
			}
		}
		if len(percents) != 5 || percents[4] != 100 || evs[len(evs)-1].Type != agentproto.EventCompleted {
			t.Errorf("percents %v, last %s", percents, evs[len(evs)-1].Type)
		}
	})
	t.Run("elicitation answered through provide-input", func(t *testing.T) {
		id := admit("trigger-elicitation-request", `{}`)
		ev, err := rec.Wait(ctx, id, agentproto.EventInputRequired)
		if err != nil {
			t.Fatal(err)
		}
		reqID, _ := taskstest.Field(ev.Payload, "requestId").(string)
		_, _, err = eng.ProvideInput(ctx, tasks.InputSubmission{
			Caller: alice, Endpoint: testJID, TaskID: id, RequestID: reqID, ExpectedRevision: ev.Revision,
			MediaType: "application/json", Input: []byte(`{"name":"Grace Hopper","check":true}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		done := terminal(id)
		if got := resultText(done); done.Type != agentproto.EventCompleted || !strings.Contains(got, "Name: Grace Hopper") {
			t.Errorf("%s %s", done.Type, got)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		id := admit("trigger-long-running-operation", `{"duration":5,"steps":10}`)
		if _, err := rec.Wait(ctx, id, agentproto.EventProgress); err != nil {
			t.Fatal(err)
		}
		snap, err := eng.State(ctx, alice, testJID, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := eng.Cancel(ctx, tasks.CancelRequest{Caller: alice, Endpoint: testJID, TaskID: id, ExpectedRevision: snap.Revision}); err != nil {
			t.Fatal(err)
		}
		// The operation runs 5 s; without cancellation it would complete.
		if done := terminal(id); done.Type != agentproto.EventCancelled {
			t.Errorf("%s %s", done.Type, done.Payload)
		}
	})
	t.Run("server killed", func(t *testing.T) {
		id := admit("trigger-long-running-operation", `{"duration":20,"steps":40}`)
		if _, err := rec.Wait(ctx, id, agentproto.EventProgress); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(b.current().proc.pid, syscall.SIGKILL)
		ev := terminal(id)
		if ev.Type != agentproto.EventFailed || !strings.Contains(string(ev.Payload), `"code":"unavailable"`) || !strings.Contains(string(ev.Payload), `"retryable":true`) {
			t.Errorf("%s %s", ev.Type, ev.Payload)
		}
	})
}
