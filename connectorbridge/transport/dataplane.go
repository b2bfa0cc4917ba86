package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/clock"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/internal/ids"
)

// ErrSessionLost reports that the data plane closed while a request was
// outstanding. The request is never re-sent.
var ErrSessionLost = errors.New("connector data plane lost")

// ErrNotSent reports that the session had ended before the request was
// written: nothing reached the connector, so another session may take it.
var ErrNotSent = errors.New("connector data plane closed before sending")

// RemoteError is an error the connector answered with: an ack's error
// member or an error packet. Its text holds only the packet type and the
// (shape-checked) code, never the connector's message.
type RemoteError struct {
	Type string // packet type that carried it
	Code string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("connector answered %s with error %s", e.Type, e.Code)
}

// DataPlane configures the WebSocket data plane of one connector (§6, §7).
type DataPlane struct {
	Base           *url.URL
	HTTP           *http.Client
	APIKey         string        // the system API key; "" sends no Authorization header
	Timeout        time.Duration // dial and each request
	MaxPacketBytes int64
	Red            *backendkit.Redactor
	Log            *slog.Logger
	Clock          clock.Clock
	// OnEnd is called, in its own goroutine, once a session has ended.
	OnEnd func(*Session)
	// OnDescriptorPush gets each connection.descriptor.push packet.
	OnDescriptorPush func(*Session, *wire.Packet)
	// OnChat gets each IM v2 packet the connector initiates (chat.message,
	// chat.activity) on the read loop; it must not block. Nil refuses
	// them with unsupported_packet, as a tools-only bridge does.
	OnChat func(*Session, *wire.Packet)
}

// Session is one WebSocket data plane: one runtime instance (connector_id)
// of the connector. A reconnect makes a new session; nothing on an old
// session is ever rewritten (architecture §3.4).
type Session struct {
	dp          *DataPlane
	conn        *websocket.Conn
	ctx         context.Context
	cancel      context.CancelFunc
	done        chan struct{}
	endOnce     sync.Once
	reason      string
	replies     chan *wire.Packet
	helloDone   atomic.Bool
	connectorID string // set once by hello, before the session is published

	mu      sync.Mutex
	pending map[string]*Pending

	badPackets  atomic.Int64
	unsupported atomic.Int64
	unrouted    atomic.Int64 // progress packets without request_id
	inbound     atomic.Int64
}

// Pending is one outstanding request.
type Pending struct {
	typ       string
	channelID string
	Ack       chan *wire.Packet // capacity 1: the ack or error
	Progress  chan *wire.Packet // invocations only
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Reason says why the session ended; valid once Done is closed.
func (s *Session) Reason() string { return s.reason }

// ConnectorID is the runtime-instance id the hello ack assigned.
func (s *Session) ConnectorID() string { return s.connectorID }

// Dial opens /ws with the subprotocol and the Bearer key (§6).
func (dp *DataPlane) Dial(ctx context.Context) (*Session, error) {
	dctx, cancel := context.WithTimeout(ctx, dp.Timeout)
	defer cancel()
	hdr := http.Header{}
	if dp.APIKey != "" {
		hdr.Set("Authorization", "Bearer "+dp.APIKey)
	}
	conn, resp, err := websocket.Dial(dctx, wire.WSURL(dp.Base), &websocket.DialOptions{
		HTTPClient:   dp.HTTP,
		HTTPHeader:   hdr,
		Subprotocols: []string{wire.Subprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &HTTPError{Endpoint: "/ws", Code: resp.StatusCode}
		}
		return nil, fmt.Errorf("connector /ws: %s", dp.Red.Scrub(NetReason(err)))
	}
	if conn.Subprotocol() != wire.Subprotocol {
		conn.Close(websocket.StatusPolicyViolation, "subprotocol required")
		return nil, errors.New("connector /ws did not accept the subprotocol " + wire.Subprotocol)
	}
	conn.SetReadLimit(dp.MaxPacketBytes)
	sctx, scancel := context.WithCancel(context.Background())
	s := &Session{
		dp:      dp,
		conn:    conn,
		ctx:     sctx,
		cancel:  scancel,
		done:    make(chan struct{}),
		replies: make(chan *wire.Packet, 64),
		pending: map[string]*Pending{},
	}
	go s.readLoop()
	go s.replyLoop()
	return s, nil
}

// end marks the session finished, fails every outstanding request and
// drops the TCP connection.
func (s *Session) end(reason string) {
	s.endOnce.Do(func() {
		s.reason = reason
		close(s.done)
		s.cancel()
		s.conn.CloseNow()
		// Forget the session at once so no call picks it up; detach takes
		// the client's lock, which end's callers may hold.
		go s.dp.OnEnd(s)
	})
}

// Close ends the session with a normal closure.
func (s *Session) Close(reason string) {
	select {
	case <-s.done:
		return
	default:
	}
	// Close waits for the peer's close frame; bound it so a silent peer
	// cannot hold a shutdown.
	closed := make(chan struct{})
	go func() {
		s.conn.Close(websocket.StatusNormalClosure, "")
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
	}
	s.end(reason)
}

func (s *Session) Alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// readLoop reads one JSON packet per text message and dispatches it. It
// never blocks on slow work: acks go to buffered channels, replies to the
// reply queue.
func (s *Session) readLoop() {
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			s.end(s.readFailure(err))
			return
		}
		if typ != websocket.MessageText {
			s.Bad("a binary WebSocket message (only text packets are allowed)")
			s.reply(errorPacket("", wire.CodeInvalidPacket, "text messages only"))
			continue
		}
		p, err := wire.DecodePacket(data)
		if err != nil {
			if errors.Is(err, wire.ErrMalformedJSON) {
				s.Bad(fmt.Sprintf("a malformed JSON packet (%d bytes)", len(data)))
			} else {
				s.Bad(err.Error())
			}
			s.reply(errorPacket("", wire.CodeInvalidPacket, "invalid JSON or envelope"))
			continue
		}
		s.Dispatch(p)
	}
}

// Bad logs an invalid packet, rate-limited per session.
func (s *Session) Bad(what string) {
	n := s.badPackets.Add(1)
	if n <= 5 || n%100 == 0 {
		s.dp.Log.Warn("connector data plane: ignoring "+what, "count", n)
	}
}

func (s *Session) readFailure(err error) string {
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		s.dp.Log.Warn("connector data plane: a packet exceeds the size limit; closing the connection",
			"limit_bytes", s.dp.MaxPacketBytes)
		return fmt.Sprintf("packet larger than %d bytes", s.dp.MaxPacketBytes)
	case s.ctx.Err() != nil:
		return "closed by the gateway"
	}
	if st := websocket.CloseStatus(err); st != -1 {
		return fmt.Sprintf("closed by the connector (WebSocket status %d)", int(st))
	}
	return "connection lost: " + s.dp.Red.Scrub(NetReason(err))
}

func (s *Session) Dispatch(p *wire.Packet) {
	switch {
	case p.Type == wire.TypePing:
		s.reply(&wire.Packet{Type: wire.TypePong, RequestID: p.RequestID, ReplyTo: p.PacketID, ConnectorChannelID: p.ConnectorChannelID})
	case p.Type == wire.TypeError:
		if p.RequestID != "" && s.deliver(p) {
			return
		}
		s.dp.Log.Warn("connector sent an error packet", "code", p.Error.Code)
	case strings.HasSuffix(p.Type, wire.AckSuffix) || p.Type == wire.TypePong:
		if !s.deliver(p) {
			s.dp.Log.Debug("connector data plane: discarding a late or unknown ack", "type", p.Type)
		}
	case !s.helloDone.Load():
		s.Bad("a user-level packet before connector.hello.ack")
		s.reply(errorPacket(p.RequestID, "hello_required", "hello has not completed"))
	case p.Type == wire.TypeToolProgress:
		s.progress(p)
	case p.Type == wire.TypeDescriptorPush:
		s.dp.OnDescriptorPush(s, p)
	case s.dp.OnChat != nil && (p.Type == wire.TypeChatMessage || p.Type == wire.TypeChatActivity):
		s.dp.OnChat(s, p)
	case p.Type == wire.TypeMessagePush || strings.HasPrefix(p.Type, "chat."):
		if s.inbound.Add(1) == 1 {
			s.dp.Log.Warn("connector pushed an inbound message; this gateway bridges tools only and refuses it", "type", p.Type)
		}
		s.reply(errorPacket(p.RequestID, wire.CodeUnsupportedPacket, "inbound messages are not supported by this xAgent"))
	default:
		if s.unsupported.Add(1) <= 5 {
			s.dp.Log.Warn("connector sent an unsupported packet type", "type", p.Type)
		}
		s.reply(errorPacket(p.RequestID, wire.CodeUnsupportedPacket, "packet type is not supported"))
	}
}

// deliver hands an ack, pong or error to its request.
func (s *Session) deliver(p *wire.Packet) bool {
	s.mu.Lock()
	pend, ok := s.pending[p.RequestID]
	if ok {
		delete(s.pending, p.RequestID)
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	want := pend.typ + wire.AckSuffix
	if pend.typ == wire.TypePing {
		want = wire.TypePong
	}
	switch {
	case p.Type != wire.TypeError && p.Type != want:
		s.Bad("an ack whose type does not match its request")
		p = &wire.Packet{Type: wire.TypeError, RequestID: p.RequestID, Error: &wire.PacketError{Code: wire.CodeInvalidPacket}}
	case pend.typ != wire.TypeChannelOpen && pend.channelID != "" && p.ConnectorChannelID != "" && p.ConnectorChannelID != pend.channelID:
		s.Bad("an ack for another channel")
		p = &wire.Packet{Type: wire.TypeError, RequestID: p.RequestID, Error: &wire.PacketError{Code: "connector_channel_connector_mismatch"}}
	}
	pend.Ack <- p
	return true
}

// progress routes tool.progress.push to its invocation by request_id only.
// Progress without one is dropped: "the one pending call of that tool" may
// be another caller's, while the call the progress is about was cancelled
// (the connector has no tool cancellation and keeps running it).
func (s *Session) progress(p *wire.Packet) {
	if p.RequestID == "" {
		if n := s.unrouted.Add(1); n <= 5 {
			s.dp.Log.Warn("connector sent tool.progress.push without request_id; dropped (progress is routed by request only)", "dropped", n)
		}
		return
	}
	s.mu.Lock()
	target := s.pending[p.RequestID]
	s.mu.Unlock()
	if target == nil || target.Progress == nil || (target.channelID != p.ConnectorChannelID) {
		s.dp.Log.Debug("connector data plane: progress for no pending invocation ignored")
		return
	}
	select {
	case target.Progress <- p:
	default: // progress is advisory; a slow engine drops intermediate steps
	}
}

func errorPacket(requestID, code, msg string) *wire.Packet {
	return &wire.Packet{Type: wire.TypeError, RequestID: requestID, Error: &wire.PacketError{Code: code, Message: msg}}
}

// Reply queues a packet without blocking (dropped when the queue is full:
// the connector owns redelivery of what it pushed).
func (s *Session) Reply(p *wire.Packet) { s.reply(p) }

// reply queues a packet from the read loop without blocking it.
func (s *Session) reply(p *wire.Packet) {
	select {
	case s.replies <- p:
	default:
	}
}

func (s *Session) replyLoop() {
	for {
		select {
		case <-s.done:
			return
		case p := <-s.replies:
			if err := s.write(p); err != nil {
				s.end("write failed")
				return
			}
		}
	}
}

// write stamps and sends one packet.
func (s *Session) write(p *wire.Packet) error {
	p.Schema = wire.PacketSchema
	if p.PacketID == "" {
		p.PacketID = ids.New("pkt_")
	}
	p.Time = s.dp.Clock.Now().UnixMilli()
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.dp.Timeout)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageText, data)
}

// Push writes one packet the gateway initiates or answers (a
// chat.message.ack) outside the request table.
func (s *Session) Push(p *wire.Packet) error {
	if !s.Alive() {
		return ErrNotSent
	}
	if err := s.write(p); err != nil {
		s.end("write failed")
		return ErrSessionLost
	}
	return nil
}

// register adds a pending request unless the session has ended.
func (s *Session) register(reqID string, p *Pending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.Alive() {
		return ErrNotSent
	}
	s.pending[reqID] = p
	return nil
}

func (s *Session) Abandon(reqID string) {
	s.mu.Lock()
	delete(s.pending, reqID)
	s.mu.Unlock()
}

// send registers and writes a request; the caller waits on pend.ack.
func (s *Session) send(typ string, channelScoped bool, channelID string, payload any, pend *Pending) (string, error) {
	reqID := ids.New("req_")
	return reqID, s.sendAs(reqID, typ, channelScoped, channelID, payload, pend)
}

// SendWithID sends a user-level request under a request id chosen by the
// caller (tool.invoke reuses it as context.tool_call_id).
func (s *Session) SendWithID(reqID, typ, channelID string, payload any, pend *Pending) error {
	return s.sendAs(reqID, typ, true, channelID, payload, pend)
}

func (s *Session) sendAs(reqID, typ string, channelScoped bool, channelID string, payload any, pend *Pending) error {
	var raw json.RawMessage
	if payload != nil {
		var err error
		if raw, err = json.Marshal(payload); err != nil {
			return err
		}
	}
	pend.typ = typ
	pend.channelID = channelID
	pend.Ack = make(chan *wire.Packet, 1)
	if err := s.register(reqID, pend); err != nil {
		return err
	}
	p := &wire.Packet{RequestID: reqID, Type: typ, ConnectorChannelID: channelID, ChannelScoped: channelScoped, Payload: raw}
	if err := s.write(p); err != nil {
		s.Abandon(reqID)
		s.end("write failed")
		return ErrSessionLost
	}
	return nil
}

// Request sends a request and waits for its ack, bounded by the request
// timeout. An ack carrying an error, or an error packet, is a *RemoteError.
func (s *Session) Request(ctx context.Context, typ string, channelScoped bool, channelID string, payload any) (*wire.Packet, error) {
	pend := &Pending{}
	reqID, err := s.send(typ, channelScoped, channelID, payload, pend)
	if err != nil {
		return nil, err
	}
	timeout := make(chan struct{})
	t := s.dp.Clock.AfterFunc(s.dp.Timeout, func() { close(timeout) })
	defer t.Stop()
	select {
	case ack := <-pend.Ack:
		if ack.Error != nil || ack.Type == wire.TypeError {
			code := "unknown"
			if ack.Error != nil {
				code = ack.Error.Code
			}
			return ack, &RemoteError{Type: typ, Code: code}
		}
		return ack, nil
	case <-s.done:
		return nil, ErrSessionLost
	case <-ctx.Done():
		s.Abandon(reqID)
		return nil, ctx.Err()
	case <-timeout:
		s.Abandon(reqID)
		return nil, fmt.Errorf("connector did not answer %s within %s", typ, s.dp.Timeout)
	}
}

// helloAck is the connector.hello.ack payload (§8.2).
type helloAck struct {
	ConnectorCardID string `json:"connector_card_id"`
	ConnectorID     string `json:"connector_id"`
	ProtocolVersion string `json:"protocol_version"`
}

// Hello performs connector.hello and validates the ack. No user-level
// packet is sent before it returns successfully.
func (s *Session) Hello(ctx context.Context, card *wire.Card, prevConnectorID string, profiles []string) error {
	payload := map[string]any{
		"connector_card_id":  card.ConnectorCardID,
		"connector_id":       prevConnectorID,
		"protocol_version":   wire.ProtocolVersion,
		"supported_profiles": profiles,
	}
	ack, err := s.Request(ctx, wire.TypeHello, false, "", payload)
	if err != nil {
		return fmt.Errorf("connector.hello: %w", err)
	}
	var a helloAck
	if err := json.Unmarshal(ack.Payload, &a); err != nil {
		return errors.New("connector.hello.ack: payload is not a valid object")
	}
	if a.ConnectorCardID != card.ConnectorCardID {
		return errors.New("connector.hello.ack: connector_card_id does not match the Connector Card")
	}
	if !wire.ValidWireID(a.ConnectorID) {
		return errors.New("connector.hello.ack: connector_id is missing or malformed")
	}
	if err := wire.CheckProtocol("connector.hello.ack", a.ProtocolVersion); err != nil {
		return err
	}
	v1, _ := wire.ParseProtocol(a.ProtocolVersion)
	v2, _ := wire.ParseProtocol(card.ProtocolVersion)
	if v1 != v2 {
		return errors.New("connector.hello.ack: protocol_version does not match the Connector Card")
	}
	s.connectorID = a.ConnectorID
	s.helloDone.Store(true)
	return nil
}
