// Package connectortest implements a reference xAgent Connector Server
// (common protocol 3.0) for tests, demos and benchmarks: the public Card
// and Skill, /health and the /ws data plane with the hello rules, one form
// and one QR authentication flow, descriptor pushes, the runtime lease of
// connector_id, four tools (echo, slow_count with progress, always_fail,
// leak_key) and switches that make it misbehave on purpose.
//
// It shares no code with connectorbridge, so that the two check each other.
package connectortest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// DefaultCard and DefaultSkill are the reference Card and Skill; identical
// copies live in testdata/connector/.
//
//go:embed card.json
var DefaultCard []byte

//go:embed skill.md
var DefaultSkill []byte

// Protocol constants, spelled independently of connectorbridge.
const (
	envelopeSchema   = "xagent.connector.packet/v1"
	descriptorSchema = "xagent.connection/v2"
	subprotocol      = "xagent.connector.packet.v1"
	protocolVersion  = "3.0"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// APIKey is the system API key that /health and /ws require; ""
	// disables the check.
	APIKey string
	// Card and Skill override DefaultCard and DefaultSkill. NoSkill makes
	// /skill.md answer 404.
	Card    []byte
	Skill   []byte
	NoSkill bool
	// FormToken is the target-system token the token_form flow accepts.
	// Default "reference-token".
	FormToken string
	// PathPrefix mounts every endpoint below a prefix such as "/conn".
	PathPrefix string
	// LeaseGrace is how long a connector_id survives without a data plane
	// (the protocol's one hour by default).
	LeaseGrace time.Duration
	// PingInterval makes the server ping each data plane; 0 disables.
	PingInterval time.Duration
	// QRPollMillis is the poll_interval_millis of the QR flow. Default 100.
	QRPollMillis int64
	// RetryInterval is how often unacknowledged IM messages are pushed
	// again. Default 2s.
	RetryInterval time.Duration
	Logger        *slog.Logger
}

// Misbehaviour switches make the server break the protocol on purpose.
type Misbehaviour struct {
	WrongCardIDInAck    bool // connector.hello.ack names another card
	Protocol20          bool // connector.hello.ack declares protocol 2.0
	MalformedJSON       bool // a malformed packet precedes every tool.invoke.ack
	OversizedPackets    bool // tool.invoke.ack is padded beyond 2 MiB
	DisconnectMidInvoke bool // the data plane is dropped during tool.invoke
	HealthStatus        int  // when non-zero, /health answers this status
	// ErrorPacketOnInvoke, when set, answers every tool.invoke with a
	// type=error packet carrying this code instead of an ack.
	ErrorPacketOnInvoke string
	// ProgressWithoutRequestID sends tool.progress.push with no
	// request_id (the payload still names the tool_id).
	ProgressWithoutRequestID bool
}

// Hello records one connector.hello as received.
type Hello struct {
	ConnectorCardID   string
	ConnectorID       string // as sent by the client ("" on first contact)
	ProtocolVersion   string
	SupportedProfiles []string
	Assigned          string // connector_id in the ack
}

// Invocation records one tool.invoke as received.
type Invocation struct {
	ToolID        string
	ChannelID     string // envelope connector_channel_id
	Arguments     json.RawMessage
	SessionID     string
	ToolCallID    string
	RequestID     string
	ChannelArgSet bool // arguments carried connector_channel_id equal to the envelope's
}

type cardInfo struct {
	id        string
	protocol  string
	profiles  []string
	tools     []string
	flows     map[string]string // id -> type
	provider  string
	label     string
	targetTyp string
}

// Server is a running reference connector.
type Server struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex
	cardDoc  map[string]any
	info     cardInfo
	mis      Misbehaviour
	runtimes map[string]*runtimeInst
	channels map[string]*channel
	auths    map[string]*authSession
	conns    map[*conn]bool
	toolOver map[string][2]string // tool -> status, permission
	hellos   []Hello
	invokes  []Invocation
	opens    []string
	closes   []string
	pongs    int

	im   *imState
	done chan struct{}
	stop sync.Once

	addr string
	ln   net.Listener
	srv  *http.Server
}

type runtimeInst struct {
	id    string
	live  int
	timer *time.Timer
}

type channel struct {
	id            string
	owner         string // connector_id
	authenticated bool
	account       string
	profiles      []string
	routes        map[*conn]bool
}

type authSession struct {
	id        string
	channel   string
	flow      string
	polls     int
	refreshed bool
}

// Start listens on a free 127.0.0.1 port.
func Start(o Options) (*Server, error) { return Listen("127.0.0.1:0", o) }

// Listen serves on addr.
func Listen(addr string, o Options) (*Server, error) {
	s, err := New(o)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// New builds a Server without listening; use Handler to mount it.
func New(o Options) (*Server, error) {
	if o.Card == nil {
		o.Card = DefaultCard
	}
	if o.Skill == nil && !o.NoSkill {
		o.Skill = DefaultSkill
	}
	if o.FormToken == "" {
		o.FormToken = "reference-token"
	}
	if o.LeaseGrace <= 0 {
		o.LeaseGrace = time.Hour
	}
	if o.QRPollMillis <= 0 {
		o.QRPollMillis = 100
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 2 * time.Second
	}
	o.PathPrefix = strings.TrimRight(o.PathPrefix, "/")
	s := &Server{
		o:        o,
		log:      o.Logger.With("component", "refconnector"),
		runtimes: map[string]*runtimeInst{},
		channels: map[string]*channel{},
		auths:    map[string]*authSession{},
		conns:    map[*conn]bool{},
		toolOver: map[string][2]string{},
		im:       newIMState(),
		done:     make(chan struct{}),
	}
	go s.retryLoop()
	if err := json.Unmarshal(o.Card, &s.cardDoc); err != nil {
		return nil, fmt.Errorf("connectortest: card: %w", err)
	}
	if err := s.loadInfo(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) loadInfo() error {
	var c struct {
		ID       string `json:"connector_card_id"`
		Protocol string `json:"protocol_version"`
		Supports struct {
			TargetTypes []string `json:"target_types"`
			Targets     []struct {
				Provider string `json:"provider"`
				Label    string `json:"label"`
			} `json:"targets"`
			Profiles []string `json:"profiles"`
		} `json:"supports"`
		Tools []struct {
			ID string `json:"tool_id"`
		} `json:"tools"`
		Flows []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"auth_flows"`
	}
	raw, _ := json.Marshal(s.cardDoc)
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("connectortest: card: %w", err)
	}
	info := cardInfo{id: c.ID, protocol: c.Protocol, profiles: c.Supports.Profiles, flows: map[string]string{},
		provider: "reference", label: "Reference", targetTyp: "im"}
	if len(c.Supports.TargetTypes) > 0 {
		info.targetTyp = c.Supports.TargetTypes[0]
	}
	if len(c.Supports.Targets) > 0 {
		info.provider, info.label = c.Supports.Targets[0].Provider, c.Supports.Targets[0].Label
	}
	for _, t := range c.Tools {
		info.tools = append(info.tools, t.ID)
	}
	for _, f := range c.Flows {
		info.flows[f.ID] = f.Type
	}
	s.info = info
	return nil
}

func (s *Server) serve(ln net.Listener) {
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
}

// URL is the base URL to configure in the gateway.
func (s *Server) URL() string { return "http://" + s.addr + s.o.PathPrefix }

// Addr is the listening address.
func (s *Server) Addr() string { return s.addr }

// Close stops the server and drops every data plane.
func (s *Server) Close() {
	s.stop.Do(func() { close(s.done) })
	if s.srv != nil {
		s.srv.Close()
	}
	s.dropConns()
	s.mu.Lock()
	for _, r := range s.runtimes {
		if r.timer != nil {
			r.timer.Stop()
		}
	}
	s.mu.Unlock()
}

func (s *Server) dropConns() {
	s.mu.Lock()
	var cs []*conn
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.ws.CloseNow()
	}
}

// Restart simulates a process restart with persistent state: the listener
// and every data plane go away, then the server listens again on the same
// address. Channels, authentication and connector_ids survive (their
// leases run while no data plane is connected).
func (s *Server) Restart(down time.Duration) error {
	if s.srv == nil {
		return ErrNotListening
	}
	s.srv.Close()
	s.dropConns()
	time.Sleep(down)
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.serve(ln)
	return nil
}

// DropConnections closes every data plane without stopping the listener.
func (s *Server) DropConnections() { s.dropConns() }

// ForgetRuntimes simulates rebuilt server state: every connector_id is
// unregistered with its channels and authentication, as after the lease.
// Live data planes are dropped first.
func (s *Server) ForgetRuntimes() {
	s.dropConns()
	s.mu.Lock()
	ids := make([]string, 0, len(s.runtimes))
	for id := range s.runtimes {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.expireNow(id, true)
	}
}

// SetMisbehaviour replaces the misbehaviour switches.
func (s *Server) SetMisbehaviour(m Misbehaviour) {
	s.mu.Lock()
	s.mis = m
	s.mu.Unlock()
}

func (s *Server) misbehaviour() Misbehaviour {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mis
}

// SetConnectorVersion changes connector.version (and the build version),
// as a connector upgrade would; /health reports it at once.
func (s *Server) SetConnectorVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cardDoc["connector"].(map[string]any); ok {
		c["version"] = v
	}
	if b, ok := s.cardDoc["build"].(map[string]any); ok {
		b["version"] = v
	}
}

// SetToolStatus overrides a tool's descriptor state on every channel and
// pushes the new descriptor to the channels' routes.
func (s *Server) SetToolStatus(toolID, status, permission string) {
	s.mu.Lock()
	s.toolOver[toolID] = [2]string{status, permission}
	var pushes []func()
	for _, ch := range s.channels {
		pushes = append(pushes, s.pushDescriptorLocked(ch))
	}
	s.mu.Unlock()
	for _, p := range pushes {
		p()
	}
}

// Hellos returns the hellos received so far.
func (s *Server) Hellos() []Hello {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hello(nil), s.hellos...)
}

// Invocations returns the tool.invoke packets received so far.
func (s *Server) Invocations() []Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Invocation(nil), s.invokes...)
}

// ChannelOpens returns the connector_channel_id of every channel.open
// received ("" for a first open).
func (s *Server) ChannelOpens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.opens...)
}

// ChannelCloses returns the channel ids of every channel.close received.
func (s *Server) ChannelCloses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.closes...)
}

// SetProtocolVersion changes the Card's (and /health's) protocol_version,
// as a connector built for another protocol would report it.
func (s *Server) SetProtocolVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cardDoc["protocol_version"] = v
}

// Pongs counts the pongs answering the server's pings.
func (s *Server) Pongs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pongs
}

// ChannelAuthenticated reports whether a channel is signed in.
func (s *Server) ChannelAuthenticated(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.channels[id]
	return ch != nil && ch.authenticated
}

// LiveConnectorIDs lists registered runtime instances.
func (s *Server) LiveConnectorIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.runtimes {
		out = append(out, id)
	}
	return out
}

// Handler serves the control plane and the data plane.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	p := s.o.PathPrefix
	mux.HandleFunc("GET "+p+"/connector-card.json", s.handleCard)
	mux.HandleFunc("GET "+p+"/skill.md", s.handleSkill)
	mux.HandleFunc("GET "+p+"/health", s.handleHealth)
	mux.HandleFunc("GET "+p+"/ws", s.handleWS)
	mux.HandleFunc("POST "+p+"/files/uploads", s.handleUpload)
	mux.HandleFunc("GET "+p+"/files/refs/{ref}", s.handleFileRef)
	return mux
}

func (s *Server) authorized(r *http.Request) bool {
	if s.o.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.o.APIKey)) == 1
}

func (s *Server) handleCard(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	raw, _ := json.Marshal(s.cardDoc)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

func (s *Server) handleSkill(w http.ResponseWriter, r *http.Request) {
	if s.o.NoSkill || len(s.o.Skill) == 0 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Write(s.o.Skill)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if st := s.misbehaviour().HealthStatus; st != 0 {
		http.Error(w, "health switch", st)
		return
	}
	s.mu.Lock()
	conn, _ := s.cardDoc["connector"].(map[string]any)
	body := map[string]any{
		"status":                 "ok",
		"connector_card_id":      s.info.id,
		"connector_card_version": conn["version"],
		"protocol_version":       s.cardDoc["protocol_version"],
		"build":                  s.cardDoc["build"],
	}
	raw, _ := json.Marshal(body)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

// conn is one data plane.
type conn struct {
	s           *Server
	ws          *websocket.Conn
	ctx         context.Context
	wmu         sync.Mutex
	connectorID string // "" until hello
	profiles    []string
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{subprotocol}})
	if err != nil {
		return
	}
	if ws.Subprotocol() != subprotocol {
		ws.Close(websocket.StatusPolicyViolation, "subprotocol "+subprotocol+" required")
		return
	}
	ws.SetReadLimit(4 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &conn{s: s, ws: ws, ctx: ctx}
	s.mu.Lock()
	s.conns[c] = true
	s.mu.Unlock()
	defer s.disconnect(c)
	if s.o.PingInterval > 0 {
		go c.pingLoop()
	}
	for {
		typ, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.sendError("", "", "invalid_packet", "text messages only")
			continue
		}
		var p packet
		if err := json.Unmarshal(data, &p); err != nil {
			c.sendError("", "", "invalid_packet", "invalid JSON")
			continue
		}
		c.handle(&p)
	}
}

// disconnect removes a data plane's routes and starts the lease of its
// runtime instance when it was the last one.
func (s *Server) disconnect(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	for _, ch := range s.channels {
		delete(ch.routes, c)
	}
	if c.connectorID == "" {
		return
	}
	r := s.runtimes[c.connectorID]
	if r == nil {
		return
	}
	r.live--
	if r.live <= 0 {
		id := r.id
		r.timer = time.AfterFunc(s.o.LeaseGrace, func() { s.expire(id) })
	}
}

// expire unregisters a connector_id with every channel and auth session
// it owns (architecture §3.4).
func (s *Server) expire(id string) { s.expireNow(id, false) }

func (s *Server) expireNow(id string, force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runtimes[id]
	if r == nil || (r.live > 0 && !force) {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	delete(s.runtimes, id)
	for cid, ch := range s.channels {
		if ch.owner == id {
			delete(s.channels, cid)
			for aid, a := range s.auths {
				if a.channel == cid {
					delete(s.auths, aid)
				}
			}
		}
	}
	s.log.Info("connector_id lease expired; runtime instance and its channels unregistered")
}

type packet struct {
	Schema             string          `json:"schema"`
	PacketID           string          `json:"packet_id"`
	RequestID          string          `json:"request_id,omitempty"`
	ReplyTo            string          `json:"reply_to,omitempty"`
	ConnectorChannelID *string         `json:"connector_channel_id,omitempty"`
	Type               string          `json:"type"`
	Time               int64           `json:"time,omitempty"`
	Payload            json.RawMessage `json:"payload,omitempty"`
	Error              *packetError    `json:"error,omitempty"`
}

type packetError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func strp(s string) *string { return &s }

func (c *conn) write(p *packet) error {
	p.Schema = envelopeSchema
	if p.PacketID == "" {
		p.PacketID = newID("pkt_")
	}
	p.Time = time.Now().UnixMilli()
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return c.writeRaw(raw)
}

func (c *conn) writeRaw(raw []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, raw)
}

func (c *conn) ack(req *packet, channelID string, payload any) {
	raw, _ := json.Marshal(payload)
	p := &packet{RequestID: req.RequestID, ReplyTo: req.PacketID, Type: req.Type + ".ack", Payload: raw}
	if channelID != "" {
		p.ConnectorChannelID = strp(channelID)
	}
	c.write(p)
}

func (c *conn) ackError(req *packet, channelID, code, msg string) {
	p := &packet{RequestID: req.RequestID, ReplyTo: req.PacketID, Type: req.Type + ".ack", Error: &packetError{Code: code, Message: msg}}
	if channelID != "" {
		p.ConnectorChannelID = strp(channelID)
	}
	c.write(p)
}

func (c *conn) sendError(reqID, channelID, code, msg string) {
	p := &packet{RequestID: reqID, Type: "error", Error: &packetError{Code: code, Message: msg}}
	if channelID != "" {
		p.ConnectorChannelID = strp(channelID)
	}
	c.write(p)
}

func (c *conn) pingLoop() {
	t := time.NewTicker(c.s.o.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.write(&packet{RequestID: newID("sreq_"), Type: "ping"})
		}
	}
}

// userLevel lists the packets that must name an open channel.
var userLevel = map[string]bool{
	"channel.close": true, "auth.start": true, "auth.status": true, "auth.cancel": true,
	"auth.logout": true, "connection.descriptor.get": true, "tool.invoke": true,
	"chat.message": true,
}

func (c *conn) handle(p *packet) {
	s := c.s
	if p.Schema != envelopeSchema || p.PacketID == "" || p.Type == "" {
		c.sendError(p.RequestID, "", "invalid_packet", "invalid envelope")
		return
	}
	switch p.Type {
	case "pong":
		s.mu.Lock()
		s.pongs++
		s.mu.Unlock()
		return
	case "ping":
		c.write(&packet{RequestID: p.RequestID, ReplyTo: p.PacketID, Type: "pong"})
		return
	case "error":
		s.log.Info("xAgent sent an error packet")
		return
	case "chat.message.ack":
		c.chatAck(p)
		return
	}
	if p.RequestID == "" {
		c.sendError("", "", "invalid_packet", "request_id is required")
		return
	}
	if p.Type == "connector.hello" {
		c.hello(p)
		return
	}
	if c.connectorID == "" {
		c.sendError(p.RequestID, "", "hello_required", "connector.hello must complete first")
		return
	}
	if p.Type == "channel.open" {
		c.channelOpen(p)
		return
	}
	if !userLevel[p.Type] {
		c.sendError(p.RequestID, "", "unsupported_packet", "packet type is not supported")
		return
	}
	if p.ConnectorChannelID == nil || *p.ConnectorChannelID == "" {
		c.sendError(p.RequestID, "", "connector_channel_id_required", "connector_channel_id is required")
		return
	}
	chID := *p.ConnectorChannelID
	s.mu.Lock()
	ch := s.channels[chID]
	switch {
	case ch == nil:
		s.mu.Unlock()
		c.sendError(p.RequestID, chID, "connection_not_found", "channel does not exist")
		return
	case ch.owner != c.connectorID:
		s.mu.Unlock()
		c.sendError(p.RequestID, chID, "connector_channel_not_owned", "channel belongs to another runtime instance")
		return
	case !ch.routes[c]:
		s.mu.Unlock()
		c.sendError(p.RequestID, chID, "channel_not_open", "channel.open must complete first")
		return
	}
	s.mu.Unlock()
	switch p.Type {
	case "channel.close":
		s.mu.Lock()
		delete(ch.routes, c)
		s.closes = append(s.closes, chID)
		s.mu.Unlock()
		c.ack(p, chID, map[string]any{"status": "ok"})
	case "connection.descriptor.get":
		s.mu.Lock()
		d := s.descriptorLocked(ch)
		s.mu.Unlock()
		c.ack(p, chID, map[string]any{"connection_descriptor": d})
	case "auth.start":
		c.authStart(p, ch)
	case "auth.status":
		c.authStatus(p, ch)
	case "auth.cancel":
		c.authCancel(p, ch)
	case "auth.logout":
		c.authLogout(p, ch)
	case "tool.invoke":
		c.toolInvoke(p, ch)
	case "chat.message":
		c.chatMessage(p, ch)
	}
}

func parseVersion(v string) (int, int, bool) {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return 0, 0, false
	}
	return a, b, true
}

func (c *conn) hello(p *packet) {
	s := c.s
	var h struct {
		ConnectorCardID   string    `json:"connector_card_id"`
		ConnectorID       string    `json:"connector_id"`
		ProtocolVersion   string    `json:"protocol_version"`
		SupportedProfiles *[]string `json:"supported_profiles"`
	}
	if err := json.Unmarshal(p.Payload, &h); err != nil {
		c.sendError(p.RequestID, "", "invalid_packet", "invalid hello payload")
		return
	}
	if c.connectorID != "" {
		c.sendError(p.RequestID, "", "invalid_packet", "hello already completed")
		return
	}
	if h.ConnectorCardID != s.info.id {
		c.sendError(p.RequestID, "", "connector_card_id_mismatch", "connector_card_id does not match this connector")
		return
	}
	if maj, _, ok := parseVersion(h.ProtocolVersion); !ok || maj < 3 {
		c.sendError(p.RequestID, "", "invalid_packet", "protocol_version 3.0 or later is required")
		return
	}
	if h.SupportedProfiles == nil {
		c.sendError(p.RequestID, "", "invalid_packet", "supported_profiles is required")
		return
	}
	s.mu.Lock()
	r := s.runtimes[h.ConnectorID]
	if r == nil {
		r = &runtimeInst{id: newID("conn_im_ref_")}
		s.runtimes[r.id] = r
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.live++
	c.connectorID = r.id
	c.profiles = *h.SupportedProfiles
	s.hellos = append(s.hellos, Hello{h.ConnectorCardID, h.ConnectorID, h.ProtocolVersion, *h.SupportedProfiles, r.id})
	mis := s.mis
	s.mu.Unlock()
	ack := map[string]any{"connector_card_id": s.info.id, "connector_id": r.id, "protocol_version": s.info.protocol}
	if mis.WrongCardIDInAck {
		ack["connector_card_id"] = "im.someone-else"
	}
	if mis.Protocol20 {
		ack["protocol_version"] = "2.0"
	}
	c.ack(p, "", ack)
}

// enabledProfiles is the intersection of hello's supported_profiles and
// the Card (§5.2).
func (c *conn) enabledProfiles() []string {
	var out []string
	for _, p := range c.s.info.profiles {
		for _, q := range c.profiles {
			if p == q {
				out = append(out, p)
			}
		}
	}
	return out
}

func (c *conn) channelOpen(p *packet) {
	s := c.s
	want := ""
	if p.ConnectorChannelID != nil {
		want = *p.ConnectorChannelID
	}
	profiles := c.enabledProfiles()
	if len(profiles) == 0 {
		c.sendError(p.RequestID, want, "unsupported_packet", "no profile in common with this connector")
		return
	}
	s.mu.Lock()
	s.opens = append(s.opens, want)
	ch := s.channels[want]
	if ch == nil {
		ch = &channel{id: newID("cch_"), routes: map[*conn]bool{}}
		s.channels[ch.id] = ch
	}
	ch.owner = c.connectorID
	ch.profiles = profiles
	ch.routes[c] = true
	d := s.descriptorLocked(ch)
	s.mu.Unlock()
	c.ack(p, ch.id, map[string]any{"connector_channel_id": ch.id, "connection_descriptor": d})
	// Reopening a channel restores unfinished delivery (§11).
	go s.redeliver(ch.id)
}

// descriptorLocked builds the channel's Connection Descriptor.
func (s *Server) descriptorLocked(ch *channel) map[string]any {
	status := "created"
	display := s.info.label + " (not bound)"
	hint := ""
	if ch.authenticated {
		status = "connected"
		hint = mask(ch.account)
		display = s.info.label + " " + hint
	}
	var tools []map[string]any
	for _, id := range s.info.tools {
		st, perm := "requires_reauth", "unknown"
		if ch.authenticated {
			st, perm = "available", "granted"
			if o, ok := s.toolOver[id]; ok {
				st, perm = o[0], o[1]
			}
		}
		tools = append(tools, map[string]any{"tool_id": id, "status": st, "target_permission_state": perm})
	}
	target := map[string]any{"provider": s.info.provider, "label": s.info.label, "display_name": display}
	if hint != "" {
		target["account_hint"] = hint
	}
	return map[string]any{
		"schema": descriptorSchema,
		"connection": map[string]any{
			"connector_card_id":    s.info.id,
			"connector_id":         ch.owner,
			"connector_channel_id": ch.id,
			"target_type":          s.info.targetTyp,
			"profiles":             ch.profiles,
			"status":               status,
		},
		"target": target,
		"tools":  tools,
	}
}

// mask keeps a redacted account hint, never the real identity.
func mask(account string) string {
	if len(account) <= 2 {
		return "***"
	}
	return account[:2] + "***"
}

// pushDescriptorLocked returns a function that pushes the channel's
// descriptor to all its routes (called after unlocking).
func (s *Server) pushDescriptorLocked(ch *channel) func() {
	d := s.descriptorLocked(ch)
	var routes []*conn
	for c := range ch.routes {
		routes = append(routes, c)
	}
	id := ch.id
	return func() {
		raw, _ := json.Marshal(map[string]any{"connection_descriptor": d})
		for _, c := range routes {
			c.write(&packet{Type: "connection.descriptor.push", ConnectorChannelID: strp(id), Payload: raw})
		}
	}
}

func (c *conn) authStart(p *packet, ch *channel) {
	s := c.s
	var in struct {
		FlowID string            `json:"flow_id"`
		Input  map[string]string `json:"input"`
	}
	if err := json.Unmarshal(p.Payload, &in); err != nil {
		c.ackError(p, ch.id, "invalid_packet", "invalid auth.start payload")
		return
	}
	switch s.info.flows[in.FlowID] {
	case "form":
		if in.Input["account"] == "" || in.Input["token"] == "" {
			c.ackError(p, ch.id, "invalid_input", "account and token are required")
			return
		}
		if subtle.ConstantTimeCompare([]byte(in.Input["token"]), []byte(s.o.FormToken)) != 1 {
			c.ack(p, ch.id, map[string]any{"connector_channel_id": ch.id, "flow_id": in.FlowID,
				"auth_session_id": newID("auth_"), "status": "failed", "message": "the target system rejected the credentials"})
			return
		}
		s.mu.Lock()
		ch.authenticated = true
		ch.account = in.Input["account"]
		d := s.descriptorLocked(ch)
		push := s.pushDescriptorLocked(ch)
		s.mu.Unlock()
		c.ack(p, ch.id, map[string]any{"connector_channel_id": ch.id, "flow_id": in.FlowID,
			"auth_session_id": newID("auth_"), "status": "authenticated", "message": "account bound",
			"connection_descriptor": d})
		push()
	case "qr_login":
		a := &authSession{id: newID("auth_"), channel: ch.id, flow: in.FlowID}
		s.mu.Lock()
		s.auths[a.id] = a
		s.mu.Unlock()
		c.ack(p, ch.id, s.qrState(a, ch, "pending", "Scan the QR code to sign in"))
	default:
		c.ackError(p, ch.id, "auth_flow_not_found", "no such authentication flow")
	}
}

func (s *Server) qrState(a *authSession, ch *channel, status, msg string) map[string]any {
	return map[string]any{
		"connector_channel_id": ch.id, "flow_id": a.flow, "auth_session_id": a.id, "status": status,
		"qr_code_text": "refconnector://login/" + newID(""), "expires_at": time.Now().Add(2 * time.Minute).UnixMilli(),
		"poll_interval_millis": s.o.QRPollMillis, "message": msg,
	}
}

// authStatus scripts the QR flow: the first poll asks for a refresh, the
// first poll after the refresh reports scanned, the next authenticated.
func (c *conn) authStatus(p *packet, ch *channel) {
	s := c.s
	var in struct {
		FlowID        string `json:"flow_id"`
		AuthSessionID string `json:"auth_session_id"`
		Refresh       bool   `json:"refresh"`
	}
	json.Unmarshal(p.Payload, &in)
	s.mu.Lock()
	a := s.auths[in.AuthSessionID]
	if a == nil || a.channel != ch.id {
		s.mu.Unlock()
		c.ackError(p, ch.id, "auth_session_not_found", "authentication session does not exist")
		return
	}
	if in.Refresh {
		a.refreshed, a.polls = true, 0
		s.mu.Unlock()
		c.ack(p, ch.id, s.qrState(a, ch, "pending", "A new QR code is ready"))
		return
	}
	a.polls++
	switch {
	case !a.refreshed:
		s.mu.Unlock()
		st := s.qrState(a, ch, "qr_refresh_required", "The QR code expired")
		delete(st, "qr_code_text")
		c.ack(p, ch.id, st)
	case a.polls == 1:
		s.mu.Unlock()
		st := s.qrState(a, ch, "scanned", "Scanned; confirm on the phone")
		delete(st, "qr_code_text")
		c.ack(p, ch.id, st)
	default:
		delete(s.auths, a.id)
		ch.authenticated = true
		ch.account = "qr-user"
		d := s.descriptorLocked(ch)
		push := s.pushDescriptorLocked(ch)
		s.mu.Unlock()
		c.ack(p, ch.id, map[string]any{"connector_channel_id": ch.id, "flow_id": a.flow, "auth_session_id": a.id,
			"status": "authenticated", "message": "signed in", "connection_descriptor": d})
		push()
	}
}

func (c *conn) authCancel(p *packet, ch *channel) {
	s := c.s
	var in struct {
		AuthSessionID string `json:"auth_session_id"`
	}
	json.Unmarshal(p.Payload, &in)
	s.mu.Lock()
	a := s.auths[in.AuthSessionID]
	status, authStatus := "not_found", "unauthenticated"
	if a != nil && a.channel == ch.id {
		delete(s.auths, a.id)
		status = "canceled"
	}
	if ch.authenticated {
		authStatus = "authenticated"
		if a == nil {
			status = "ignored"
		}
	}
	s.mu.Unlock()
	c.ack(p, ch.id, map[string]any{"connector_channel_id": ch.id, "auth_session_id": in.AuthSessionID,
		"status": status, "auth_status": authStatus, "message": "Authentication canceled"})
}

func (c *conn) authLogout(p *packet, ch *channel) {
	s := c.s
	s.mu.Lock()
	ch.authenticated = false
	ch.account = ""
	d := s.descriptorLocked(ch)
	push := s.pushDescriptorLocked(ch)
	s.mu.Unlock()
	c.ack(p, ch.id, map[string]any{"status": "ok", "connection_descriptor": d})
	push()
}

func (c *conn) toolInvoke(p *packet, ch *channel) {
	s := c.s
	var in struct {
		ToolID    string          `json:"tool_id"`
		Arguments json.RawMessage `json:"arguments"`
		Context   struct {
			SessionID  string `json:"session_id"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"context"`
	}
	if err := json.Unmarshal(p.Payload, &in); err != nil {
		c.ackError(p, ch.id, "invalid_packet", "invalid tool.invoke payload")
		return
	}
	var args map[string]any
	json.Unmarshal(in.Arguments, &args)
	argCh, _ := args["connector_channel_id"].(string)
	s.mu.Lock()
	s.invokes = append(s.invokes, Invocation{ToolID: in.ToolID, ChannelID: ch.id, Arguments: in.Arguments,
		SessionID: in.Context.SessionID, ToolCallID: in.Context.ToolCallID, RequestID: p.RequestID, ChannelArgSet: argCh == ch.id})
	known := false
	for _, t := range s.info.tools {
		known = known || t == in.ToolID
	}
	st := "available"
	if o, ok := s.toolOver[in.ToolID]; ok {
		st = o[0]
	}
	authed := ch.authenticated
	mis := s.mis
	s.mu.Unlock()
	switch {
	case !known:
		c.ackError(p, ch.id, "tool_not_found", "the tool is not in the Connector Card")
		return
	case !authed:
		c.sendError(p.RequestID, ch.id, "connection_not_authenticated", "the channel is not authenticated")
		return
	case st != "available":
		c.sendError(p.RequestID, ch.id, "connector_channel_unavailable", "the tool is unavailable on this channel")
		return
	}
	if mis.ErrorPacketOnInvoke != "" {
		c.sendError(p.RequestID, ch.id, mis.ErrorPacketOnInvoke, "refused by the error-packet switch")
		return
	}
	if mis.DisconnectMidInvoke && in.ToolID != "slow_count" {
		c.ws.CloseNow()
		return
	}
	go c.runTool(p, ch.id, in.ToolID, args, mis)
}

func (c *conn) runTool(p *packet, chID, tool string, args map[string]any, mis Misbehaviour) {
	var result any
	var fail *packetError
	switch tool {
	case "echo":
		text, _ := args["text"].(string)
		argCh, _ := args["connector_channel_id"].(string)
		result = map[string]any{"text": text, "channel_matches": argCh == chID}
	case "slow_count":
		steps := intArg(args, "steps", 5, 1, 100)
		delay := intArg(args, "delay_ms", 50, 0, 5000)
		for i := 1; i <= steps; i++ {
			select {
			case <-time.After(time.Duration(delay) * time.Millisecond):
			case <-c.ctx.Done():
				return
			}
			raw, _ := json.Marshal(map[string]any{"tool_id": tool, "status": "running",
				"message": fmt.Sprintf("step %d of %d", i, steps), "progress": float64(i) / float64(steps)})
			reqID := p.RequestID
			if mis.ProgressWithoutRequestID {
				reqID = ""
			}
			c.write(&packet{RequestID: reqID, Type: "tool.progress.push", ConnectorChannelID: strp(chID), Payload: raw})
			if mis.DisconnectMidInvoke {
				c.ws.CloseNow()
				return
			}
		}
		result = map[string]any{"count": steps}
	case "always_fail":
		fail = &packetError{Code: "target_rejected", Message: "the target system rejected the request"}
	case "leak_key":
		result = map[string]any{
			"debug":  "Authorization: Bearer " + c.s.o.APIKey,
			"nested": map[string]any{"api_key": c.s.o.APIKey, "list": []any{"x", c.s.o.APIKey + "-suffix"}},
		}
	}
	if mis.MalformedJSON {
		c.writeRaw([]byte(`{"schema":"xagent.connector.packet/v1","type":"tool.invoke.ack",`))
	}
	if fail != nil {
		c.ackError(p, chID, fail.Code, fail.Message)
		return
	}
	if mis.OversizedPackets {
		result = map[string]any{"padding": strings.Repeat("x", 2<<20)}
	}
	c.ack(p, chID, map[string]any{"tool_id": tool, "result": result})
}

func intArg(args map[string]any, name string, def, lo, hi int) int {
	f, ok := args[name].(float64)
	if !ok {
		return def
	}
	n := int(f)
	return max(lo, min(hi, n))
}

// ErrNotListening is returned by Restart on a server built with New.
var ErrNotListening = errors.New("connectortest: server is not listening")

// DescriptorJSON is a Connection Descriptor of the default Card's tools
// (channel cch_1, connected), after mod edits its document; for tests.
func DescriptorJSON(mod func(m map[string]any)) json.RawMessage {
	m := map[string]any{
		"schema": "xagent.connection/v2",
		"connection": map[string]any{
			"connector_card_id": "im.refconnector", "connector_id": "conn_1", "connector_channel_id": "cch_1",
			"target_type": "im", "profiles": []any{"xagent.im.v2"}, "status": "connected",
		},
		"target": map[string]any{"provider": "refim"},
		"tools": []any{
			map[string]any{"tool_id": "echo", "status": "available", "target_permission_state": "granted"},
			map[string]any{"tool_id": "slow_count", "status": "unavailable"},
			map[string]any{"tool_id": "always_fail", "status": "available", "target_permission_state": "denied"},
			map[string]any{"tool_id": "leak_key", "status": "available"},
		},
	}
	if mod != nil {
		mod(m)
	}
	raw, _ := json.Marshal(m)
	return raw
}
