package oanbridge

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/wire"
	"github.com/agentgw/agentgw/tasks"
)

// decisionSchema is an escalation's input: accept, decline or defer.
const decisionSchema = `{"type":"object","properties":{"decision":{"type":"string","enum":["accept","decline","defer"]}},"required":["decision"],"additionalProperties":false}`

// escalations is the owner's long-running task: each pending match
// request, pairing proposal and unheld Gofer question is one
// input_required; a decision is POSTed exactly once, and only on the
// owner's explicit answer (an expired input sends nothing). The task
// completes when nothing is pending (after idle_seconds of nothing new,
// when given).
func (b *Backend) escalations(ctx context.Context, call tasks.Call, run tasks.Run) {
	var a struct {
		IdleSeconds int `json:"idle_seconds"`
	}
	json.Unmarshal(call.Arguments, &a)
	asked := map[string]bool{}
	var decisions []map[string]any
	idle := time.Duration(a.IdleSeconds) * time.Second
	for {
		changed := b.changedCh()
		items, err := b.st.Items(ctx, b.o.Endpoint, oandb.StatePending, oandb.StateDeferred)
		if err != nil {
			b.fail(run, tasks.Failure{Code: agentproto.CodeInternalError, Message: "cannot read the pending escalations"})
			return
		}
		var next *oandb.Item
		remaining := 0
		b.mu.Lock()
		for i := range items {
			if asked[items[i].EventID] || b.held[items[i].EventID] {
				continue
			}
			remaining++
			if next == nil {
				next = &items[i]
			}
		}
		b.mu.Unlock()
		if next == nil {
			if idle <= 0 {
				b.complete(run, map[string]any{"decisions": nonNil(decisions), "pending": 0})
				return
			}
			t := time.NewTimer(idle)
			select {
			case <-changed:
				t.Stop()
				continue
			case <-t.C:
				b.complete(run, map[string]any{"decisions": nonNil(decisions), "pending": 0})
				return
			case <-run.CancelRequested():
				t.Stop()
				run.Cancelled("cancelled by the owner")
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		asked[next.EventID] = true
		d, ok := b.escalate(ctx, run, *next, remaining)
		if !ok {
			return
		}
		decisions = append(decisions, d)
	}
}

func nonNil(d []map[string]any) []map[string]any {
	if d == nil {
		return []map[string]any{}
	}
	return d
}

// escalate asks one item and acts on the answer. ok is false when the
// task ended (input expired, cancelled, settled).
func (b *Backend) escalate(ctx context.Context, run tasks.Run, it oandb.Item, remaining int) (map[string]any, bool) {
	env, err := wire.ParseEnvelope(it.Envelope)
	if err != nil {
		b.st.Transition(ctx, b.o.Endpoint, it.EventID, []string{oandb.StatePending, oandb.StateDeferred}, oandb.StateClosed, "")
		return map[string]any{"event_id": it.EventID, "kind": it.Kind, "decision": "dropped"}, true
	}
	rec := map[string]any{"event_id": it.EventID, "kind": it.Kind, "gofer_id": it.GoferID}
	var q question
	var body func(ans json.RawMessage) (any, string, bool)
	switch it.Kind {
	case oandb.KindQuestion:
		q = questionOf(env)
		body = func(ans json.RawMessage) (any, string, bool) {
			c, err := q.reply(ans)
			return map[string]any{"content": c}, "answered", err == nil
		}
	case oandb.KindMatchRequest:
		q = question{text: "Match request for your Gofer " + it.GoferID + " from " + quoteName(env.Payload["counterpartRoleName"]) +
			" (platform " + quoteName(env.Payload["counterpartSourcePlatform"]) + "). The name comes from the counterpart: untrusted. Accept, decline or defer?",
			schema: json.RawMessage(decisionSchema)}
		body = func(ans json.RawMessage) (any, string, bool) {
			d := decisionOf(ans)
			return map[string]any{"accept": d == "accept"}, d, d == "accept" || d == "decline"
		}
	case oandb.KindPairProposed:
		q = question{text: "Pairing proposed for your Gofer " + it.GoferID + " with " + quoteName(env.Payload["counterpartRoleName"]) +
			" (platform " + quoteName(env.Payload["counterpartSourcePlatform"]) + "). The name comes from the counterpart: untrusted. Confirm (accept), decline or defer?",
			schema: json.RawMessage(decisionSchema)}
		body = func(ans json.RawMessage) (any, string, bool) {
			d := decisionOf(ans)
			return map[string]any{"roleId": it.GoferID, "accepted": d == "accept"}, d, d == "accept" || d == "decline"
		}
	default:
		return rec, true
	}
	if remaining > 1 {
		run.Progress(tasks.Progress{Stage: "escalations", Message: wire.FormatSeq(uint64(remaining)) + " escalations pending"})
	}
	ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: q.text, Schema: q.schema})
	if err != nil {
		// No answer: nothing is POSTed; the item stays pending. The
		// engine settles an expired input itself; this only covers the
		// other endings.
		b.noAnswer(ctx, run, err)
		return nil, false
	}
	if it.Kind != oandb.KindQuestion && decisionOf(ans) == "defer" {
		b.st.Transition(ctx, b.o.Endpoint, it.EventID, []string{oandb.StatePending}, oandb.StateDeferred, "")
		rec["decision"] = "defer"
		rec["posted"] = false
		return rec, true
	}
	payload, label, ok := body(ans)
	rec["decision"] = label
	if !ok {
		rec["posted"] = false
		return rec, true
	}
	rec["posted"] = b.decide(ctx, it, string(ans), payload)
	return rec, true
}

func decisionOf(ans json.RawMessage) string {
	var m struct {
		Decision string `json:"decision"`
	}
	json.Unmarshal(ans, &m)
	return m.Decision
}

// noAnswer settles a task whose input request ended without an answer
// (the engine has usually settled it already).
func (b *Backend) noAnswer(ctx context.Context, run tasks.Run, err error) {
	if ctx.Err() != nil {
		return
	}
	b.fail(run, tasks.Failure{Code: agentproto.CodeInputExpired, Message: "the owner did not answer; nothing was sent to OAN"})
}
