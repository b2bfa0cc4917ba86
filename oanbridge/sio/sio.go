// Package sio is the small Socket.IO client the OAN connector needs: one
// namespace over Engine.IO v4 on a WebSocket (no long-polling, no binary
// packets, no acks), Socket.IO protocol v5. It exists because the
// maintained Go port (github.com/zishang520/socket.io v3.0.6) brings a
// second WebSocket library, QUIC and WebTransport, an HTTP client
// framework and terminal colouring for what is here a few hundred lines;
// see docs/design-notes.md. It is tested against the real Node socket.io
// server.
package sio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Options configure one connection.
type Options struct {
	// URL is the server's http(s) origin; the WebSocket goes to the same
	// host (ws/wss) at Path.
	URL       string
	Path      string // default "/socket.io/"
	Namespace string // e.g. "/oan"
	// Auth is the CONNECT packet's auth object (handshake.auth). It is
	// sent inside the WebSocket, never in the URL.
	Auth any
	// HTTPClient dials the upgrade; it should refuse redirects.
	HTTPClient *http.Client
	// MaxMessage bounds one incoming frame (default 1 MiB).
	MaxMessage int64
	// EventBuffer is the Events channel's capacity (default 256).
	EventBuffer int
}

// Event is one EVENT packet: its name and raw JSON arguments.
type Event struct {
	Name string
	Args []json.RawMessage
}

// ConnectError is the server's connect_error (CONNECT_ERROR packet): the
// namespace refused the handshake (bad token, banned account, …).
type ConnectError struct{ Message string }

func (e *ConnectError) Error() string {
	return "socket.io connect_error: " + e.Message
}

// ErrServerDisconnect is "io server disconnect": the server ended the
// namespace session (e.g. a revoked key). Socket.IO clients do not
// reconnect by themselves after it.
var ErrServerDisconnect = errors.New("socket.io: io server disconnect")

// ErrPingTimeout means the server stopped pinging.
var ErrPingTimeout = errors.New("socket.io: ping timeout")

// Conn is a connected namespace.
type Conn struct {
	ws     *websocket.Conn
	ns     string
	events chan Event
	done   chan struct{}

	mu  sync.Mutex
	err error

	pingInterval, pingTimeout time.Duration
	ping                      chan struct{}
	cancel                    context.CancelFunc
}

type openPacket struct {
	SID          string `json:"sid"`
	PingInterval int    `json:"pingInterval"`
	PingTimeout  int    `json:"pingTimeout"`
	MaxPayload   int    `json:"maxPayload"`
}

// Dial opens the WebSocket, reads the Engine.IO open packet, connects the
// namespace with Auth and returns once the server accepted it. A refusal
// is a *ConnectError.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Host == "" {
		return nil, errors.New("socket.io: bad server URL")
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return nil, errors.New("socket.io: server URL must be http or https")
	}
	p := o.Path
	if p == "" {
		p = "/socket.io/"
	}
	u.Path, u.RawQuery, u.Fragment = p, "EIO=4&transport=websocket", ""
	if o.MaxMessage <= 0 {
		o.MaxMessage = 1 << 20
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = 256
	}
	if o.Namespace == "" {
		o.Namespace = "/"
	}
	ws, resp, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{HTTPClient: o.HTTPClient})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("socket.io: upgrade refused with HTTP %d", resp.StatusCode)
		}
		return nil, fmt.Errorf("socket.io: %w", err)
	}
	ws.SetReadLimit(o.MaxMessage)
	c := &Conn{ws: ws, ns: o.Namespace, events: make(chan Event, o.EventBuffer), done: make(chan struct{}), ping: make(chan struct{}, 1)}
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	if err := c.handshake(hctx, o.Auth); err != nil {
		ws.Close(websocket.StatusNormalClosure, "")
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.readLoop(rctx)
	go c.watchdog(rctx)
	return c, nil
}

func (c *Conn) handshake(ctx context.Context, auth any) error {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return fmt.Errorf("socket.io: reading the open packet: %w", err)
	}
	if typ != websocket.MessageText || len(data) == 0 || data[0] != '0' {
		return errors.New("socket.io: the server did not open an Engine.IO v4 session")
	}
	var op openPacket
	if err := json.Unmarshal(data[1:], &op); err != nil || op.SID == "" || op.PingInterval <= 0 || op.PingTimeout <= 0 {
		return errors.New("socket.io: malformed open packet")
	}
	c.pingInterval = time.Duration(op.PingInterval) * time.Millisecond
	c.pingTimeout = time.Duration(op.PingTimeout) * time.Millisecond
	pkt := "40"
	if c.ns != "/" {
		pkt += c.ns + ","
	}
	if auth != nil {
		a, err := json.Marshal(auth)
		if err != nil {
			return errors.New("socket.io: auth is not JSON")
		}
		pkt += string(a)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(pkt)); err != nil {
		return fmt.Errorf("socket.io: %w", err)
	}
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("socket.io: waiting for the namespace: %w", err)
		}
		if typ != websocket.MessageText || len(data) == 0 {
			return errors.New("socket.io: unexpected binary frame")
		}
		switch data[0] {
		case '2': // ping before the namespace answered
			if err := c.ws.Write(ctx, websocket.MessageText, []byte("3")); err != nil {
				return fmt.Errorf("socket.io: %w", err)
			}
			continue
		case '4':
		default:
			continue
		}
		sp, err := parsePacket(string(data[1:]))
		if err != nil {
			return err
		}
		if sp.ns != c.ns {
			continue
		}
		switch sp.typ {
		case '0':
			return nil
		case '4':
			var m struct {
				Message string `json:"message"`
			}
			json.Unmarshal([]byte(sp.data), &m)
			return &ConnectError{Message: bounded(m.Message, 200)}
		default:
			return errors.New("socket.io: unexpected packet before the namespace connected")
		}
	}
}

// Events delivers EVENT packets in order. It is closed when the
// connection ends; Err then says why.
func (c *Conn) Events() <-chan Event { return c.events }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it is up).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection, telling the server.
func (c *Conn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pkt := "41"
	if c.ns != "/" {
		pkt += c.ns + ","
	}
	c.ws.Write(ctx, websocket.MessageText, []byte(pkt))
	c.finish(errors.New("socket.io: closed"))
	return nil
}

func (c *Conn) finish(err error) {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	c.mu.Unlock()
	if first {
		c.cancel()
		c.ws.Close(websocket.StatusNormalClosure, "")
	}
}

func (c *Conn) readLoop(ctx context.Context) {
	defer close(c.done)
	defer close(c.events)
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			c.finish(fmt.Errorf("socket.io: transport closed: %w", err))
			return
		}
		if typ != websocket.MessageText || len(data) == 0 {
			c.finish(errors.New("socket.io: binary frames are not supported"))
			return
		}
		switch data[0] {
		case '1': // engine close
			c.finish(errors.New("socket.io: transport closed by the server"))
			return
		case '2':
			select {
			case c.ping <- struct{}{}:
			default:
			}
			wctx, cancel := context.WithTimeout(ctx, c.pingTimeout)
			err := c.ws.Write(wctx, websocket.MessageText, []byte("3"))
			cancel()
			if err != nil {
				c.finish(fmt.Errorf("socket.io: %w", err))
				return
			}
		case '4':
			sp, err := parsePacket(string(data[1:]))
			if err != nil {
				c.finish(err)
				return
			}
			if sp.ns != c.ns {
				continue
			}
			switch sp.typ {
			case '1':
				c.finish(ErrServerDisconnect)
				return
			case '2':
				var args []json.RawMessage
				if err := json.Unmarshal([]byte(sp.data), &args); err != nil || len(args) == 0 {
					continue // a malformed event is dropped, not fatal
				}
				var name string
				if json.Unmarshal(args[0], &name) != nil {
					continue
				}
				select {
				case c.events <- Event{Name: name, Args: args[1:]}:
				case <-ctx.Done():
					return
				}
			case '5', '6':
				c.finish(errors.New("socket.io: binary packets are not supported"))
				return
			}
		}
	}
}

// watchdog ends the connection when the server's pings stop (the
// Engine.IO v4 heartbeat is server-initiated).
func (c *Conn) watchdog(ctx context.Context) {
	limit := c.pingInterval + c.pingTimeout
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.ping:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(limit)
		case <-t.C:
			c.finish(ErrPingTimeout)
			return
		}
	}
}

type packet struct {
	typ  byte
	ns   string
	data string
}

// parsePacket splits a Socket.IO v5 packet (after the Engine.IO "4").
func parsePacket(s string) (packet, error) {
	if s == "" || s[0] < '0' || s[0] > '6' {
		return packet{}, errors.New("socket.io: malformed packet")
	}
	p := packet{typ: s[0], ns: "/"}
	s = s[1:]
	if p.typ == '5' || p.typ == '6' {
		i := strings.IndexByte(s, '-')
		if i < 0 {
			return packet{}, errors.New("socket.io: malformed binary packet")
		}
		s = s[i+1:]
	}
	if strings.HasPrefix(s, "/") {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			p.ns, s = s, ""
		} else {
			p.ns, s = s[:i], s[i+1:]
		}
	}
	// An ack id: digits before the JSON.
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 {
		if _, err := strconv.Atoi(s[:i]); err != nil {
			return packet{}, errors.New("socket.io: malformed ack id")
		}
	}
	p.data = s[i:]
	return p, nil
}

func bounded(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
