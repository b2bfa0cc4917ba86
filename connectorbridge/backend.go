package connectorbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
)

// Backend is a connector-backed agent: a supervised Client, the manifest
// projection and tool execution. It implements tasks.Backend.
type Backend struct {
	o   Options
	c   *Client
	log interface {
		Info(string, ...any)
		Warn(string, ...any)
		Debug(string, ...any)
		Error(string, ...any)
	}

	kick  chan struct{}
	pub   *backendkit.Manifests
	avail *backendkit.Presence
	// projMu serialises projection and publishing.
	projMu sync.Mutex

	chat *chatSide // IM Profile v2; nil without an inbox

	mu        sync.Mutex
	started   bool
	lastTools []string
}

var (
	_ tasks.Backend        = (*Backend)(nil)
	_ backendkit.Readiness = (*Backend)(nil)
)

// New validates the options and returns a Backend; Start connects it.
func New(o Options) (*Backend, error) {
	c, err := NewClient(o)
	if err != nil {
		return nil, err
	}
	c.supervised = true
	b := &Backend{
		o: c.o, c: c, log: c.log, kick: make(chan struct{}, 1),
		pub:   backendkit.NewManifests(c.o.Publisher),
		avail: backendkit.NewPresence(c.o.Endpoint, c.o.Availability),
	}
	if b.chat = newChatSide(b); b.chat != nil {
		c.onChat = c.chatPush(b.chat)
	}
	c.onChange = func() {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	return b, nil
}

// Client returns the Backend's connector client.
func (b *Backend) Client() *Client { return b.c }

// Features: progress is forwarded from tool.progress.push; cancellation is
// advisory (the protocol has no tool cancel, so the gateway settles
// cancelled and discards the late ack); there is no interactive input.
func (b *Backend) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true}
}

// Start discovers the connector, connects it and supervises it until ctx
// ends or Close is called: health probes, reconnection with the last
// connector_id, binding changes made by `agentgw connector auth`, and a new
// manifest version whenever the Card, Skill or Descriptor changes. It then
// sends channel.close, closes the data plane and returns nil. Like the MCP
// bridge, it blocks; it fails early only for what retrying cannot fix (a
// second agent for the same connector_card_id) or when called twice.
func (b *Backend) Start(ctx context.Context) error {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return errors.New("connectorbridge: Start called twice")
	}
	b.started = true
	b.mu.Unlock()
	b.setAvailable(false)
	if err := b.c.discover(ctx); err != nil {
		if b.c.fatalErr() != nil {
			return err
		}
		b.log.Warn("connector discovery failed; will retry at the health interval", "error", err)
	} else {
		b.c.checkHealth(ctx)
	}
	loop := b.c.start(ctx)
	go b.runProjector(loop)
	if b.chat != nil {
		go b.chat.run(loop)
	}
	<-loop.Done()
	b.c.Close()
	b.markDown()
	return nil
}

// Close stops the backend, closing the channel route and the data plane.
func (b *Backend) Close() error {
	err := b.c.Close()
	b.markDown()
	return err
}

// markDown marks the agent unavailable once the client is closed. It takes
// projMu: a projection in flight may have read "up" before the close, and
// must not publish it after this. Later projections see the detached data
// plane and compute "down" themselves.
func (b *Backend) markDown() {
	b.projMu.Lock()
	defer b.projMu.Unlock()
	b.setAvailable(false)
}

func (c *Client) fatalErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal
}

// waitFor blocks until cond (evaluated under mu) holds or ctx ends.
func (c *Client) waitFor(ctx context.Context, cond func() bool) bool {
	for {
		c.mu.Lock()
		ok := cond()
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (b *Backend) runProjector(ctx context.Context) {
	retry := make(chan struct{}, 1)
	b.project(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-retry:
		}
		if !b.project(ctx) {
			go func() {
				if b.c.sleep(ctx, b.o.HealthInterval) {
					select {
					case retry <- struct{}{}:
					default:
					}
				}
			}()
		}
	}
}

// project recomputes availability and the manifest and publishes a new
// version when it changed. It reports false when publishing failed.
func (b *Backend) project(ctx context.Context) bool {
	b.projMu.Lock()
	defer b.projMu.Unlock()
	c := b.c
	c.mu.Lock()
	card, skill, desc := c.card, c.skill, c.projDesc
	// Down when the connector or its data plane is, and when a signed-in
	// channel reports its target offline or in error.
	up := c.card != nil && c.fatal == nil && c.health.usable() && c.sess != nil &&
		!(desc.Authenticated() && !desc.Active())
	opened := c.everOpened
	c.mu.Unlock()
	b.setAvailable(up)
	// Publish only once a channel has been opened: before that the tool
	// availability is unknown, and publishing a tool-less version while
	// the connector is merely unreachable would withdraw the tools.
	if card == nil || !opened {
		return true
	}
	p, err := project(&b.o, card, skill, desc)
	if err != nil {
		b.log.Error("cannot project the connector into a manifest", "error", err)
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, b.o.RequestTimeout)
	defer cancel()
	published, version, _, err := b.pub.Publish(pctx, p.version, p.manifest)
	if err != nil {
		b.log.Warn("publishing the connector agent manifest failed; will retry", "version", p.version, "error", err)
		return false
	}
	if !published {
		return true
	}
	b.mu.Lock()
	b.lastTools = p.tools
	b.mu.Unlock()
	b.log.Info("published connector agent version", "version", version, "tools", len(p.tools))
	return true
}

// Published returns the last published version, its hash and its tools.
func (b *Backend) Published() (version, hash string, tools []string) {
	version, hash = b.pub.Current()
	b.mu.Lock()
	defer b.mu.Unlock()
	return version, hash, append([]string(nil), b.lastTools...)
}

// Manifest returns the last published manifest JSON.
func (b *Backend) Manifest() []byte { return append([]byte(nil), b.pub.Last()...) }

// Ready implements backendkit.Readiness: a manifest version is published,
// which happens only once a channel has been opened.
func (b *Backend) Ready() bool { return b.pub.Ready() }

func (b *Backend) setAvailable(up bool) { b.avail.Set(up) }

// Health is the live check for `agentgw doctor`: Card, /health and, when
// the backend runs, the data plane and the channel binding. The error
// lists every problem found, without secrets.
func (b *Backend) Health(ctx context.Context) error {
	c := b.c
	var errs []error
	card, _, err := c.control().FetchCard(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("card: %w", err))
	}
	h, err := c.control().ProbeHealth(ctx)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("health: %w", err))
	case card != nil:
		if h.ConnectorCardID != "" && h.ConnectorCardID != card.ConnectorCardID {
			errs = append(errs, errors.New("health: /health reports a different connector_card_id than the Card"))
		}
		if h.ProtocolVersion != "" {
			if err := wire.CheckProtocol("health", h.ProtocolVersion); err != nil {
				errs = append(errs, err)
			} else if !sameProtocol(h.ProtocolVersion, card.ProtocolVersion) {
				errs = append(errs, errors.New("health: protocol_version differs from the Card"))
			}
		}
	}
	b.mu.Lock()
	started := b.started
	b.mu.Unlock()
	c.mu.Lock()
	fatal, sess, desc, dataErr, state := c.fatal, c.sess, c.desc, c.dataErr, c.health
	bound := c.bind
	c.mu.Unlock()
	if fatal != nil {
		errs = append(errs, fatal)
	}
	if started {
		if !state.usable() {
			errs = append(errs, fmt.Errorf("connector state %s", state))
		}
		if sess == nil {
			msg := "data plane: not connected"
			if dataErr != "" {
				msg += " (" + dataErr + ")"
			}
			errs = append(errs, errors.New(msg))
		} else if !desc.Authenticated() {
			errs = append(errs, errors.New("channel: not authenticated; run `agentgw connector auth`"))
		}
	} else if card != nil && c.st != nil {
		if b, err := c.st.load(ctx, card.ConnectorCardID); err == nil && !b.Authenticated {
			errs = append(errs, errors.New("channel: no authenticated binding; run `agentgw connector auth`"))
		}
	} else if !bound.Authenticated && card != nil && len(card.AuthFlows) > 0 {
		errs = append(errs, errors.New("channel: no authenticated binding"))
	}
	return errors.Join(errs...)
}

// Execute runs one tool call as tool.invoke on the bound channel (§8.18).
// It never re-sends a tool.invoke: a lost connection fails the task.
func (b *Backend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	var (
		s     *transport.Session
		reqID string
		pend  *transport.Pending
	)
	for attempt := 0; ; attempt++ {
		var chID string
		var fail *tasks.Failure
		s, chID, fail = b.c.waitReady(ctx, call.Tool, b.o.ReadyWait)
		if fail != nil {
			if ctx.Err() == nil {
				b.settleFail(run, *fail)
			}
			return
		}
		args, err := injectChannel(call.Arguments, chID)
		if err != nil {
			b.settleFail(run, tasks.Failure{Code: agentproto.CodeInternalError, Message: "the arguments are not a JSON object"})
			return
		}
		pend = &transport.Pending{Progress: make(chan *wire.Packet, 32)}
		// The request id doubles as context.tool_call_id.
		reqID = ids.New("req_")
		payload := map[string]any{
			"tool_id":   call.Tool,
			"arguments": args,
			"context":   map[string]string{"session_id": call.TaskID, "tool_call_id": reqID},
		}
		err = s.SendWithID(reqID, wire.TypeToolInvoke, chID, payload, pend)
		if err == nil {
			break
		}
		// Only a session that ended before anything was written may be
		// replaced; a failed write may have reached the connector.
		if !errors.Is(err, transport.ErrNotSent) || attempt >= 2 {
			b.settleFail(run, unavailable("the connector data plane closed while the call was being sent; it may or may not have run"))
			return
		}
	}
	var deadline <-chan struct{}
	if !call.Deadline.IsZero() {
		ch := make(chan struct{})
		t := b.c.clock.AfterFunc(call.Deadline.Sub(b.c.clock.Now()), func() { close(ch) })
		defer t.Stop()
		deadline = ch
	}
	for {
		select {
		case p := <-pend.Progress:
			if err := run.Progress(b.progressOf(p)); errors.Is(err, tasks.ErrSettled) {
				s.Abandon(reqID)
				return
			}
		case ack := <-pend.Ack:
			b.settle(call, run, ack)
			return
		case <-s.Done():
			select {
			case ack := <-pend.Ack:
				b.settle(call, run, ack)
				return
			default:
			}
			b.log.Warn("connector data plane lost during a tool call; failing it (tool.invoke is never re-sent)",
				"task", call.TaskID, "tool", call.Tool)
			b.settleFail(run, unavailable("the connector connection was lost during the call; it may or may not have run"))
			return
		case <-run.CancelRequested():
			s.Abandon(reqID)
			if err := run.Cancelled("cancelled by the caller; the connector has no tool cancellation, so its late answer is discarded"); err != nil && !errors.Is(err, tasks.ErrSettled) {
				b.log.Warn("cannot settle a cancelled task", "task", call.TaskID, "error", err)
			}
			return
		case <-deadline:
			s.Abandon(reqID)
			b.settleFail(run, tasks.Failure{Code: agentproto.CodeDeadlineExpired, Message: "the deadline passed before the connector answered"})
			return
		case <-ctx.Done():
			s.Abandon(reqID)
			return
		}
	}
}

func unavailable(msg string) tasks.Failure {
	return tasks.Failure{Code: agentproto.CodeUnavailable, Message: msg, Retryable: true}
}

func (b *Backend) settleFail(run tasks.Run, f tasks.Failure) {
	if err := run.Fail(f); err != nil && !errors.Is(err, tasks.ErrSettled) {
		b.log.Warn("cannot settle a failed task", "error", err)
	}
}

// settle turns tool.invoke.ack (or an error packet) into the task outcome.
func (b *Backend) settle(call tasks.Call, run tasks.Run, ack *wire.Packet) {
	if ack.Type == wire.TypeError || ack.Error != nil {
		code := "tool_invoke_failed"
		if ack.Error != nil {
			code = wire.SafeCode(ack.Error.Code)
		}
		b.log.Info("connector tool call failed", "task", call.TaskID, "tool", call.Tool, "code", code, "packet", ack.Type)
		b.settleFail(run, tasks.Failure{Code: agentproto.XAgentCode(code), Message: "the connector reported " + code})
		return
	}
	var pl struct {
		ToolID string          `json:"tool_id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(ack.Payload, &pl); err != nil {
		b.settleFail(run, tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "tool.invoke.ack payload is not a valid object"})
		return
	}
	if pl.ToolID != "" && pl.ToolID != call.Tool {
		b.settleFail(run, tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "tool.invoke.ack names a different tool"})
		return
	}
	result := pl.Result
	if len(result) == 0 || string(result) == "null" {
		result = json.RawMessage(`{}`)
	}
	clean, changed, err := b.c.red.ScrubJSON(result)
	if err != nil {
		b.settleFail(run, tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "tool.invoke.ack result is not valid JSON"})
		return
	}
	if changed {
		b.log.Warn("connector tool result contained the system API key; redacted", "task", call.TaskID, "tool", call.Tool)
	}
	text, _ := marshalNoEscape(string(clean))
	content := json.RawMessage(`[{"type":"text","text":` + string(text) + `}]`)
	r := tasks.ToolResult{Content: content}
	if len(clean) > 0 && clean[0] == '{' {
		r.StructuredContent = clean
	}
	if err := run.Complete(r); err != nil && !errors.Is(err, tasks.ErrSettled) {
		b.log.Warn("cannot settle a completed task", "task", call.TaskID, "error", err)
	}
}

// progressOf maps tool.progress.push; progress is a fraction in [0,1].
func (b *Backend) progressOf(p *wire.Packet) tasks.Progress {
	var pl struct {
		Status   string   `json:"status"`
		Message  string   `json:"message"`
		Progress *float64 `json:"progress"`
	}
	json.Unmarshal(p.Payload, &pl)
	out := tasks.Progress{
		Stage:   displayText(b.c.red, pl.Status, 64),
		Message: displayText(b.c.red, pl.Message, 512),
	}
	if pl.Progress != nil && *pl.Progress >= 0 && *pl.Progress <= 1 {
		pct := *pl.Progress * 100
		out.Percent = &pct
	}
	return out
}

// waitReady waits up to wait for a live session with the tool available on
// an active, authenticated channel.
func (c *Client) waitReady(ctx context.Context, tool string, wait time.Duration) (*transport.Session, string, *tasks.Failure) {
	timeout := make(chan struct{})
	t := c.clock.AfterFunc(wait, func() { close(timeout) })
	defer t.Stop()
	for {
		c.mu.Lock()
		s, chID, desc, card, state, ch := c.sess, c.chanID, c.desc, c.card, c.health, c.changed
		c.mu.Unlock()
		var fail *tasks.Failure
		switch {
		case card == nil || s == nil || !s.Alive() || !state.usable():
			f := unavailable("the connector is not reachable")
			fail = &f
		case chID == "" || !desc.Authenticated():
			f := unavailable("the connector channel is not authenticated")
			fail = &f
		case !desc.Active():
			f := unavailable("the connector channel is " + desc.Connection.Status)
			fail = &f
		default:
			if _, ok := card.Tool(tool); !ok || !desc.AvailableTools()[tool] {
				return nil, "", &tasks.Failure{Code: agentproto.XAgentCode(wire.CodeChannelUnavailable),
					Message: "the tool is not available on the connector channel", Retryable: true}
			}
			return s, chID, nil
		}
		select {
		case <-ch:
		case <-timeout:
			return nil, "", fail
		case <-ctx.Done():
			return nil, "", fail
		}
	}
}
