// Package xmppclient is a small C2S client on mellium: STARTTLS, SCRAM,
// resource binding, and stanzas as xmltree elements.
//
// It is production code: the caller commands (`agentgw mcp`, `agentgw a2a`,
// `agentgw call`), `agentgw host` and the console's admin login all connect
// through it. Tests, the demo and benchmarks use it too, to play the human
// or agent on the far side of the gateway through a real XMPP server.
package xmppclient

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// NS is the namespace of client stanzas. Elements built with namespace ""
// are sent as NS too.
const NS = "jabber:client"

const nsPing = "urn:xmpp:ping"

// ErrClosed reports that the stream ended before the operation completed.
var ErrClosed = errors.New("xmppclient: stream closed")

// Options configure Dial.
type Options struct {
	JID       string        // bare or full; a random resource is bound if absent
	Password  string        // never logged or put in errors
	Server    string        // host:port; if empty, the JID's domain:5222
	TLS       *tls.Config   // nil = system roots (plus CAFile); ServerName defaults to the domain
	CAFile    string        // optional PEM bundle to trust in addition to system roots
	IQTimeout time.Duration // default 30s
	Presence  bool          // send initial available presence after bind
	// OnMessage and OnPresence, if set, are installed before the session
	// starts, so nothing is missed (see Client.OnMessage).
	OnMessage  func(*xmltree.Element)
	OnPresence func(*xmltree.Element)
	// OnIQ, if set, answers every inbound IQ get or set instead of the
	// built-in answer (pong, else service-unavailable): it returns the one
	// reply (in NS or no namespace). It runs on the stream's read loop, so
	// nothing else is read meanwhile and it must be quick; it may call
	// Send (mellium takes the output lock only for the reply). This is how
	// an endpoint run as a C2S client (agentgw host) serves its IQs; a
	// reply written here also keeps mellium from sending its own default
	// service-unavailable, which it does for every IQ its handler leaves
	// unanswered.
	OnIQ func(*xmltree.Element) *xmltree.Element
}

// maxHeld bounds the stanzas kept for a callback not yet registered.
const maxHeld = 1024

// Client is one bound C2S session.
type Client struct {
	session   *xmpp.Session
	conn      net.Conn
	iqTimeout time.Duration

	mu       sync.Mutex
	pending  map[string]chan *xmltree.Element
	onMsg    func(*xmltree.Element)
	onPres   func(*xmltree.Element)
	onIQ     func(*xmltree.Element) *xmltree.Element
	queue    []*xmltree.Element // inbound messages and presences awaiting callbacks
	queueSig chan struct{}
	held     map[string][]*xmltree.Element // by stanza name, while its callback is nil

	sendMu sync.Mutex // serializes writes and their deadlines

	done      chan struct{}
	serveErr  error
	closeOnce sync.Once
}

// Dial connects, negotiates STARTTLS, authenticates with SCRAM (PLAIN only as
// a last resort, and only ever over TLS) and binds a resource. The returned
// error names the step that failed: connect, TLS, auth or bind.
func Dial(ctx context.Context, o Options) (*Client, error) {
	addr, err := jid.Parse(o.JID)
	if err != nil {
		return nil, fmt.Errorf("xmppclient: invalid JID: %w", err)
	}
	if addr.Localpart() == "" {
		return nil, errors.New("xmppclient: JID has no localpart")
	}
	if addr.Resourcepart() == "" {
		if addr, err = addr.WithResource("agentgw-" + randomHex(6)); err != nil {
			return nil, fmt.Errorf("xmppclient: invalid JID: %w", err)
		}
	}
	server := o.Server
	if server == "" {
		server = net.JoinHostPort(addr.Domainpart(), "5222")
	}
	tlsCfg, err := tlsConfig(o, addr.Domainpart())
	if err != nil {
		return nil, err
	}

	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server)
	if err != nil {
		return nil, fmt.Errorf("xmppclient: connect to %s: %w", server, err)
	}
	// Bound negotiation even if ctx has no deadline.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	// mellium keeps negotiating after an optional feature fails (a rejected
	// certificate on a server that does not require STARTTLS ends with a
	// session and no error), so each step records its own outcome.
	var steps negotiation
	session, err := xmpp.NewClientSession(ctx, addr, conn,
		steps.stage("TLS", starttls(tlsCfg)),
		steps.stage("auth", xmpp.SASL("", o.Password, sasl.ScramSha256, sasl.ScramSha1, sasl.Plain)),
		steps.stage("bind", bindAs(addr)),
	)
	if err == nil {
		err = steps.check()
	}
	if err != nil {
		conn.Close()
		var se *stageError
		if errors.As(err, &se) {
			return nil, se
		}
		return nil, fmt.Errorf("xmppclient: stream negotiation with %s: %w", server, err)
	}

	c := &Client{
		session:   session,
		conn:      conn,
		iqTimeout: o.IQTimeout,
		pending:   make(map[string]chan *xmltree.Element),
		queueSig:  make(chan struct{}, 1),
		done:      make(chan struct{}),
		onMsg:     o.OnMessage,
		onPres:    o.OnPresence,
		held:      make(map[string][]*xmltree.Element),
		onIQ:      o.OnIQ,
	}
	if c.iqTimeout <= 0 {
		c.iqTimeout = 30 * time.Second
	}
	go c.serve()
	go c.dispatch()
	if o.Presence {
		if err := c.Send(ctx, xmltree.New(NS, "presence")); err != nil {
			c.Close()
			return nil, fmt.Errorf("xmppclient: initial presence: %w", err)
		}
	}
	return c, nil
}

func tlsConfig(o Options, domain string) (*tls.Config, error) {
	var cfg *tls.Config
	if o.TLS != nil {
		cfg = o.TLS.Clone()
	} else {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = domain
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("xmppclient: read CA file: %w", err)
		}
		pool := cfg.RootCAs
		if pool == nil {
			// SystemCertPool honours SSL_CERT_FILE / SSL_CERT_DIR.
			if pool, err = x509.SystemCertPool(); err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("xmppclient: CA file %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// starttls wraps mellium's feature so that the handshake runs inside the TLS
// step: otherwise a bad certificate surfaces later as a vague stream error.
func starttls(cfg *tls.Config) xmpp.StreamFeature {
	f := xmpp.StartTLS(cfg)
	neg := f.Negotiate
	f.Negotiate = func(ctx context.Context, s *xmpp.Session, data interface{}) (xmpp.SessionState, io.ReadWriter, error) {
		mask, rw, err := neg(ctx, s, data)
		if err != nil {
			return mask, rw, err
		}
		if tc, ok := rw.(*tls.Conn); ok {
			if err := tc.HandshakeContext(ctx); err != nil {
				return mask, nil, err
			}
		}
		return mask, rw, nil
	}
	return f
}

// bindAs binds addr's resource, or lets the server pick one when addr
// has none. mellium v0.22's own client bind writes the (still empty) JID
// into <resource/>, so a requested resource was silently replaced by a
// random one; this negotiates the client side itself (RFC 6120 7.6).
func bindAs(addr jid.JID) xmpp.StreamFeature {
	f := xmpp.BindResource()
	f.Negotiate = func(ctx context.Context, s *xmpp.Session, _ interface{}) (xmpp.SessionState, io.ReadWriter, error) {
		r := s.TokenReader()
		defer r.Close()
		w := s.TokenWriter()
		defer w.Close()
		id := "bind-" + randomHex(8)
		bind := xmltree.New(nsBind, "bind")
		if res := addr.Resourcepart(); res != "" {
			bind.Add(xmltree.New(nsBind, "resource").WithText(res))
		}
		req := xmltree.New(NS, "iq", "type", "set", "id", id).Add(bind)
		if _, err := xmlstream.Copy(w, req.Tokens()); err != nil {
			return 0, nil, err
		}
		if err := w.Flush(); err != nil {
			return 0, nil, err
		}
		d := xml.NewTokenDecoder(r)
		tok, err := d.Token()
		if err != nil {
			return 0, nil, err
		}
		start, ok := tok.(xml.StartElement)
		if !ok || start.Name.Local != "iq" {
			return 0, nil, errors.New("the server did not answer the bind request with an IQ")
		}
		resp, err := xmltree.Decode(d, start, xmltree.DefaultLimits)
		if err != nil {
			return 0, nil, err
		}
		if resp.AttrValue("id") != id {
			return 0, nil, errors.New("the bind answer has another id")
		}
		if resp.AttrValue("type") != "result" {
			if se := agentproto.ParseError(resp); se != nil {
				return 0, nil, fmt.Errorf("the server refused the resource: %s", se.Condition)
			}
			return 0, nil, errors.New("the server refused the resource")
		}
		var bound jid.JID
		if b := resp.Child(nsBind, "bind"); b != nil {
			if j := b.Child(nsBind, "jid"); j != nil {
				bound, err = jid.Parse(j.Text)
			}
		}
		if err != nil || bound.Resourcepart() == "" {
			return 0, nil, errors.New("the bind answer carries no full JID")
		}
		s.UpdateAddr(bound)
		return xmpp.Ready, nil, nil
	}
	return f
}

const nsBind = "urn:ietf:params:xml:ns:xmpp-bind"

type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string {
	if e.stage == "auth" {
		if cond := saslCondition(e.err); cond != "" {
			return fmt.Sprintf("xmppclient: auth failed (%s): %v", cond, e.err)
		}
	}
	return fmt.Sprintf("xmppclient: %s failed: %v", e.stage, e.err)
}

func (e *stageError) Unwrap() error { return e.err }

// negotiation records what each stream feature did.
type negotiation struct {
	err  error
	done map[string]bool
}

// stage labels errors from one stream feature with the step's name and
// remembers the first failure and every success.
func (n *negotiation) stage(name string, f xmpp.StreamFeature) xmpp.StreamFeature {
	neg := f.Negotiate
	f.Negotiate = func(ctx context.Context, s *xmpp.Session, data interface{}) (xmpp.SessionState, io.ReadWriter, error) {
		if n.err != nil {
			return 0, nil, n.err
		}
		mask, rw, err := neg(ctx, s, data)
		if err != nil {
			n.err = &stageError{stage: name, err: err}
			return mask, rw, n.err
		}
		if n.done == nil {
			n.done = map[string]bool{}
		}
		n.done[name] = true
		return mask, rw, nil
	}
	return f
}

func (n *negotiation) check() error {
	if n.err != nil {
		return n.err
	}
	for _, name := range []string{"TLS", "auth", "bind"} {
		if !n.done[name] {
			return &stageError{stage: name, err: errors.New("the server did not offer it")}
		}
	}
	return nil
}

// saslCondition extracts the defined condition (such as not-authorized) from
// a SASL failure; mellium's error text drops it when the server sends text.
func saslCondition(err error) string {
	var m interface {
		error
		TokenReader() xml.TokenReader
	}
	if !errors.As(err, &m) {
		return ""
	}
	r := m.TokenReader()
	depth := 0
	for i := 0; i < 64; i++ {
		tok, err := r.Token()
		if err != nil {
			return ""
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 2 && t.Name.Local != "text" {
				return t.Name.Local
			}
		case xml.EndElement:
			depth--
		}
	}
	return ""
}

// JID returns the full JID the server bound.
func (c *Client) JID() jid.JID { return c.session.LocalAddr() }

// Done is closed when the stream has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the stream ended (nil for a clean close) once Done is closed.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.serveErr
	default:
		return nil
	}
}

// OnMessage sets the callback for inbound messages. Callbacks run one at a
// time, in arrival order, on a goroutine of their own; they may call Send and
// SendIQ. Messages that arrived while no callback was set (up to 1024) are
// delivered to the first one registered.
func (c *Client) OnMessage(f func(*xmltree.Element)) { c.setCallback("message", &c.onMsg, f) }

// OnPresence sets the callback for inbound presence stanzas, like OnMessage.
func (c *Client) OnPresence(f func(*xmltree.Element)) { c.setCallback("presence", &c.onPres, f) }

func (c *Client) setCallback(kind string, slot *func(*xmltree.Element), f func(*xmltree.Element)) {
	c.mu.Lock()
	*slot = f
	if f != nil && len(c.held[kind]) > 0 {
		// Held stanzas are older than anything queued.
		c.queue = append(c.held[kind], c.queue...)
		delete(c.held, kind)
	}
	c.mu.Unlock()
	c.signal()
}

func (c *Client) signal() {
	select {
	case c.queueSig <- struct{}{}:
	default:
	}
}

// Send transmits one stanza. Unqualified elements inherit their parent's
// namespace, and the stanza itself defaults to NS.
func (c *Client) Send(ctx context.Context, el *xmltree.Element) error {
	if el == nil {
		return errors.New("xmppclient: nil stanza")
	}
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	out := qualify(el, NS)
	// mellium v0.22 arms a goroutine per Send that, once ctx ends, moves the
	// connection's write deadline into the past. When ctx ends just as a
	// Send returns (an IQ's timeout context is cancelled right after), that
	// goroutine can fire during the next Send and fail it with an i/o
	// timeout. So the context passed down never ends, and the deadline is
	// set here, with writes serialized so deadlines cannot cross.
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(sendTimeout)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("xmppclient: send: %w", err)
	}
	_ = c.conn.SetWriteDeadline(deadline)
	err := c.session.Send(context.Background(), out.Tokens())
	_ = c.conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("xmppclient: send: %w", err)
	}
	return nil
}

// sendTimeout bounds a write whose context has no deadline.
const sendTimeout = 30 * time.Second

// SendIQ sends an IQ get or set and waits for the reply, which is returned
// whether its type is result or error (see StanzaErrorCondition). It sets an
// id if iq has none (on a copy), and fails on timeout, ctx cancellation or
// the end of the stream.
func (c *Client) SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	if iq == nil || iq.Name.Local != "iq" {
		return nil, errors.New("xmppclient: SendIQ needs an <iq/> element")
	}
	if t := iq.AttrValue("type"); t != "get" && t != "set" {
		return nil, errors.New("xmppclient: SendIQ needs type get or set")
	}
	out := qualify(iq, NS)
	id := out.AttrValue("id")
	if id == "" {
		id = "c" + randomHex(10)
		out.SetAttr("id", id)
	}
	ch := make(chan *xmltree.Element, 1)
	c.mu.Lock()
	if _, dup := c.pending[id]; dup {
		c.mu.Unlock()
		return nil, fmt.Errorf("xmppclient: IQ id %q already pending", id)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	ctx, cancel := context.WithTimeout(ctx, c.iqTimeout)
	defer cancel()
	if err := c.Send(ctx, out); err != nil {
		return nil, err
	}
	select {
	case reply := <-ch:
		return reply, nil
	case <-c.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("xmppclient: no reply to IQ %s: %w", id, ctx.Err())
	}
}

// StanzaErrorCondition returns the defined condition of an error stanza
// (such as "item-not-found"), as agentproto.ParseError reads it, or "" if
// the stanza is not an error.
func StanzaErrorCondition(st *xmltree.Element) string {
	if se := agentproto.ParseError(st); se != nil {
		return string(se.Condition)
	}
	return ""
}

// Close ends the stream and waits briefly for the server to close its side.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		select {
		case <-c.done:
			c.conn.Close()
			return
		default:
		}
		// Not SetCloseDeadline: it races with Serve in mellium v0.22.
		// Closing the conn after a grace period ends Serve instead.
		_ = c.conn.SetWriteDeadline(time.Now().Add(3 * time.Second))
		err = c.session.Close()
		select {
		case <-c.done:
		case <-time.After(3 * time.Second):
		}
		c.conn.Close()
		<-c.done
	})
	return err
}

func (c *Client) serve() {
	err := c.session.Serve(xmpp.HandlerFunc(c.handle))
	c.conn.Close()
	c.mu.Lock()
	c.serveErr = err
	c.mu.Unlock()
	close(c.done)
}

// handle runs inside Serve, which holds the output lock: it must not call
// Send. IQ replies go through the handler's own encoder.
func (c *Client) handle(rw xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	el, err := xmltree.Decode(rw, *start, xmltree.DefaultLimits)
	if errors.Is(err, xmltree.ErrLimit) {
		// A stanza past the limits (any sender can nest one deep enough)
		// must not end the session: an IQ request gets resource-constraint,
		// anything else is dropped. mellium skips the rest of the element.
		return rejectOversize(rw, start)
	}
	if err != nil {
		return err
	}
	switch el.Name.Local {
	case "iq":
		switch typ := el.AttrValue("type"); typ {
		case "result", "error":
			c.mu.Lock()
			ch := c.pending[el.AttrValue("id")]
			c.mu.Unlock()
			if ch != nil {
				select {
				case ch <- el:
				default:
				}
			}
		case "get", "set":
			reply := iqReply(el)
			if c.onIQ != nil {
				reply = qualify(c.onIQ(el), NS)
			}
			_, err := xmlstream.Copy(rw, reply.Tokens())
			return err
		}
	case "message", "presence":
		c.mu.Lock()
		c.queue = append(c.queue, el)
		c.mu.Unlock()
		c.signal()
	}
	return nil
}

// rejectOversize answers an IQ get or set that exceeded the limits with
// resource-constraint, quoting nothing of it but its id and sender.
func rejectOversize(rw xmlstream.TokenReadEncoder, start *xml.StartElement) error {
	var id, typ, from string
	for _, a := range start.Attr {
		if a.Name.Space != "" {
			continue
		}
		switch a.Name.Local {
		case "id":
			id = a.Value
		case "type":
			typ = a.Value
		case "from":
			from = a.Value
		}
	}
	if start.Name.Local != "iq" || (typ != "get" && typ != "set") {
		return nil
	}
	reply := xmltree.New(NS, "iq", "type", "error", "id", id)
	if from != "" {
		reply.SetAttr("to", from)
	}
	reply.Add(agentproto.ErrResourceConstraint("stanza exceeds the size limit").Element(NS))
	_, err := xmlstream.Copy(rw, reply.Tokens())
	return err
}

// iqReply answers pings and refuses everything else, so that no IQ sent to
// the client goes unanswered.
func iqReply(req *xmltree.Element) *xmltree.Element {
	reply := xmltree.New(NS, "iq", "id", req.AttrValue("id"))
	if from := req.AttrValue("from"); from != "" {
		reply.SetAttr("to", from)
	}
	if req.AttrValue("type") == "get" && req.Child(nsPing, "ping") != nil {
		return reply.SetAttr("type", "result")
	}
	reply.SetAttr("type", "error")
	return reply.Add(agentproto.ErrServiceUnavailable().Element(NS))
}

func (c *Client) dispatch() {
	for {
		c.drain()
		select {
		case <-c.queueSig:
		case <-c.done:
			c.drain()
			return
		}
	}
}

func (c *Client) drain() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.mu.Unlock()
			return
		}
		el := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		f := c.onPres
		if el.Name.Local == "message" {
			f = c.onMsg
		}
		if f == nil {
			h := append(c.held[el.Name.Local], el)
			if len(h) > maxHeld {
				h = h[1:]
			}
			c.held[el.Name.Local] = h
		}
		c.mu.Unlock()
		if f != nil {
			f(el)
		}
	}
}

// qualify returns a copy of el in which every element with an empty
// namespace takes its parent's (the root takes space).
func qualify(el *xmltree.Element, space string) *xmltree.Element {
	out := &xmltree.Element{Name: el.Name, Text: el.Text}
	if out.Name.Space == "" {
		out.Name.Space = space
	}
	out.Attr = append(out.Attr, el.Attr...)
	for _, ch := range el.Children {
		if ch != nil {
			out.Children = append(out.Children, qualify(ch, out.Name.Space))
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
