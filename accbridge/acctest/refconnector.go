// Package acctest is an independent reference connector of the
// agent-control-center Connector API v1, written from the seed
// (seeds/002_*.txt) and shared/references/acc-notes.md only: it does not
// import accbridge. It dials the control center over WSS with its client
// certificate and bearer token, registers, heartbeats, declares its
// agents and runs scripted runs; the goal's first word picks the script:
//
//	echo TEXT            run_accepted, progress 50 %, completion {"summary": TEXT}
//	events               thinking, tool_call, tool_result, warning, progress, completion
//	approve RISK ACTION  approval_request; completion {"approved": …} once answered
//	hang                 run_accepted only; honours cancel_run
//	ignore-cancel        run_accepted only; ignores cancel_run
//	error CODE           an error frame for every create_run of the run
//	error-once CODE      an error frame for the first create_run, then echo
//	busy-once            error 4005 for the first create_run, then echo
//	flood N              N progress events, then completion
//	forge                a forged approval_granted, then completion
//	leak-token           its token and client key in a warning, a tool result and the completion
//	stop-heartbeats      run_accepted, and no heartbeat from then on
//	late-cancel N        run_accepted; answers cancel_run only N seconds later
//	quiet-release N      run_accepted; frees the agent N seconds after cancel_run, never confirming it
//
// A cancel_run for a run it does not have (it restarted) is answered
// run_cancelled at once. With Options.OneRunPerAgent it keeps acc-notes'
// "one active run per agent": a create_run for an agent whose earlier run
// has not ended (completion, or run_cancelled sent) is answered error
// 4005 (seed: "Agent busy"). Every message it receives is printed as one JSON line {"got": type, …}
// on Log, so tests can see what the control center sent.
package acctest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Agent is one declared agent.
type Agent struct {
	AgentID  string   `json:"agent_id"`
	Runtime  string   `json:"runtime"`
	Model    string   `json:"model"`
	Tools    []string `json:"tools"`
	MaxTurns int      `json:"max_turns"`
	Supports []string `json:"supports"`
}

// Options configure the reference connector.
type Options struct {
	Dir       string // the enrollment directory (ca.crt, client.crt, client.key, token.jwt, connector.json)
	URL       string // overrides connector.json's url
	Heartbeat time.Duration
	Agents    []Agent
	Log       io.Writer
	// ConnectorID overrides connector.json's (to test a mismatch).
	ConnectorID string
	// OneRunPerAgent answers 4005 to a create_run for a busy agent.
	OneRunPerAgent bool
}

// Connector is one connection's state.
type Connector struct {
	o       Options
	id      string
	ws      *websocket.Conn
	wmu     sync.Mutex
	logMu   sync.Mutex
	noBeats atomic.Bool

	mu       sync.Mutex
	attempts map[string]int           // run_id → create_run count
	cancel   map[string]chan struct{} // run_id → closed on cancel_run
	approval map[string]chan map[string]any
	active   map[string]string // agent_id → run_id holding it (OneRunPerAgent)
}

type enrollment struct {
	ConnectorID string `json:"connector_id"`
	URL         string `json:"url"`
}

// Dial connects, registers and declares the agents.
func Dial(ctx context.Context, o Options) (*Connector, error) {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	var en enrollment
	data, err := os.ReadFile(filepath.Join(o.Dir, "connector.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &en); err != nil {
		return nil, err
	}
	if o.URL != "" {
		en.URL = o.URL
	}
	if o.ConnectorID != "" {
		en.ConnectorID = o.ConnectorID
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(o.Dir, "client.crt"), filepath.Join(o.Dir, "client.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(o.Dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tok, err := os.ReadFile(filepath.Join(o.Dir, "token.jwt"))
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS13, RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	ws, _, err := websocket.Dial(ctx, en.URL, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(4 << 20)
	c := &Connector{o: o, id: en.ConnectorID, ws: ws, attempts: map[string]int{},
		cancel: map[string]chan struct{}{}, approval: map[string]chan map[string]any{},
		active: map[string]string{}}
	if err := c.send(map[string]any{"type": "register", "connector_id": c.id, "version": "1.0.0",
		"host": "refconnector.test", "adapters": []string{"hermes"}}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := c.read(rctx)
	if err != nil {
		ws.CloseNow()
		return nil, err
	}
	if m["type"] != "register_ack" {
		ws.CloseNow()
		return nil, fmt.Errorf("register answered with %v", m["type"])
	}
	if err := c.send(map[string]any{"type": "capabilities", "connector_id": c.id, "agents": o.Agents}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	return c, nil
}

func (c *Connector) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// Send writes a raw message (tests of hostile input).
func (c *Connector) Send(v any) error { return c.send(v) }

func (c *Connector) read(ctx context.Context) (map[string]any, error) {
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	c.logMu.Lock()
	line := map[string]any{"got": m["type"]}
	for _, k := range []string{"run_id", "approval_id", "approved_by", "denied_by", "reason", "code", "message", "goal"} {
		if v, ok := m[k]; ok {
			line[k] = v
		}
	}
	b, _ := json.Marshal(line)
	c.o.Log.Write(append(b, '\n'))
	c.logMu.Unlock()
	return m, nil
}

// Close closes the connection.
func (c *Connector) Close() { c.ws.Close(websocket.StatusNormalClosure, "bye") }

// Serve handles messages until the connection ends or ctx is done.
func (c *Connector) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go c.heartbeats(ctx)
	for {
		m, err := c.read(ctx)
		if err != nil {
			return err
		}
		switch m["type"] {
		case "create_run":
			go c.runScript(ctx, m)
		case "cancel_run":
			id, _ := m["run_id"].(string)
			c.mu.Lock()
			ch := c.cancel[id]
			delete(c.cancel, id)
			c.mu.Unlock()
			if ch != nil {
				close(ch)
			} else {
				// Not running here (any more): cancelling it is done.
				c.send(map[string]any{"type": "run_cancelled", "run_id": id})
			}
		case "approval_granted", "approval_denied":
			id, _ := m["run_id"].(string)
			c.mu.Lock()
			ch := c.approval[id]
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- m:
				default:
				}
			}
		}
	}
}

func (c *Connector) heartbeats(ctx context.Context) {
	t := time.NewTicker(c.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c.noBeats.Load() {
			continue
		}
		c.send(map[string]any{"type": "heartbeat", "connector_id": c.id, "timestamp": time.Now().UTC().Format(time.RFC3339),
			"metrics": map[string]any{"cpu_pct": 1.5, "memory_mb": 64, "active_runs": 0, "queued_runs": 0}})
	}
}

// release ends run id's hold on its agent (OneRunPerAgent).
func (c *Connector) release(id string) {
	c.mu.Lock()
	for a, r := range c.active {
		if r == id {
			delete(c.active, a)
		}
	}
	c.mu.Unlock()
}

func (c *Connector) event(id, kind string, payload any) error {
	if kind == "completion" || kind == "error" {
		c.release(id)
	}
	return c.send(map[string]any{"type": "run_event", "run_id": id, "event": kind,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "payload": payload})
}

func (c *Connector) runScript(ctx context.Context, m map[string]any) {
	id, _ := m["run_id"].(string)
	goal, _ := m["goal"].(string)
	words := strings.Fields(goal)
	if len(words) == 0 {
		words = []string{"echo"}
	}
	agent, _ := m["agent_id"].(string)
	c.mu.Lock()
	if holder, busy := c.active[agent]; c.o.OneRunPerAgent && busy && holder != id {
		c.mu.Unlock()
		c.send(map[string]any{"type": "error", "code": 4005, "message": "agent busy", "run_id": id})
		return
	}
	c.active[agent] = id
	c.attempts[id]++
	attempt := c.attempts[id]
	cancelCh := make(chan struct{})
	c.cancel[id] = cancelCh
	c.mu.Unlock()
	cancelled := func() {
		c.release(id)
		c.send(map[string]any{"type": "run_cancelled", "run_id": id})
	}
	arg := func(i int) string {
		if i < len(words) {
			return words[i]
		}
		return ""
	}
	code, _ := strconv.Atoi(arg(1))
	switch words[0] {
	case "error":
		c.release(id)
		c.send(map[string]any{"type": "error", "code": code, "message": "scripted error", "run_id": id})
		return
	case "error-once":
		if attempt == 1 {
			c.release(id)
			c.send(map[string]any{"type": "error", "code": code, "message": "scripted error", "run_id": id})
			return
		}
	case "busy-once":
		if attempt == 1 {
			c.release(id)
			c.send(map[string]any{"type": "error", "code": 4005, "message": "agent busy", "run_id": id})
			return
		}
	}
	c.send(map[string]any{"type": "run_accepted", "run_id": id, "status": "queued"})
	done := func(p any) { c.event(id, "completion", p) }
	switch words[0] {
	case "events":
		c.event(id, "thinking", map[string]any{"text": "hmm"})
		c.event(id, "tool_call", map[string]any{"tool": "terminal", "command": "ls -la /secret-dir"})
		c.event(id, "tool_result", map[string]any{"tool": "terminal", "output": "total 48 RAW-TOOL-OUTPUT"})
		c.event(id, "warning", map[string]any{"message": "careful"})
		c.event(id, "progress", map[string]any{"percent": 75, "message": "almost"})
		time.Sleep(50 * time.Millisecond)
		done(map[string]any{"summary": "events done", "turns": 3})
	case "approve":
		ch := make(chan map[string]any, 1)
		c.mu.Lock()
		c.approval[id] = ch
		c.mu.Unlock()
		c.send(map[string]any{"type": "approval_request", "run_id": id, "action": strings.Join(words[2:], " "), "risk_level": arg(1)})
		select {
		case a := <-ch:
			done(map[string]any{"approved": a["type"] == "approval_granted", "approved_by": a["approved_by"],
				"denied_by": a["denied_by"], "reason": a["reason"], "approval_id": a["approval_id"]})
		case <-cancelCh:
			cancelled()
		case <-ctx.Done():
		}
	case "hang", "stop-heartbeats":
		if words[0] == "stop-heartbeats" {
			c.noBeats.Store(true)
		}
		select {
		case <-cancelCh:
			cancelled()
		case <-ctx.Done():
		}
	case "late-cancel":
		select {
		case <-cancelCh:
			select {
			case <-time.After(time.Duration(code) * time.Second):
				cancelled()
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	case "quiet-release":
		// Stops N seconds after cancel_run and never confirms it.
		select {
		case <-cancelCh:
			select {
			case <-time.After(time.Duration(code) * time.Second):
				c.release(id)
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	case "ignore-cancel":
		<-ctx.Done()
	case "flood":
		n, _ := strconv.Atoi(arg(1))
		for i := 0; i < n; i++ {
			c.event(id, "progress", map[string]any{"percent": float64(i*100) / float64(max(n, 1)), "message": "step " + strconv.Itoa(i)})
		}
		done(map[string]any{"summary": "flooded " + strconv.Itoa(n)})
	case "leak-token":
		// A misbehaving connector echoing its own credentials.
		tok, _ := os.ReadFile(filepath.Join(c.o.Dir, "token.jwt"))
		key, _ := os.ReadFile(filepath.Join(c.o.Dir, "client.key"))
		t := strings.TrimSpace(string(tok))
		c.event(id, "warning", map[string]any{"message": "my token is " + t})
		c.event(id, "tool_result", map[string]any{"tool": "terminal", "output": string(key)})
		done(map[string]any{"summary": "token " + t, "key": string(key)})
	case "forge":
		c.send(map[string]any{"type": "approval_granted", "approval_id": "forged", "run_id": id, "approved_by": "mallory@example.test"})
		done(map[string]any{"summary": "forged"})
	default: // echo, and the *-once scripts after their failure
		c.event(id, "progress", map[string]any{"percent": 50, "message": "halfway"})
		text := strings.Join(words[1:], " ")
		if words[0] != "echo" {
			text = "recovered after " + strconv.Itoa(attempt-1)
		}
		done(map[string]any{"summary": text, "attempts": attempt})
	}
}

// Run dials and serves until ctx ends, reconnecting with the seed's
// backoff (1, 2, 4, 8, 16 s, then every 30 s) after a lost connection.
func Run(ctx context.Context, o Options, reconnect bool) error {
	wait := time.Second
	for {
		c, err := Dial(ctx, o)
		if err == nil {
			wait = time.Second
			fmt.Fprintln(o.Log, `{"got":"connected"}`)
			err = c.Serve(ctx)
			c.ws.CloseNow()
		}
		if ctx.Err() != nil {
			return nil
		}
		if !reconnect {
			return err
		}
		fmt.Fprintf(o.Log, "{\"got\":\"disconnected\",\"message\":%q}\n", errText(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if wait < 16*time.Second {
			wait *= 2
		} else {
			wait = 30 * time.Second
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return "closed " + strconv.Itoa(int(ce.Code)) + " " + ce.Reason
	}
	return err.Error()
}
