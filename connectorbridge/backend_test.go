package connectorbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit"
)

// TestDiscoveryToManifest: Card + Skill + health + hello + channel.open
// give a tool-less manifest; after form authentication the tools appear,
// with the reserved channel argument removed and the Card facts carried.
func TestDiscoveryToManifest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	v := e.waitTools(0)
	if v.Agent.JID != e.endpoint || v.Agent.Name != "im.refconnector" || v.Agent.Title != "Reference Connector" || v.Agent.Vendor != "agentgw" {
		t.Errorf("agent = %+v", v.Agent)
	}
	if !strings.Contains(v.Agent.Description, "Connector Skill connector-im-refconnector") || !strings.Contains(v.Agent.Description, "slow_count") {
		t.Errorf("skill not in description: %q", v.Agent.Description)
	}
	if v.Implementation.Name != "Reference Connector" || v.Implementation.Version != "1.0.0" {
		t.Errorf("implementation = %+v", v.Implementation)
	}
	e.waitAvailable(true, "the agent to be marked available")
	h := e.srv.Hellos()
	if len(h) != 1 || h[0].ConnectorID != "" || h[0].ProtocolVersion != "3.0" || h[0].ConnectorCardID != "im.refconnector" || len(h[0].SupportedProfiles) == 0 {
		t.Errorf("hello = %+v", h)
	}
	if opens := e.srv.ChannelOpens(); len(opens) != 1 || opens[0] != "" {
		t.Errorf("first channel.open must have an empty id: %q", opens)
	}
	firstVersion := v.Agent.Version

	out := e.authForm()
	if strings.Contains(out, e.formToken) {
		t.Error("auth output echoes the form secret")
	}
	v = e.waitTools(4)
	if got := strings.Join(v.toolNames(), ","); got != "echo,slow_count,always_fail,leak_key" {
		t.Errorf("tools = %s", got)
	}
	if v.Agent.Version == firstVersion {
		t.Error("tools appeared without a new version")
	}
	echo := v.Tools[0]
	if echo.Title != "Echo" || echo.Description != "Returns the text it was given." {
		t.Errorf("echo = %+v", echo)
	}
	if _, ok := echo.InputSchema["properties"]; !ok || strings.Contains(string(echo.InputSchema["properties"]), "connector_channel_id") ||
		string(echo.InputSchema["required"]) != `["text"]` {
		t.Errorf("echo inputSchema = %s / %s", echo.InputSchema["properties"], echo.InputSchema["required"])
	}
	if !strings.Contains(string(echo.OutputSchema), `"channel_matches"`) {
		t.Errorf("outputSchema not carried: %s", echo.OutputSchema)
	}
	var meta toolMeta
	json.Unmarshal(echo.Meta[MetaKey], &meta)
	if meta.ConnectorCardID != "im.refconnector" || meta.Profile != "xagent.im.v2" || len(meta.RelatedSkillIDs) != 1 || meta.SkillName != "connector-im-refconnector" {
		t.Errorf("meta = %+v", meta)
	}
	if ver, _, tools := b.Published(); ver != v.Agent.Version || len(tools) != 4 {
		t.Errorf("Published() = %s %v", ver, tools)
	}
	if err := b.Health(context.Background()); err != nil {
		t.Errorf("Health: %v", err)
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(nil)
	e.authForm()
	e.waitTools(4)
	r := e.call("echo", `{"text":"hello <world> & ünïcode","connector_channel_id":"spoofed"}`)
	res, fail, _, _ := r.Snapshot()
	if fail != nil {
		t.Fatalf("failed: %+v", fail)
	}
	var content []struct{ Type, Text string }
	if err := json.Unmarshal(res.Content, &content); err != nil || len(content) != 1 || content[0].Type != "text" {
		t.Fatalf("content = %s", res.Content)
	}
	var fromText, structured map[string]any
	json.Unmarshal([]byte(content[0].Text), &fromText)
	json.Unmarshal(res.StructuredContent, &structured)
	if fromText["text"] != "hello <world> & ünïcode" || structured["text"] != "hello <world> & ünïcode" || structured["channel_matches"] != true {
		t.Errorf("result text=%v structured=%v", fromText, structured)
	}
	inv := e.srv.Invocations()
	if len(inv) != 1 {
		t.Fatalf("invocations = %d", len(inv))
	}
	bound := e.b.Client().ChannelID()
	if inv[0].ChannelID != bound || !inv[0].ChannelArgSet || inv[0].ToolCallID != inv[0].RequestID || !strings.HasPrefix(inv[0].SessionID, "task-") {
		t.Errorf("invocation = %+v (bound %s)", inv[0], bound)
	}
}

func TestSlowToolProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(nil)
	e.authForm()
	e.waitTools(4)
	r := e.call("slow_count", `{"steps":5,"delay_ms":20}`)
	res, fail, _, prog := r.Snapshot()
	if fail != nil {
		t.Fatalf("failed: %+v", fail)
	}
	if string(res.StructuredContent) != `{"count":5}` {
		t.Errorf("result = %s", res.StructuredContent)
	}
	if len(prog) < 2 {
		t.Fatalf("progress = %+v", prog)
	}
	last := -1.0
	for _, p := range prog {
		if p.Percent == nil || *p.Percent <= last || p.Stage != "running" || !strings.HasPrefix(p.Message, "step ") {
			t.Fatalf("progress not rising: %+v", prog)
		}
		last = *p.Percent
	}
	if last != 100 {
		t.Errorf("last progress %v", last)
	}
}

func TestFailingTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(nil)
	e.authForm()
	e.waitTools(4)
	_, fail, _, _ := e.call("always_fail", `{}`).Snapshot()
	if fail == nil || fail.Code != "xagent:target_rejected" || fail.Retryable {
		t.Fatalf("failure = %+v", fail)
	}
	if strings.Contains(fail.Message, "rejected the request") {
		t.Error("the connector's free-text message is reflected")
	}
}

// TestFormAuthBindsChannel: tools stay hidden and calls fail until the form
// flow succeeds; a wrong secret binds nothing; the binding survives a
// gateway restart and the channel is reopened by its persisted id.
func TestFormAuthBindsChannel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.waitTools(0)
	_, fail, _, _ := e.call("echo", `{"text":"x"}`).Snapshot()
	if fail == nil || fail.Code != agentproto.CodeUnavailable {
		t.Fatalf("call before auth: %+v", fail)
	}
	if err := b.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "not authenticated") {
		t.Errorf("Health before auth: %v", err)
	}

	c := e.client()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Auth(ctx, "token_form", map[string]string{"account": "alice", "token": "wrong-" + e.formToken}, &out)
	if err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("wrong token: %v", err)
	}
	if err := c.Auth(ctx, "token_form", map[string]string{"account": "alice"}, &out); err == nil || !strings.Contains(err.Error(), "needs field token") {
		t.Errorf("missing field: %v", err)
	}
	if err := c.Auth(ctx, "token_form", map[string]string{"account": "a", "token": "t", "extra": "x"}, &out); err == nil || !strings.Contains(err.Error(), "no field named extra") {
		t.Errorf("unknown field: %v", err)
	}
	if err := c.Auth(ctx, "", nil, &out); err == nil || !strings.Contains(err.Error(), "token_form, qr_login") {
		t.Errorf("ambiguous flow: %v", err)
	}
	c.Close()
	var n int
	e.db.Read.QueryRow(`SELECT count(*) FROM connector_bindings WHERE auth_state = 'authenticated'`).Scan(&n)
	if n != 0 {
		t.Fatal("failed auth created a binding")
	}
	time.Sleep(200 * time.Millisecond)
	if len(e.pub.lastView(t).Tools) != 0 {
		t.Fatal("tools appeared before authentication")
	}

	e.authForm()
	e.waitTools(4)
	var chID, auth, connID string
	if err := e.db.Read.QueryRow(`SELECT connector_channel_id, auth_state, connector_id FROM connector_bindings
		WHERE endpoint = ? AND connector_card_id = 'im.refconnector'`, e.endpoint).Scan(&chID, &auth, &connID); err != nil {
		t.Fatal(err)
	}
	if auth != "authenticated" || chID == "" || connID == "" {
		t.Fatalf("binding = %s %s %s", chID, auth, connID)
	}
	testkit.WaitFor(t, 5*time.Second, "the gateway to switch to the bound channel", func() bool { return b.Client().ChannelID() == chID })
	if _, fail, _, _ := e.call("echo", `{"text":"x"}`).Snapshot(); fail != nil {
		t.Fatalf("call after auth: %+v", fail)
	}

	// The temporary channel was closed when the gateway moved to the bound
	// one; shutdown closes the bound one.
	temp := e.srv.ChannelOpens()[0]
	b.Close()
	closes := strings.Join(e.srv.ChannelCloses(), ",")
	if !strings.Contains(closes, chID) || !strings.Contains(closes, temp) {
		t.Errorf("channel.close sent for %s; want the temporary channel and %s", closes, chID)
	}

	// Restart the gateway: hello with the persisted connector_id, channel.open
	// with the persisted channel id, tools come back without re-auth.
	before := len(e.srv.Hellos())
	e.pub.reset()
	b2 := e.start(nil)
	e.waitTools(4)
	h := e.srv.Hellos()[before]
	if h.ConnectorID != connID {
		t.Errorf("hello after restart carried %q, want the persisted %q", h.ConnectorID, connID)
	}
	opens := e.srv.ChannelOpens()
	if opens[len(opens)-1] != chID {
		t.Errorf("reopened %q, want %q", opens[len(opens)-1], chID)
	}
	if b2.Client().ChannelID() != chID {
		t.Error("restarted gateway is on another channel")
	}
}

func TestQRAuthAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.waitTools(0)

	// Cancelled while polling: auth.cancel goes out, nothing is bound.
	c := e.client()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	err := c.Auth(ctx, "qr_login", nil, &out)
	cancel()
	c.Close()
	if err == nil || !strings.Contains(out.String(), "Authentication cancelled (canceled)") {
		t.Fatalf("cancel: %v\n%s", err, out.String())
	}

	// The terminal drawing is the CLI's (cmd/agentgw printQR, tested
	// there); here ShowQR must get each new code once, after its raw text.
	var shown []string
	c = e.clientWith(func(o *Options) {
		o.ShowQR = func(w io.Writer, text string) {
			shown = append(shown, text)
			fmt.Fprint(w, "[qr drawn]\n")
		}
	})
	defer c.Close()
	out.Reset()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Auth(ctx, "qr_login", map[string]string{"x": "y"}, &out); err == nil {
		t.Error("qr flow accepted fields")
	}
	if err := c.Auth(ctx, "qr_login", nil, &out); err != nil {
		t.Fatalf("qr: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"Status: pending", "refconnector://login/", "Status: qr_refresh_required", "Status: scanned", "Authenticated as Reference IM qr***"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "Scan this QR code") != 2 {
		t.Errorf("the refreshed QR code was not shown again:\n%s", s)
	}
	if len(shown) != 2 || !strings.HasPrefix(shown[0], "refconnector://login/") || strings.Count(s, "[qr drawn]") != 2 {
		t.Errorf("ShowQR got %q:\n%s", shown, s)
	}
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "the gateway to see the authenticated channel", func() bool { return b.Client().Descriptor().Authenticated() })

	// Logout withdraws the tools and keeps the binding.
	out.Reset()
	if err := c.Logout(ctx, &out); err != nil {
		t.Fatalf("logout: %v", err)
	}
	e.waitTools(0)
	var chID, auth string
	e.db.Read.QueryRow(`SELECT connector_channel_id, auth_state FROM connector_bindings`).Scan(&chID, &auth)
	if chID == "" || auth != "unauthenticated" {
		t.Errorf("binding after logout = %q %q", chID, auth)
	}
	testkit.WaitFor(t, 5*time.Second, "the route of the signed-out channel to be removed", func() bool { return b.Client().ChannelID() == "" })
	_, fail, _, _ := e.call("echo", `{"text":"x"}`).Snapshot()
	if fail == nil || fail.Message != "the connector channel is not authenticated" {
		t.Errorf("call after logout: %+v", fail)
	}
	// Signing in again on the kept channel brings the tools back.
	out.Reset()
	if err := c.Auth(ctx, "token_form", map[string]string{"account": "bob", "token": e.formToken}, &out); err != nil {
		t.Fatalf("re-auth: %v", err)
	}
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "the same channel to be reopened", func() bool { return b.Client().ChannelID() == chID })
}

// TestRestartMidCall: the connector restarts during a slow call; the call
// fails unavailable (retryable), is never re-sent, and the channel comes back.
func TestRestartMidCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Authenticated() })
	bound := b.Client().ChannelID()
	connID := b.Client().ConnectorID()

	r := newRun()
	go b.Execute(context.Background(), tasks.Call{TaskID: "task-restart-0000000000", Tool: "slow_count",
		Arguments: json.RawMessage(`{"steps":100,"delay_ms":30}`)}, r)
	<-r.FirstProgress
	if err := e.srv.Restart(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("call not settled after the restart")
	}
	_, fail, _, _ := r.Snapshot()
	if fail == nil || fail.Code != agentproto.CodeUnavailable || !fail.Retryable {
		t.Fatalf("failure = %+v", fail)
	}
	testkit.WaitFor(t, 10*time.Second, "the channel to come back", func() bool { return b.Client().ChannelID() == bound && b.Client().Descriptor().Active() })
	if b.Client().ConnectorID() != connID {
		t.Error("connector_id not kept across the reconnect (within the lease)")
	}
	if _, fail, _, _ := e.call("echo", `{"text":"back"}`).Snapshot(); fail != nil {
		t.Fatalf("call after restart: %+v", fail)
	}
	slow := 0
	for _, inv := range e.srv.Invocations() {
		if inv.ToolID == "slow_count" {
			slow++
		}
	}
	if slow != 1 {
		t.Errorf("slow_count invoked %d times; tool.invoke must never be re-sent", slow)
	}
	if !strings.Contains(e.logs.String(), "data plane lost during a tool call") {
		t.Error("no log line for the lost call")
	}
}

func TestCancellationDiscardsLateAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	r := newRun()
	done := make(chan struct{})
	go func() {
		b.Execute(context.Background(), tasks.Call{TaskID: "task-cancel-00000000000", Tool: "slow_count",
			Arguments: json.RawMessage(`{"steps":5,"delay_ms":40}`)}, r)
		close(done)
	}()
	<-r.FirstProgress
	close(r.CancelReq)
	<-done
	res, fail, reason, _ := r.Snapshot()
	if res != nil || fail != nil || reason == "" {
		t.Fatalf("not settled cancelled: %v %v %q", res, fail, reason)
	}
	// The late ack arrives and is discarded; the link stays healthy.
	time.Sleep(300 * time.Millisecond)
	if _, fail, _, _ := e.call("echo", `{"text":"after"}`).Snapshot(); fail != nil {
		t.Fatalf("call after cancel: %+v", fail)
	}
}

func TestToolBecomesUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	v4 := e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Authenticated() })
	e.srv.SetToolStatus("echo", "unavailable", "granted")
	v3 := e.waitTools(3)
	if v3.Agent.Version == v4.Agent.Version || strings.Contains(strings.Join(v3.toolNames(), ","), "echo") {
		t.Errorf("echo still projected: %v", v3.toolNames())
	}
	_, fail, _, _ := e.call("echo", `{"text":"x"}`).Snapshot()
	if fail == nil || fail.Code != "xagent:connector_channel_unavailable" {
		t.Errorf("call to an unavailable tool: %+v", fail)
	}
	e.srv.SetToolStatus("slow_count", "available", "denied")
	e.waitTools(2)
	e.srv.SetToolStatus("echo", "available", "granted")
	e.srv.SetToolStatus("slow_count", "available", "granted")
	v := e.waitTools(4)
	if v.Agent.Version != v4.Agent.Version {
		t.Errorf("same state, different version: %s vs %s", v.Agent.Version, v4.Agent.Version)
	}
}

func TestHealthStatesAndCardRefetch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	v := e.waitTools(4)
	// Otherwise "unavailable once offline" below would hold trivially.
	e.waitAvailable(true, "the agent to be available before the failures")

	e.srv.SetMisbehaviour(connectortest.Misbehaviour{HealthStatus: 503})
	testkit.WaitFor(t, 5*time.Second, "offline after three failures", func() bool { return b.Client().HealthState() == HealthOffline })
	// Availability and the offline log line follow the state change
	// asynchronously (projector goroutine; setHealth logs after unlocking).
	e.waitLog("connector health degraded")
	e.waitLog("connector offline")
	e.waitAvailable(false, "the offline agent to be marked unavailable")
	_, fail, _, _ := func() (*tasks.ToolResult, *tasks.Failure, string, []tasks.Progress) {
		o := b.o.ReadyWait
		b.o.ReadyWait = 100 * time.Millisecond
		defer func() { b.o.ReadyWait = o }()
		return e.call("echo", `{"text":"x"}`).Snapshot()
	}()
	if fail == nil || fail.Code != agentproto.CodeUnavailable {
		t.Errorf("call while offline: %+v", fail)
	}
	e.srv.SetMisbehaviour(connectortest.Misbehaviour{})
	testkit.WaitFor(t, 5*time.Second, "recovery", func() bool { return b.Client().HealthState() == HealthOK && e.avail.get(e.endpoint) })

	e.srv.SetMisbehaviour(connectortest.Misbehaviour{HealthStatus: 401})
	testkit.WaitFor(t, 5*time.Second, "authentication failure", func() bool { return b.Client().HealthState() == HealthUnauthorized })
	e.waitLog("rejected the system API key")
	e.waitAvailable(false, "the unauthorized agent to be marked unavailable")
	e.srv.SetMisbehaviour(connectortest.Misbehaviour{})
	testkit.WaitFor(t, 5*time.Second, "recovery after 401", func() bool { return b.Client().HealthState() == HealthOK && b.Client().ChannelID() != "" })

	// A connector upgrade: /health reports a new version, Card and Skill
	// are refetched and a new version is published.
	e.srv.SetConnectorVersion("1.1.0")
	testkit.WaitFor(t, 5*time.Second, "a 1.1.0 manifest", func() bool {
		nv := e.pub.lastView(t)
		return strings.HasPrefix(nv.Agent.Version, "1.1.0-") && len(nv.Tools) == 4
	})
	if e.pub.lastView(t).Agent.Version == v.Agent.Version {
		t.Error("same version after an upgrade")
	}
	if !strings.Contains(e.logs.String(), "refetching the Card and Skill") {
		t.Error("no refetch log line")
	}
}

func TestWrongAPIKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(func(o *Options) { o.APIKey = "sk-wrong-key-000" })
	testkit.WaitFor(t, 5*time.Second, "unauthorized", func() bool { return b.Client().HealthState() == HealthUnauthorized })
	// Not a snapshot of the current value (which would race the
	// projector): the agent must never have been marked available.
	if e.avail.everUp() {
		t.Error("available with a rejected key")
	}
	err := b.Health(context.Background())
	if err == nil || !strings.Contains(err.Error(), "system API key rejected (HTTP 401)") {
		t.Errorf("Health = %v", err)
	}
	c := e.client()
	c.o.APIKey = "sk-wrong-key-000"
	if err := c.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Open with a wrong key: %v", err)
	}
}

func TestLeaseExpiryReplacesRuntime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Authenticated() })
	oldConn, oldCh := b.Client().ConnectorID(), b.Client().ChannelID()
	// The connector loses the runtime instance (lease expiry or rebuilt
	// state): a new connector_id, the old channel is unknown.
	e.srv.ForgetRuntimes()
	testkit.WaitFor(t, 10*time.Second, "a new runtime instance", func() bool {
		id := b.Client().ConnectorID()
		return id != "" && id != oldConn
	})
	e.waitTools(0)
	if !strings.Contains(e.logs.String(), "issued a new connector_id") {
		t.Error("no log line for the replaced runtime instance")
	}
	var chID, auth string
	e.db.Read.QueryRow(`SELECT connector_channel_id, auth_state FROM connector_bindings`).Scan(&chID, &auth)
	if chID == oldCh || chID == "" || auth != "unauthenticated" {
		t.Errorf("binding not updated in place: %q %q (old %q)", chID, auth, oldCh)
	}
	// Re-authentication restores the tools on the new channel.
	e.authForm()
	e.waitTools(4)
}

func TestPingPongBothWays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(so *connectortest.Options, _ *Options) { so.PingInterval = 30 * time.Millisecond })
	b := e.start(func(o *Options) { o.PingInterval = 30 * time.Millisecond })
	testkit.WaitFor(t, 5*time.Second, "pongs to the connector's pings", func() bool { return e.srv.Pongs() >= 3 })
	time.Sleep(200 * time.Millisecond)
	if len(e.srv.Hellos()) != 1 || b.Client().ConnectorID() == "" {
		t.Errorf("the data plane was not stable under pings: %d hellos", len(e.srv.Hellos()))
	}
	if strings.Contains(e.logs.String(), "did not answer ping") {
		t.Error("ping timeouts")
	}
}

func TestPathPrefixAndNoSkill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(so *connectortest.Options, _ *Options) {
		so.PathPrefix = "/deep/prefix"
		so.NoSkill = true
	})
	e.start(nil)
	v := e.waitTools(0)
	if strings.Contains(v.Agent.Description, "Connector Skill") {
		t.Error("a 404 skill was projected")
	}
	if !strings.Contains(e.srv.URL(), "/deep/prefix") {
		t.Fatal("server not under a prefix")
	}
}

func TestOneConnectionPerCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(nil)
	e.waitTools(0)
	b2, err := New(e.backendOptions(func(o *Options) { o.Endpoint = "im2@agents.example.test" }))
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = b2.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "one connection per connector_card_id") {
		t.Fatalf("second agent for the same card: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Endpoint: "a@b", BaseURL: "http://u:p@host"},
		{Endpoint: "a@b", BaseURL: "http://host/?x"},
		{BaseURL: "http://host"},
		{Endpoint: "a@b", BaseURL: "http://host", APIKey: "a\nb"},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}

func TestIncompatibleProtocolGoesOffline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Active() })
	e.srv.SetProtocolVersion("2.0")
	testkit.WaitFor(t, 5*time.Second, "incompatible", func() bool { return b.Client().HealthState() == HealthIncompatible })
	testkit.WaitFor(t, 5*time.Second, "offline", func() bool { return !e.avail.get(e.endpoint) && b.Client().ConnectorID() == "" })
	if !strings.Contains(e.logs.String(), "protocol_version 2.0 is below the admission floor 3.0") {
		t.Error("no clear log line")
	}
	e.srv.SetProtocolVersion("3.0")
	testkit.WaitFor(t, 10*time.Second, "back online", func() bool { return b.Client().Descriptor().Active() && e.avail.get(e.endpoint) })
}

func TestErrorPacketFailsCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	testkit.WaitFor(t, 5*time.Second, "bound channel", func() bool { return b.Client().Descriptor().Active() })
	e.srv.SetMisbehaviour(connectortest.Misbehaviour{ErrorPacketOnInvoke: "connection_not_authenticated"})
	_, fail, _, _ := e.call("echo", `{"text":"x"}`).Snapshot()
	if fail == nil || fail.Code != "xagent:connection_not_authenticated" {
		t.Fatalf("failure = %+v", fail)
	}
}

// Progress belongs to the request that caused it. A connector that pushes
// progress without request_id (here for a call the caller cancelled, which
// the connector keeps running: it has no tool cancellation) must not have
// it shown on another caller's call of the same tool.
func TestProgressRoutedByRequestOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.start(nil)
	e.authForm()
	e.waitTools(4)
	e.srv.SetMisbehaviour(connectortest.Misbehaviour{ProgressWithoutRequestID: true})

	a := newRun()
	aDone := make(chan struct{})
	go func() {
		defer close(aDone)
		b.Execute(context.Background(), tasks.Call{TaskID: "task-late-progress-a000", Tool: "slow_count",
			Arguments: json.RawMessage(`{"steps":100,"delay_ms":20}`)}, a)
	}()
	testkit.WaitFor(t, 5*time.Second, "caller A's tool.invoke at the connector", func() bool { return len(e.srv.Invocations()) > 0 })
	close(a.CancelReq)
	<-aDone
	if _, _, reason, _ := a.Snapshot(); reason == "" {
		t.Fatal("caller A not cancelled")
	}

	r := e.call("slow_count", `{"steps":5,"delay_ms":60}`)
	res, fail, _, prog := r.Snapshot()
	if fail != nil || res == nil {
		t.Fatalf("caller B: %+v %+v", res, fail)
	}
	for _, p := range prog {
		if strings.Contains(p.Message, "of 100") {
			t.Fatalf("caller B was shown caller A's progress %q (all progress: %+v)", p.Message, prog)
		}
	}
	if len(prog) != 0 {
		t.Errorf("progress without request_id was attributed: %+v", prog)
	}
	// Caller A's progress keeps arriving on the connector's schedule, not
	// caller B's: wait for the drop to be logged rather than assume it was.
	e.waitLog("tool.progress.push without request_id")
}

// gatedAvailability holds the first "up" until gate is closed, freezing a
// projection between reading the state and publishing availability; done
// is closed once that "up" has been recorded.
type gatedAvailability struct {
	fakeAvailability
	held, gate, done chan struct{}
	once             sync.Once
}

func (g *gatedAvailability) SetAvailable(endpoint string, up bool) {
	first := false
	if up {
		g.once.Do(func() { first = true })
	}
	if first {
		close(g.held)
		<-g.gate
	}
	g.fakeAvailability.SetAvailable(endpoint, up)
	if first {
		close(g.done)
	}
}

// TestCloseNotUndoneByProjection: a projection that read "up" before Close
// must not mark the agent available after Close marked it down.
func TestCloseNotUndoneByProjection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := &gatedAvailability{held: make(chan struct{}), gate: make(chan struct{}), done: make(chan struct{})}
	var release sync.Once
	b := e.start(func(o *Options) { o.Availability = g })
	t.Cleanup(func() { release.Do(func() { close(g.gate) }) })
	select {
	case <-g.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was never marked available")
	}
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	// Without the fix Close returns while the projection is held; with it
	// Close waits for that projection, so give it a bounded head start.
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
	release.Do(func() { close(g.gate) })
	for _, ch := range []chan struct{}{g.done, closed} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the held projection or Close did not finish")
		}
	}
	g.mu.Lock()
	calls := append([]bool(nil), g.log...)
	g.mu.Unlock()
	if g.get(e.endpoint) {
		t.Errorf("available after Close (SetAvailable calls: %v)", calls)
	}
}
