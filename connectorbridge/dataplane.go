package connectorbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/internal/ids"
)

// errSessionLost reports that the data plane closed while a request was
// outstanding. The request is never re-sent.
var errSessionLost = errors.New("connector data plane lost")

// errNotSent reports that the session had ended before the request was
// written: nothing reached the connector, so another session may take it.
var errNotSent = errors.New("connector data plane closed before sending")

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

// session is one WebSocket data plane: one runtime instance (connector_id)
// of the connector. A reconnect makes a new session; nothing on an old
// session is ever rewritten (architecture §3.4).
type session struct {
	c           *Client
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
	pending map[string]*pending

	badPackets  atomic.Int64
	unsupported atomic.Int64
	unrouted    atomic.Int64 // progress packets without request_id
	inbound     atomic.Int64
}

// pending is one outstanding request.
type pending struct {
	typ       string
	channelID string
	ack       chan *wire.Packet // capacity 1: the ack or error
	progress  chan *wire.Packet // invocations only
}

// dial opens /ws with the subprotocol and the Bearer key (§6).
func (c *Client) dial(ctx context.Context) (*session, error) {
	dctx, cancel := context.WithTimeout(ctx, c.o.RequestTimeout)
	defer cancel()
	hdr := http.Header{}
	if c.o.APIKey != "" {
		hdr.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	conn, resp, err := websocket.Dial(dctx, wire.WSURL(c.base), &websocket.DialOptions{
		HTTPClient:   c.wsHTTP,
		HTTPHeader:   hdr,
		Subprotocols: []string{wire.Subprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, &transport.HTTPError{Endpoint: "/ws", Code: resp.StatusCode}
		}
		return nil, fmt.Errorf("connector /ws: %s", c.red.Scrub(transport.NetReason(err)))
	}
	if conn.Subprotocol() != wire.Subprotocol {
		conn.Close(websocket.StatusPolicyViolation, "subprotocol required")
		return nil, errors.New("connector /ws did not accept the subprotocol " + wire.Subprotocol)
	}
	conn.SetReadLimit(c.o.MaxPacketBytes)
	sctx, scancel := context.WithCancel(context.Background())
	s := &session{
		c:       c,
		conn:    conn,
		ctx:     sctx,
		cancel:  scancel,
		done:    make(chan struct{}),
		replies: make(chan *wire.Packet, 64),
		pending: map[string]*pending{},
	}
	go s.readLoop()
	go s.replyLoop()
	return s, nil
}

// end marks the session finished, fails every outstanding request and
// drops the TCP connection.
func (s *session) end(reason string) {
	s.endOnce.Do(func() {
		s.reason = reason
		close(s.done)
		s.cancel()
		s.conn.CloseNow()
		// Forget the session at once so no call picks it up; detach takes
		// the client's lock, which end's callers may hold.
		go s.c.detach(s)
	})
}

// close ends the session with a normal closure.
func (s *session) close(reason string) {
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

func (s *session) alive() bool {
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
func (s *session) readLoop() {
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			s.end(s.readFailure(err))
			return
		}
		if typ != websocket.MessageText {
			s.bad("a binary WebSocket message (only text packets are allowed)")
			s.reply(errorPacket("", wire.CodeInvalidPacket, "text messages only"))
			continue
		}
		p, err := wire.DecodePacket(data)
		if err != nil {
			if errors.Is(err, wire.ErrMalformedJSON) {
				s.bad(fmt.Sprintf("a malformed JSON packet (%d bytes)", len(data)))
			} else {
				s.bad(err.Error())
			}
			s.reply(errorPacket("", wire.CodeInvalidPacket, "invalid JSON or envelope"))
			continue
		}
		s.dispatch(p)
	}
}

// bad logs an invalid packet, rate-limited per session.
func (s *session) bad(what string) {
	n := s.badPackets.Add(1)
	if n <= 5 || n%100 == 0 {
		s.c.log.Warn("connector data plane: ignoring "+what, "count", n)
	}
}

func (s *session) readFailure(err error) string {
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		s.c.log.Warn("connector data plane: a packet exceeds the size limit; closing the connection",
			"limit_bytes", s.c.o.MaxPacketBytes)
		return fmt.Sprintf("packet larger than %d bytes", s.c.o.MaxPacketBytes)
	case s.ctx.Err() != nil:
		return "closed by the gateway"
	}
	if st := websocket.CloseStatus(err); st != -1 {
		return fmt.Sprintf("closed by the connector (WebSocket status %d)", int(st))
	}
	return "connection lost: " + s.c.red.Scrub(transport.NetReason(err))
}

func (s *session) dispatch(p *wire.Packet) {
	switch {
	case p.Type == wire.TypePing:
		s.reply(&wire.Packet{Type: wire.TypePong, RequestID: p.RequestID, ReplyTo: p.PacketID, ConnectorChannelID: p.ConnectorChannelID})
	case p.Type == wire.TypeError:
		if p.RequestID != "" && s.deliver(p) {
			return
		}
		s.c.log.Warn("connector sent an error packet", "code", p.Error.Code)
	case strings.HasSuffix(p.Type, wire.AckSuffix) || p.Type == wire.TypePong:
		if !s.deliver(p) {
			s.c.log.Debug("connector data plane: discarding a late or unknown ack", "type", p.Type)
		}
	case !s.helloDone.Load():
		s.bad("a user-level packet before connector.hello.ack")
		s.reply(errorPacket(p.RequestID, "hello_required", "hello has not completed"))
	case p.Type == wire.TypeToolProgress:
		s.progress(p)
	case p.Type == wire.TypeDescriptorPush:
		s.c.onDescriptorPush(s, p)
	case p.Type == wire.TypeMessagePush || strings.HasPrefix(p.Type, "chat."):
		if s.inbound.Add(1) == 1 {
			s.c.log.Warn("connector pushed an inbound message; this gateway bridges tools only and refuses it", "type", p.Type)
		}
		s.reply(errorPacket(p.RequestID, wire.CodeUnsupportedPacket, "inbound messages are not supported by this xAgent"))
	default:
		if s.unsupported.Add(1) <= 5 {
			s.c.log.Warn("connector sent an unsupported packet type", "type", p.Type)
		}
		s.reply(errorPacket(p.RequestID, wire.CodeUnsupportedPacket, "packet type is not supported"))
	}
}

// deliver hands an ack, pong or error to its request.
func (s *session) deliver(p *wire.Packet) bool {
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
		s.bad("an ack whose type does not match its request")
		p = &wire.Packet{Type: wire.TypeError, RequestID: p.RequestID, Error: &wire.PacketError{Code: wire.CodeInvalidPacket}}
	case pend.typ != wire.TypeChannelOpen && pend.channelID != "" && p.ConnectorChannelID != "" && p.ConnectorChannelID != pend.channelID:
		s.bad("an ack for another channel")
		p = &wire.Packet{Type: wire.TypeError, RequestID: p.RequestID, Error: &wire.PacketError{Code: "connector_channel_connector_mismatch"}}
	}
	pend.ack <- p
	return true
}

// progress routes tool.progress.push to its invocation by request_id only.
// Progress without one is dropped: "the one pending call of that tool" may
// be another caller's, while the call the progress is about was cancelled
// (the connector has no tool cancellation and keeps running it).
func (s *session) progress(p *wire.Packet) {
	if p.RequestID == "" {
		if n := s.unrouted.Add(1); n <= 5 {
			s.c.log.Warn("connector sent tool.progress.push without request_id; dropped (progress is routed by request only)", "dropped", n)
		}
		return
	}
	s.mu.Lock()
	target := s.pending[p.RequestID]
	s.mu.Unlock()
	if target == nil || target.progress == nil || (target.channelID != p.ConnectorChannelID) {
		s.c.log.Debug("connector data plane: progress for no pending invocation ignored")
		return
	}
	select {
	case target.progress <- p:
	default: // progress is advisory; a slow engine drops intermediate steps
	}
}

func errorPacket(requestID, code, msg string) *wire.Packet {
	return &wire.Packet{Type: wire.TypeError, RequestID: requestID, Error: &wire.PacketError{Code: code, Message: msg}}
}

// reply queues a packet from the read loop without blocking it.
func (s *session) reply(p *wire.Packet) {
	select {
	case s.replies <- p:
	default:
	}
}

func (s *session) replyLoop() {
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
func (s *session) write(p *wire.Packet) error {
	p.Schema = wire.PacketSchema
	if p.PacketID == "" {
		p.PacketID = ids.New("pkt_")
	}
	p.Time = s.c.clock.Now().UnixMilli()
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.c.o.RequestTimeout)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageText, data)
}

// register adds a pending request unless the session has ended.
func (s *session) register(reqID string, p *pending) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.alive() {
		return errNotSent
	}
	s.pending[reqID] = p
	return nil
}

func (s *session) abandon(reqID string) {
	s.mu.Lock()
	delete(s.pending, reqID)
	s.mu.Unlock()
}

// send registers and writes a request; the caller waits on pend.ack.
func (s *session) send(typ string, channelScoped bool, channelID string, payload any, pend *pending) (string, error) {
	reqID := ids.New("req_")
	return reqID, s.sendAs(reqID, typ, channelScoped, channelID, payload, pend)
}

// sendWithID sends a user-level request under a request id chosen by the
// caller (tool.invoke reuses it as context.tool_call_id).
func (s *session) sendWithID(reqID, typ, channelID string, payload any, pend *pending) error {
	return s.sendAs(reqID, typ, true, channelID, payload, pend)
}

func (s *session) sendAs(reqID, typ string, channelScoped bool, channelID string, payload any, pend *pending) error {
	var raw json.RawMessage
	if payload != nil {
		var err error
		if raw, err = json.Marshal(payload); err != nil {
			return err
		}
	}
	pend.typ = typ
	pend.channelID = channelID
	pend.ack = make(chan *wire.Packet, 1)
	if err := s.register(reqID, pend); err != nil {
		return err
	}
	p := &wire.Packet{RequestID: reqID, Type: typ, ConnectorChannelID: channelID, ChannelScoped: channelScoped, Payload: raw}
	if err := s.write(p); err != nil {
		s.abandon(reqID)
		s.end("write failed")
		return errSessionLost
	}
	return nil
}

// request sends a request and waits for its ack, bounded by the request
// timeout. An ack carrying an error, or an error packet, is a *RemoteError.
func (s *session) request(ctx context.Context, typ string, channelScoped bool, channelID string, payload any) (*wire.Packet, error) {
	pend := &pending{}
	reqID, err := s.send(typ, channelScoped, channelID, payload, pend)
	if err != nil {
		return nil, err
	}
	timeout := make(chan struct{})
	t := s.c.clock.AfterFunc(s.c.o.RequestTimeout, func() { close(timeout) })
	defer t.Stop()
	select {
	case ack := <-pend.ack:
		if ack.Error != nil || ack.Type == wire.TypeError {
			code := "unknown"
			if ack.Error != nil {
				code = ack.Error.Code
			}
			return ack, &RemoteError{Type: typ, Code: code}
		}
		return ack, nil
	case <-s.done:
		return nil, errSessionLost
	case <-ctx.Done():
		s.abandon(reqID)
		return nil, ctx.Err()
	case <-timeout:
		s.abandon(reqID)
		return nil, fmt.Errorf("connector did not answer %s within %s", typ, s.c.o.RequestTimeout)
	}
}

// helloAck is the connector.hello.ack payload (§8.2).
type helloAck struct {
	ConnectorCardID string `json:"connector_card_id"`
	ConnectorID     string `json:"connector_id"`
	ProtocolVersion string `json:"protocol_version"`
}

// hello performs connector.hello and validates the ack. No user-level
// packet is sent before it returns successfully.
func (s *session) hello(ctx context.Context, card *wire.Card, prevConnectorID string, profiles []string) error {
	payload := map[string]any{
		"connector_card_id":  card.ConnectorCardID,
		"connector_id":       prevConnectorID,
		"protocol_version":   wire.ProtocolVersion,
		"supported_profiles": profiles,
	}
	ack, err := s.request(ctx, wire.TypeHello, false, "", payload)
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
