package taskxmpp

import (
	"context"
	"strconv"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit/goldentest"
)

// The task IQ exchanges and lifecycle event messages of the spec's
// examples, replayed through the router and the notifier.
const (
	goldenTasks  = "../../testdata/golden/tasks"
	goldenEvents = "../../testdata/golden/events"
)

const (
	specTask = "task-7f2a9c41d8804e96bb478af6453c0371"
	specHash = "K2/YdwvIBAlfUIeZHiNCyiYA4m4W2wrEOqXQDoQyXp4="
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// specEngine answers as the spec's target does in its examples, and fails
// the test unless the wire layer hands it the request the example sends.
type specEngine struct{ t *testing.T }

func (e specEngine) Admit(_ context.Context, inv tasks.Invocation) (tasks.Accepted, error) {
	if inv.Tool != "forecast.get" || inv.APIVersion != "1.4.0" || inv.ManifestHash != specHash || string(inv.Arguments) != `{"city":"Riga"}` || inv.Endpoint != "weather@agents.example" {
		e.t.Errorf("invocation = %+v", inv)
	}
	switch inv.RequestID {
	case "req-91a6d2f49c514f44a2d223f0f97bd9fe":
		if inv.Caller != "planner@agents.example" || inv.Route != "planner@agents.example/worker" || inv.Deadline != "2026-07-27T19:15:00Z" {
			e.t.Errorf("invocation = %+v", inv)
		}
		return tasks.Accepted{TaskID: specTask, RequestID: inv.RequestID, Created: at("2026-07-27T19:14:01Z"), RetainUntil: at("2026-07-28T19:14:01Z")}, nil
	case "req-f83bf930e7ae45e6bddca1afb566df08":
		if inv.Caller != "alice@example.com" || inv.Deadline != "" {
			e.t.Errorf("invocation = %+v", inv)
		}
		return tasks.Accepted{TaskID: "task-c27daf5e3a9b45e086a6616e28139dcb", RequestID: inv.RequestID, Created: at("2026-07-28T10:00:00Z"), RetainUntil: at("2026-07-29T10:00:00Z")}, nil
	}
	return tasks.Accepted{}, tasks.ErrNotFound
}

func (e specEngine) ProvideInput(_ context.Context, in tasks.InputSubmission) (string, int64, error) {
	got := in
	got.Input = nil
	want := tasks.InputSubmission{Caller: "planner@agents.example", Endpoint: "weather@agents.example", TaskID: specTask,
		RequestID: "input-a5128a63d64146d5a6ffac65bb20c348", ExpectedRevision: 3, MediaType: "application/json"}
	if got.Caller != want.Caller || got.Endpoint != want.Endpoint || got.TaskID != want.TaskID || got.RequestID != want.RequestID ||
		got.ExpectedRevision != want.ExpectedRevision || got.MediaType != want.MediaType || string(in.Input) != `{"unit":"C"}` {
		e.t.Errorf("input = %+v", in)
	}
	return in.TaskID, 4, nil
}

func (e specEngine) Cancel(_ context.Context, c tasks.CancelRequest) (string, int64, error) {
	want := tasks.CancelRequest{Caller: "planner@agents.example", Endpoint: "weather@agents.example", TaskID: specTask,
		ExpectedRevision: 4, HasReason: true, Reason: "Trip was cancelled"}
	if c != want {
		e.t.Errorf("cancel = %+v", c)
	}
	return c.TaskID, 5, nil
}

func (e specEngine) State(_ context.Context, caller, endpoint, taskID string) (*tasks.Snapshot, error) {
	if caller != "planner@agents.example" || endpoint != "weather@agents.example" || taskID != specTask {
		e.t.Errorf("state of %s at %s for %s", taskID, endpoint, caller)
	}
	return &tasks.Snapshot{TaskID: taskID, Endpoint: endpoint, APIVersion: "1.4.0", ManifestHash: specHash,
		State: agentproto.StateRunning, Revision: 2, Created: at("2026-07-27T19:14:01Z"), Updated: at("2026-07-27T19:14:03Z"),
		RetainUntil: at("2026-07-28T19:14:01Z")}, nil
}

func (e specEngine) Result(_ context.Context, caller, endpoint, taskID string) (*tasks.TerminalResult, error) {
	if caller != "planner@agents.example" || endpoint != "weather@agents.example" || taskID != specTask {
		e.t.Errorf("result of %s at %s for %s", taskID, endpoint, caller)
	}
	payload := canonicalJSON(e.t, `{"result":{"content":[{"type":"text","text":"Light rain, 18 C"}],"structuredContent":{"summary":"Light rain, 18 C"},"isError":false}}`)
	return &tasks.TerminalResult{TaskID: taskID, State: agentproto.StateCompleted, Revision: 4, Payload: payload}, nil
}

func canonicalJSON(t testing.TB, s string) []byte {
	t.Helper()
	b, _, err := ijson.Canonicalize([]byte(s), ijson.Limits{})
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return b
}

// visibleAll: every endpoint exists and is visible.
type visibleAll struct{}

func (visibleAll) Resolve(_, _ jid.JID) (bool, bool) { return true, true }

func TestGoldenTaskIQs(t *testing.T) {
	for _, ex := range goldentest.Load(t, goldenTasks, 2, 6) {
		t.Run(ex.Name, func(t *testing.T) {
			r := component.NewRouter(jid.MustParse("agents.example"), visibleAll{}, nil)
			(&Handlers{Engine: specEngine{t}}).Register(r)
			got := r.DispatchIQ(t.Context(), goldentest.IQ(ex.Stanzas[0]))
			goldentest.Compare(t, got, ex.Stanzas[1])
		})
	}
}

// TestGoldenEvents: the event each golden message carries, handed to the
// notifier as the engine would, is sent as exactly that message.
func TestGoldenEvents(t *testing.T) {
	for _, ex := range goldentest.Load(t, goldenEvents, 1, 6) {
		t.Run(ex.Name, func(t *testing.T) {
			want := ex.Stanzas[0]
			el := want.Children[0]
			rev, err := strconv.ParseInt(el.AttrValue("revision"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			route := jid.MustParse(want.AttrValue("to"))
			s := &goldentest.Sender{}
			(&Notifier{Sender: s}).Notify(tasks.Event{
				TaskID: el.AttrValue("task-id"), EventID: el.AttrValue("event-id"), Revision: rev, Type: agentproto.EventType(el.AttrValue("type")),
				Endpoint: want.AttrValue("from"), Caller: route.Bare().String(), Route: route.String(),
				Payload: canonicalJSON(t, el.Text),
			})
			sent := s.Take()
			if len(sent) != 1 {
				t.Fatalf("sent %d stanzas", len(sent))
			}
			goldentest.Compare(t, sent[0], want)
		})
	}
}
