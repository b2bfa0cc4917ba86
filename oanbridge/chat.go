package oanbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/wire"
	"github.com/agentgw/agentgw/tasks"
)

// chatTool: POST the message; 202 is progress "accepted by OAN"; the
// Gofer's gofer_message completes the task; a gofer_question becomes
// input_required and the answer is POSTed back; no reply within
// ReplyTimeout fails the task (§4's silent failure) — never a resend.
func (b *Backend) chatTool(ctx context.Context, call tasks.Call, run tasks.Run) {
	var a struct {
		GoferID string `json:"gofer_id"`
		Message string `json:"message"`
	}
	json.Unmarshal(call.Arguments, &a)
	gofer, err := b.resolveGofer(ctx, a.GoferID)
	if err != nil {
		var he *HTTPError
		if errors.Is(err, ErrRevoked) || errors.As(err, &he) || errors.Is(err, ErrRedirect) {
			b.failAPI(ctx, run, "listing the Gofers", err)
			return
		}
		b.fail(run, tasks.Failure{Code: agentproto.CodeOANRefused, Message: err.Error()})
		return
	}
	unlock, err := b.lockGofer(ctx, gofer)
	if err != nil {
		return
	}
	defer unlock()
	w := &waiter{gofer: gofer, ch: make(chan *wire.Envelope, 16)}
	b.mu.Lock()
	b.waiters[gofer] = w
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if b.waiters[gofer] == w {
			delete(b.waiters, gofer)
		}
		b.mu.Unlock()
	}()
	rel, _ := seg("gofers", gofer, "chat", "messages")
	if _, err := b.api.do(ctx, http.MethodPost, rel, nil, map[string]any{"content": a.Message}, nil); err != nil {
		b.failAPI(ctx, run, "sending the chat message", err)
		return
	}
	run.Progress(tasks.Progress{Stage: "accepted", Message: "accepted by OAN; waiting for the Gofer's reply"})
	timer := time.NewTimer(b.o.ReplyTimeout)
	defer timer.Stop()
	for {
		select {
		case env := <-w.ch:
			switch env.Type {
			case wire.TypeGoferMessage:
				if _, ok := env.Payload["content"].(string); !ok {
					// A reply the bridge cannot read is not an empty answer.
					b.fail(run, tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "the Gofer's reply has no text content"})
					return
				}
				out := map[string]any{
					"gofer_id": gofer, "message_id": wire.Str(env.Payload, "messageId", wire.MaxIDBytes),
					"content": wire.Str(env.Payload, "content", maxShown), "source": env.Source, "trusted": wire.Trusted(env.Source),
				}
				b.complete(run, out)
				return
			case wire.TypeGoferQuestion:
				if !b.askQuestion(ctx, run, env) {
					return
				}
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				timer.Reset(b.o.ReplyTimeout)
			}
		case <-timer.C:
			b.log.Warn("no Gofer reply within the reply timeout; the task fails and the message is not re-sent", "gofer", gofer, "timeout", b.o.ReplyTimeout)
			b.fail(run, tasks.Failure{Code: agentproto.CodeOANNoReply,
				Message: fmt.Sprintf("OAN accepted the message but the Gofer did not reply within %s (protocol v1 has no failure signal); the message was not re-sent", b.o.ReplyTimeout)})
			return
		case <-run.CancelRequested():
			run.Cancelled("cancelled by the caller; the message was already accepted by OAN")
			return
		case <-ctx.Done():
			return
		}
	}
}

// askQuestion puts a Gofer question to the chat's caller (the owner) and
// POSTs the answer once. It reports false when the task ended.
func (b *Backend) askQuestion(ctx context.Context, run tasks.Run, env *wire.Envelope) bool {
	b.mu.Lock()
	b.held[env.EventID] = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.held, env.EventID)
		b.mu.Unlock()
	}()
	it, ok, err := b.st.Item(ctx, b.o.Endpoint, env.EventID)
	if err != nil || !ok {
		b.fail(run, tasks.Failure{Code: agentproto.CodeInternalError, Message: "the Gofer question is not in the store"})
		return false
	}
	q := questionOf(env)
	ans, err := run.RequestInput(ctx, tasks.InputRequest{Question: q.text, Schema: q.schema})
	if err != nil {
		// Expired, cancelled or settled: the question stays pending for
		// the escalations tool; nothing is sent.
		b.noAnswer(ctx, run, err)
		return false
	}
	content, err := q.reply(ans)
	if err != nil {
		b.fail(run, tasks.Failure{Code: agentproto.CodeInternalError, Message: "the answer cannot be sent: " + err.Error()})
		return false
	}
	if !b.decide(ctx, it, string(ans), map[string]any{"content": content}) {
		b.fail(run, tasks.Failure{Code: agentproto.CodeOANRefused, Message: "the answer could not be delivered to OAN (or the question was answered elsewhere)"})
		return false
	}
	run.Progress(tasks.Progress{Stage: "answered", Message: "answer sent to the Gofer; waiting for its reply"})
	return true
}

// decide moves an item pending→posting (the one winner), POSTs body, and
// records posted. It reports whether OAN took it.
func (b *Backend) decide(ctx context.Context, it oandb.Item, decision string, body any) bool {
	ok, err := b.st.Transition(ctx, b.o.Endpoint, it.EventID, []string{oandb.StatePending, oandb.StateDeferred}, oandb.StatePosting, decision)
	if err != nil || !ok {
		return false
	}
	perr := b.postReply(ctx, it, body)
	var he *HTTPError
	switch {
	case perr == nil:
		b.st.Transition(ctx, b.o.Endpoint, it.EventID, []string{oandb.StatePosting}, oandb.StatePosted, "")
		b.kick()
		return true
	case errors.As(perr, &he) && he.Status >= 400 && he.Status < 500:
		// Refused (already decided elsewhere, gone): closed, not retried.
		b.st.Transition(ctx, b.o.Endpoint, it.EventID, []string{oandb.StatePosting}, oandb.StateClosed, "")
		b.log.Warn("OAN refused a decision", "event", it.EventID, "status", he.Status)
	default:
		// Unknown outcome: stays posting; reconciled with
		// /events/unresolved on the next session, never re-sent blindly.
		b.log.Warn("a decision's POST failed with an unknown outcome; reconciled at the next connection", "event", it.EventID, "error", perr)
	}
	b.kick()
	return false
}

// question is a Gofer question or an escalation as an input request.
type question struct {
	text   string
	schema json.RawMessage
	// reply turns the caller's answer into the content POSTed back.
	reply func(ans json.RawMessage) (string, error)
}

// answerSchema wraps one property schema as {"answer": …}.
func answerSchema(prop string) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"answer":` + prop + `},"required":["answer"],"additionalProperties":false}`)
}

func answerOf(ans json.RawMessage) (any, error) {
	var m map[string]any
	if err := json.Unmarshal(ans, &m); err != nil {
		return nil, errors.New("the answer is not an object")
	}
	v, ok := m["answer"]
	if !ok {
		return nil, errors.New("the answer has no answer member")
	}
	return v, nil
}

// questionOf derives the input request from responseConstraints:
// boolean, enum, json_schema (compiled under the gateway's rules: no
// remote $ref, bounded) and maxLength; freestyle otherwise.
func questionOf(env *wire.Envelope) question {
	text := "Your Gofer " + env.GoferID + " asks: " + wire.Str(env.Payload, "content", maxShown)
	c := env.Constraints
	maxLen := 4000
	if c != nil && c.MaxLength > 0 {
		maxLen = c.MaxLength
	}
	freestyle := func(note string) question {
		return question{
			text:   text + note,
			schema: answerSchema(fmt.Sprintf(`{"type":"string","minLength":1,"maxLength":%d}`, maxLen)),
			reply: func(ans json.RawMessage) (string, error) {
				v, err := answerOf(ans)
				s, _ := v.(string)
				return s, err
			},
		}
	}
	if env.ConstraintsErr != nil {
		return freestyle("\n(The Gofer's reply constraints could not be read: " + env.ConstraintsErr.Error() + ". Answer in text.)")
	}
	if c == nil {
		return freestyle("")
	}
	switch c.Format {
	case "boolean":
		return question{text: text + "\n(Answer yes or no.)", schema: answerSchema(`{"type":"boolean"}`),
			reply: func(ans json.RawMessage) (string, error) {
				v, err := answerOf(ans)
				if yes, _ := v.(bool); yes {
					return "yes", err
				}
				return "no", err
			}}
	case "enum":
		opts, _ := ijson.MarshalNoEscape(c.EnumOptions)
		return question{text: text + "\n(Choose one of the options.)", schema: answerSchema(`{"type":"string","enum":` + string(opts) + `}`),
			reply: func(ans json.RawMessage) (string, error) {
				v, err := answerOf(ans)
				s, _ := v.(string)
				return s, err
			}}
	case "json_schema":
		if _, err := schema.Compile(c.JSONSchema); err != nil {
			return freestyle("\n(The Gofer asked for a structured answer whose schema the gateway refuses: " + safeSchemaErr(err) + ". Answer in text.)")
		}
		return question{text: text + "\n(Answer with a value matching the Gofer's schema.)", schema: c.JSONSchema,
			reply: func(ans json.RawMessage) (string, error) {
				s := string(ans)
				if len([]rune(s)) > maxLen {
					return "", errors.New("the answer is longer than the Gofer allows")
				}
				return s, nil
			}}
	}
	return freestyle("")
}

func safeSchemaErr(err error) string {
	var se *schema.Error
	if errors.As(err, &se) {
		return wire.Truncate(se.Error(), 200)
	}
	return "it does not compile"
}
