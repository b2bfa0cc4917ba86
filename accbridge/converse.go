package accbridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

// maxChatBody bounds a chat goal (the run tool's goal limit).
const maxChatBody = 8000

var _ backendkit.ChatAttacher = (*Agent)(nil)

// AttachChat is called by the gateway before the backend starts.
func (a *Agent) AttachChat(c backendkit.Chat) {
	a.mu.Lock()
	a.chat = c
	a.mu.Unlock()
}

// CanConverse: chat works while the connector is connected and the agent
// declared.
func (a *Agent) CanConverse(endpoint string) bool {
	a.mu.Lock()
	ok := a.chat != nil && a.declared != nil
	a.mu.Unlock()
	if !ok {
		return false
	}
	id := a.s.connectorID(a.connector)
	return id != "" && a.s.session(id) != nil
}

// Converse starts a run whose goal is the message; the completion comes
// back as the reply. A turn is taken once (by sender and id).
func (a *Agent) Converse(ctx context.Context, turn backendkit.Turn) error {
	if !a.CanConverse(turn.Endpoint) {
		return backendkit.ErrChatUnavailable
	}
	body := strings.TrimSpace(turn.Body)
	if body == "" {
		return errors.New("send the goal as the message text")
	}
	if len(body) > maxChatBody {
		return backendkit.ErrChatTooLarge
	}
	key := "chat:" + bareOf(turn.From) + ":" + turn.ID
	// A turn seen before (a resend, a duplicate) started its run already.
	if _, seen, err := a.s.o.Store.RunByTask(ctx, key); err != nil {
		return backendkit.ErrChatUnavailable
	} else if seen {
		return nil
	}
	a.mu.Lock()
	if a.chats[key] {
		a.mu.Unlock()
		return nil
	}
	if len(a.chats) >= 64 {
		a.mu.Unlock()
		return backendkit.ErrChatRateLimited
	}
	a.chats[key] = true
	chat := a.chat
	a.mu.Unlock()
	cs := &chatSink{a: a, chat: chat, turn: turn, cancel: make(chan struct{})}
	go func() {
		defer func() {
			a.mu.Lock()
			delete(a.chats, key)
			a.mu.Unlock()
		}()
		a.execute(a.s.runContext(), key, runRequest{Goal: body}, time.Now().Add(time.Hour), cs)
	}()
	return nil
}

func bareOf(j string) string {
	if i := strings.IndexByte(j, '/'); i >= 0 {
		return j[:i]
	}
	return j
}

// chatSink reports a chat run as messages: the completion is the reply,
// a failure a short notice. Progress is not chatted (chat states instead).
type chatSink struct {
	a      *Agent
	chat   backendkit.Chat
	turn   backendkit.Turn
	cancel chan struct{}
}

func (c *chatSink) caller() string                   { return bareOf(c.turn.From) }
func (c *chatSink) cancelRequested() <-chan struct{} { return c.cancel }

func (c *chatSink) reply(body string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.chat.Activity(ctx, backendkit.Activity{Endpoint: c.turn.Endpoint, To: c.turn.From, State: backendkit.ChatActive})
	if err := c.chat.Send(ctx, backendkit.Message{Endpoint: c.turn.Endpoint, To: c.turn.From, Thread: c.turn.Thread,
		ReplyTo: c.turn.ID, Body: body, Store: true}); err != nil {
		c.a.s.log.Warn("acc: chat reply not sent", "endpoint", c.turn.Endpoint, "error", err)
	}
}

func (c *chatSink) progress(p tasks.Progress) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.chat.Activity(ctx, backendkit.Activity{Endpoint: c.turn.Endpoint, To: c.turn.From, State: backendkit.ChatComposing})
}

func (c *chatSink) complete(payload json.RawMessage) {
	r, err := completionResult(c.a.s.o.Redactor, payload)
	if err != nil {
		c.reply("The run completed, but its result cannot be shown (" + agentproto.CodeInvalidOutput + "): it is not valid JSON once secrets are redacted.")
		return
	}
	c.reply(completionText(r.StructuredContent))
}

func (c *chatSink) fail(f tasks.Failure) {
	c.reply("The run failed (" + f.Code + "): " + f.Message)
}

func (c *chatSink) cancelled(reason string) { c.reply("The run was cancelled: " + reason) }

// approve: a chat run has no form to answer; approvals are denied and the
// sender is told to use the run tool (docs/acc-bridge.md).
func (c *chatSink) approve(ctx context.Context, ap approval) (bool, string, error) {
	c.reply("The agent asked for approval of a " + ap.risk + " risk action, which a chat cannot give; it was denied. Use the run tool to approve actions.")
	return false, "approvals are not available in chat", nil
}
