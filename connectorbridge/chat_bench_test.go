package connectorbridge

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

// notifyChat signals every message the bridge delivers.
type notifyChat struct{ got chan backendkit.Message }

func (n notifyChat) Send(_ context.Context, m backendkit.Message) error { n.got <- m; return nil }
func (notifyChat) Ack(context.Context, backendkit.Ack) error            { return nil }
func (notifyChat) Activity(context.Context, backendkit.Activity) error  { return nil }

// BenchmarkIMRelay measures one inbound IM message through the bridge
// (chat.message push, durable store, chat.message.ack, delivery to the
// XMPP side's Chat) beside one echo tool call through the same backend and
// connector in the same run (the "echo" baseline: one data-plane round
// trip without a store write). The ratio relay/echo is the cost of the
// durable queue.
func BenchmarkIMRelay(b *testing.B) {
	setup := func(b *testing.B) (*chatEnv, *Backend, notifyChat) {
		e := &chatEnv{env: newEnv(b), host: nil}
		e.db = e.dir + "/chat.db"
		e.openChats()
		e.authForm()
		nc := notifyChat{got: make(chan backendkit.Message, 1024)}
		be := e.start(func(o *Options) {
			o.Inbox, o.Chats = inbox, e.chats
			o.ChatLimits.Burst, o.ChatLimits.PerMinute, o.ChatLimits.MaxBacklog = 1<<20, 1<<20, 1<<20
		})
		be.AttachChat(nc)
		testkit.WaitFor(b, 10*time.Second, "CanConverse", func() bool { return be.CanConverse(e.endpoint) })
		return e, be, nc
	}
	b.Run("relay", func(b *testing.B) {
		e, _, nc := setup(b)
		b.ResetTimer()
		for b.Loop() {
			if e.srv.InjectMessage(connectortest.IMMessage{Conversation: "conv_bench", Text: "hello"}) == "" {
				b.Fatal("no channel")
			}
			select {
			case <-nc.got:
			case <-time.After(10 * time.Second):
				b.Fatal("the message was not relayed")
			}
		}
	})
	b.Run("echo", func(b *testing.B) {
		_, be, _ := setup(b)
		call := tasks.Call{TaskID: "task-bench-000000000000", Tool: "echo", Arguments: json.RawMessage(`{"text":"hello"}`)}
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			r := newRun()
			be.Execute(ctx, call, r)
			if r.Failure != nil || r.Result == nil {
				b.Fatalf("echo failed: %+v", r.Failure)
			}
		}
	})
}
