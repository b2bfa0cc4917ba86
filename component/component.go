package component

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stream"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/backoff"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// closeGrace bounds a clean shutdown: flushing the queue, then waiting for
// the server to close its side of the stream.
const closeGrace = time.Second

var (
	errStreamClosed = errors.New("component: the server closed the stream")
	errConnClosed   = errors.New("component: the server closed the connection")
	errPingFailed   = errors.New("component: the server did not answer the keepalive ping")
	errWriteFailed  = errors.New("component: writing to the server failed")
	errNotStanza    = errors.New("component: only iq, message and presence stanzas in jabber:component:accept can be sent")
	errForeignFrom  = errors.New("component: stanza 'from' is outside the component domain (the server would close the stream)")
	errNotRequest   = errors.New("component: SendIQ needs an iq of type get or set")
	errRunning      = errors.New("component: Run is already running")
)

const (
	stateIdle int32 = iota
	stateRunning
	stateStopped
)

// outItem is one queued outbound stanza; iq is set for a SendIQ request so
// that the writer can skip requests that already failed.
type outItem struct {
	el *xmltree.Element
	id string
	iq *pendingIQ
}

// Component is the gateway's XEP-0114 session. It keeps one stream to the
// server up (reconnecting as needed), reads stanzas whole and hands them to
// workers that dispatch through a Router, and writes everything from one
// queue.
type Component struct {
	cfg     Config
	router  *Router
	log     *slog.Logger
	clk     clock.Clock
	limits  xmltree.Limits
	pending *pendingTable

	queue chan outItem
	prio  chan outItem // keepalive pings jump the queue

	iqIn   chan inIQ               // IQ get/set: any worker
	shards []chan *xmltree.Element // messages and presence: one worker per sender account (bare JID) keeps their order

	state     atomic.Int32
	connected atomic.Bool
	lastIn    atomic.Int64 // unix nanoseconds of the last inbound stanza

	readerBlocked atomic.Bool // the read loop waits for a worker

	ready     chan struct{}
	readyOnce sync.Once

	mu        sync.Mutex
	onConnect []func(context.Context)
	carry     []outItem // the stanzas whose write failed; first on the next stream

	dropReason atomic.Pointer[error] // why we closed the current connection ourselves

	connects, reconnects, sent, received, pingFailures atomic.Uint64

	forwardQ                             chan forwardItem
	forwarded, relayedIn, droppedAnswers atomic.Uint64
	drops                                dropLog
}

var _ Sender = (*Component)(nil)

// New returns a component that serves r. It registers the XEP-0199 ping
// handlers on r (for the gateway domain and for every visible endpoint), so
// nothing else may register urn:xmpp:ping.
func New(cfg Config, r *Router) *Component {
	if r == nil {
		panic("component: nil router")
	}
	if cfg.Domain.Equal(jid.JID{}) {
		cfg.Domain = r.Domain()
	}
	cfg = cfg.withDefaults()
	if !cfg.Domain.Equal(r.Domain()) {
		panic("component: config domain " + cfg.Domain.String() + " differs from the router's " + r.Domain().String())
	}
	c := &Component{
		cfg:     cfg,
		router:  r,
		log:     cfg.Logger,
		clk:     cfg.Clock,
		limits:  xmltree.Limits{MaxBytes: cfg.MaxStanzaBytes},
		pending: newPendingTable(cfg.Domain, cfg.ServerDomain),
		queue:   make(chan outItem, cfg.QueueSize),
		prio:    make(chan outItem, 4),
		iqIn:    make(chan inIQ, cfg.Workers*16),
		shards:  make([]chan *xmltree.Element, cfg.Workers),
		ready:   make(chan struct{}),
	}
	if cfg.Relay != nil {
		if cfg.Instance == "" || idOwner(cfg.Instance+string(idTagSep)) != cfg.Instance {
			panic("component: a Relay needs an instance name of 1 to 64 letters, digits, '.', '_' or '-'")
		}
		c.forwardQ = make(chan forwardItem, relayQueue)
	}
	for i := range c.shards {
		c.shards[i] = make(chan *xmltree.Element, 64)
	}
	pong := IQHandlerFunc(func(context.Context, IQ) (*xmltree.Element, error) { return nil, nil })
	// XEP-0199: a ping is an IQ get.
	r.HandleGatewayIQ(IQGet, ns.Ping, "ping", pong)
	r.HandleEndpointIQ(IQGet, ns.Ping, "ping", AccessVisible, pong)
	return c
}

// Domain is the component domain.
func (c *Component) Domain() jid.JID { return c.cfg.Domain }

// Connected reports whether a stream is up right now.
func (c *Component) Connected() bool { return c.connected.Load() }

// Ready is closed after the first successful handshake.
func (c *Component) Ready() <-chan struct{} { return c.ready }

// OnConnect registers f to run on its own goroutine after every successful
// handshake, for example to broadcast presence again. Its context ends when
// that stream is lost.
func (c *Component) OnConnect(f func(ctx context.Context)) {
	if f == nil {
		panic("component: nil OnConnect callback")
	}
	c.mu.Lock()
	c.onConnect = append(c.onConnect, f)
	c.mu.Unlock()
}

// Stats returns the current counters.
func (c *Component) Stats() Stats {
	return Stats{
		Connects:     c.connects.Load(),
		Reconnects:   c.reconnects.Load(),
		Sent:         c.sent.Load(),
		Received:     c.received.Load(),
		PingFailures: c.pingFailures.Load(),
		QueueLen:     len(c.queue) + len(c.prio),
		PendingIQs:   c.pending.len(),

		ForwardedAnswers: c.forwarded.Load(),
		RelayedAnswers:   c.relayedIn.Load(),
		DroppedAnswers:   c.droppedAnswers.Load(),
	}
}

// Run connects, handshakes and serves until ctx ends, reconnecting with
// capped exponential backoff and jitter whenever the stream is lost. It
// returns nil after a clean close when ctx is cancelled, and a *FatalError
// when the server refuses the component for a reason retrying cannot fix
// (conflict, not-authorized, host-unknown).
func (c *Component) Run(ctx context.Context) error {
	if c.cfg.Addr == "" {
		return errors.New("component: no server address configured")
	}
	if c.cfg.Domain.Domainpart() == "" {
		return errors.New("component: no component domain configured")
	}
	if !c.state.CompareAndSwap(stateIdle, stateRunning) && !c.state.CompareAndSwap(stateStopped, stateRunning) {
		return errRunning
	}
	defer c.state.Store(stateStopped)

	wctx, stopWorkers := context.WithCancel(ctx)
	var workers sync.WaitGroup
	for _, shard := range c.shards {
		workers.Add(1)
		go func() {
			defer workers.Done()
			c.worker(wctx, shard)
		}()
	}
	if c.cfg.Relay != nil {
		// Subscribe before the first IQ can go out.
		defer c.cfg.Relay.Subscribe(relayChannelPrefix+c.cfg.Instance, c.relayed)()
		workers.Add(1)
		go func() {
			defer workers.Done()
			c.forwarder(wctx)
		}()
	}
	defer workers.Wait()
	defer stopWorkers()

	bo := backoff.New(c.cfg.MinBackoff, c.cfg.MaxBackoff)
	var conflictSince time.Time
	runStart := time.Now()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			c.reconnects.Add(1)
		}
		up, err := c.session(ctx)
		if ctx.Err() != nil {
			c.log.Info("component: stopped", "domain", c.cfg.Domain.String())
			return nil
		}
		var fe *FatalError
		if errors.As(err, &fe) && fe.Condition == "conflict" && c.connects.Load() > 0 && time.Since(firstConflict(&conflictSince)) < c.cfg.ConflictGrace {
			// After a network blip the server may still hold our previous
			// session until it notices it is dead; a conflict on a
			// reconnect is retried for a while before it counts as another
			// gateway holding the domain.
			c.log.Warn("component: the server still holds a session for the domain; retrying",
				"domain", c.cfg.Domain.String(), "grace_left", c.cfg.ConflictGrace-time.Since(conflictSince))
			err = fe
		} else if errors.As(err, &fe) && fe.Condition == "host-unknown" && c.connects.Load() == 0 && time.Since(runStart) < c.cfg.StartupGrace {
			// A server that is still starting may accept the component
			// port before it has activated its component hosts.
			c.log.Warn("component: the server does not know the domain yet; retrying while it starts",
				"domain", c.cfg.Domain.String())
			err = fe
		} else if errors.As(err, &fe) {
			c.log.Error("component: the server refused the component; not retrying",
				"domain", c.cfg.Domain.String(), "condition", fe.Condition, "fix", fe.Advice)
			return fe
		}
		if up > 0 {
			conflictSince = time.Time{}
		}
		if up >= c.cfg.StableAfter {
			bo.Reset()
		}
		d := bo.Next()
		c.log.Warn("component: no stream to the server; reconnecting",
			"server", c.cfg.Addr, "err", err, "retry_in", d)
		if !c.sleep(ctx, d) {
			return nil
		}
	}
}

// session runs one connection: dial, handshake, serve until the stream
// ends. It returns how long the stream was up and why it ended.
func (c *Component) session(ctx context.Context) (time.Duration, error) {
	hctx, cancel := context.WithTimeout(ctx, c.cfg.HandshakeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(hctx, "tcp", c.cfg.Addr)
	if err != nil {
		return 0, err
	}
	// mellium's own ctx handling sets a past deadline and at once clears
	// it, which can leave the read blocked; a stuck server must not stall
	// the handshake, so bound it here.
	_ = conn.SetDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	stop := context.AfterFunc(hctx, func() { conn.Close() })
	sess, err := newSession(context.Background(), c.cfg.Domain, []byte(c.cfg.Secret), c.cfg.AllowMultiple, conn)
	if !stop() && err == nil {
		err = hctx.Err()
	}
	if err != nil {
		conn.Close()
		if err = c.classify(err); errors.As(err, new(*FatalError)) {
			return 0, err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("component: the server did not complete the handshake within %v", c.cfg.HandshakeTimeout)
		}
		return 0, fmt.Errorf("component: handshake: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	cancel()

	started := c.clk.Now()
	connCtx, connCancel := context.WithCancel(context.Background())
	c.lastIn.Store(started.UnixNano())
	c.pending.setOpen()
	// The count first: whoever sees Connected() true must also see this
	// stream counted in Stats().
	c.connects.Add(1)
	c.connected.Store(true)
	c.readyOnce.Do(func() { close(c.ready) })
	c.log.Info("component: connected", "domain", c.cfg.Domain.String(), "server", c.cfg.Addr)
	c.mu.Lock()
	callbacks := append([]func(context.Context){}, c.onConnect...)
	c.mu.Unlock()
	for _, f := range callbacks {
		go f(connCtx)
	}

	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); c.writer(ctx, connCtx, sess, conn) }()
	go func() { defer wg.Done(); c.keepalive(connCtx, conn) }()
	go func() { defer wg.Done(); shutdownWatchdog(ctx, connCtx, conn) }()

	c.dropReason.Store(nil)
	err = sess.Serve(c.handler(ctx, connCtx))
	c.pending.failAll(ErrStreamLost)
	connCancel()
	conn.Close()
	wg.Wait()
	// Only now, with the writer gone, may Connected() say false: a stanza
	// queued after that must wait for the next stream, not be written into
	// the dead one by a writer that has not yet noticed.
	c.connected.Store(false)
	var syntax *xml.SyntaxError
	switch reason := c.dropReason.Load(); {
	case reason != nil:
		err = *reason // we closed the connection; Serve's error only says so
	case err == nil:
		err = errStreamClosed
	case errors.As(err, &syntax) && syntax.Msg == "unexpected EOF", errors.Is(err, io.EOF):
		err = errConnClosed
	}
	return c.clk.Now().Sub(started), c.classify(err)
}

// drop closes the connection for reason, which Run reports.
func (c *Component) drop(conn net.Conn, reason error) {
	c.dropReason.CompareAndSwap(nil, &reason)
	conn.Close()
}

// classify turns the stream errors that retrying cannot fix into a
// *FatalError.
func (c *Component) classify(err error) error {
	var se stream.Error
	if errors.As(err, &se) {
		if advice, fatal := FatalAdvice(se.Err, c.cfg.Domain, c.cfg.Addr); fatal {
			return &FatalError{Condition: se.Err, Advice: advice}
		}
	}
	return err
}

// shutdownWatchdog closes the connection if a clean close after ctx ended
// takes too long (a server that never answers </stream:stream>).
func shutdownWatchdog(runCtx, connCtx context.Context, conn net.Conn) {
	select {
	case <-connCtx.Done():
		return
	case <-runCtx.Done():
	}
	t := time.NewTimer(3 * closeGrace)
	defer t.Stop()
	select {
	case <-connCtx.Done():
	case <-t.C:
		conn.Close()
	}
}

// sleep waits d on the component's clock; false means ctx ended first.
func (c *Component) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := c.clk.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// writer is the only goroutine that writes stanzas to the stream. It
// takes what is already queued when it wakes (up to maxBurst stanzas) and
// writes it with one syscall, so a busy gateway makes Prosody read and
// route a burst at once instead of one stanza per wake-up.
func (c *Component) writer(runCtx, connCtx context.Context, sess *xmpp.Session, conn net.Conn) {
	c.mu.Lock()
	carry := c.carry
	c.carry = nil
	c.mu.Unlock()
	w := &burstWriter{c: c, sess: sess, conn: conn}
	if len(carry) > 0 && !w.write(connCtx, carry) {
		return
	}
	items := make([]outItem, 0, maxBurst)
	for {
		items = items[:0]
		select {
		case it := <-c.prio:
			items = append(items, it)
		default:
			select {
			case it := <-c.prio:
				items = append(items, it)
			case it := <-c.queue:
				items = append(items, it)
			case <-connCtx.Done():
				return
			case <-runCtx.Done():
				c.drain(connCtx, w)
				// End our stream and give the server a moment to end its own;
				// Serve returns when it does.
				_ = sess.Close()
				_ = conn.SetReadDeadline(time.Now().Add(closeGrace))
				return
			}
		}
		items = c.collect(items)
		if !w.write(connCtx, items) {
			return
		}
	}
}

// collect appends what is queued right now, pings first, without waiting.
func (c *Component) collect(items []outItem) []outItem {
	for len(items) < maxBurst {
		select {
		case it := <-c.prio:
			items = append(items, it)
			continue
		default:
		}
		select {
		case it := <-c.queue:
			items = append(items, it)
		default:
			return items
		}
	}
	return items
}

// drain writes what is already queued, for at most closeGrace.
func (c *Component) drain(connCtx context.Context, w *burstWriter) {
	ctx, cancel := context.WithTimeout(connCtx, closeGrace)
	defer cancel()
	// A server that stops reading must not hold the shutdown: the raw
	// writes have no context of their own.
	_ = w.conn.SetWriteDeadline(time.Now().Add(closeGrace))
	defer w.conn.SetWriteDeadline(time.Time{})
	for ctx.Err() == nil {
		items := c.collect(nil)
		if len(items) == 0 || !w.write(ctx, items) {
			return
		}
	}
}

// Bounds of one burst: stanzas taken from the queue at once, and the bytes
// encoded before they are written (a burst of large stanzas goes out in
// several writes).
const (
	maxBurst      = 64
	maxBurstBytes = 64 << 10
)

// burstWriter encodes stanzas into one buffer and writes it with one
// syscall.
type burstWriter struct {
	c    *Component
	sess *xmpp.Session
	conn net.Conn
	buf  []byte
	ends []int // where each item since the last flush ends in buf, or skipped
}

// write sends items in order. On failure every stanza not wholly handed
// to the kernel (the failed one and all after it, as with one write per
// stanza) is kept for the next stream, and the connection is closed so
// that Serve returns.
func (w *burstWriter) write(ctx context.Context, items []outItem) bool {
	w.buf, w.ends = w.buf[:0], w.ends[:0]
	first := 0 // the first item in the buffer
	for i := range items {
		it := items[i]
		if it.iq != nil && !w.c.pending.live(it.id, it.iq) {
			// Its caller already got an error; a place holder keeps ends
			// aligned with items.
			w.ends = append(w.ends, skipped)
			continue
		}
		var ok bool
		if w.buf, ok = appendStanza(w.buf, it.el); ok {
			w.ends = append(w.ends, len(w.buf))
			if len(w.buf) < maxBurstBytes {
				continue
			}
			if !w.flush(items, first) {
				return false
			}
			first = i + 1
			continue
		}
		// An unusual shape: flush what is buffered, then let mellium
		// encode this one.
		if !w.flush(items, first) {
			return false
		}
		if err := w.sess.Send(ctx, it.el.Tokens()); err != nil {
			w.fail(items[i:], err)
			return false
		}
		w.c.sent.Add(1)
		first = i + 1
	}
	return w.flush(items, first)
}

// skipped marks, in burstWriter.ends, a request that was not written.
const skipped = -1

// flush writes the buffer, which holds items[first:] up to the last one
// encoded (some skipped), and empties it.
func (w *burstWriter) flush(items []outItem, first int) bool {
	if len(w.buf) == 0 {
		w.ends = w.ends[:0]
		return true
	}
	// Hold mellium's output lock, as its own writes do: a stream error it
	// sends when Serve fails must not land inside a stanza.
	tw := w.sess.TokenWriter()
	n, err := w.conn.Write(w.buf)
	_ = tw.Close()
	written, sent := 0, 0
	for _, end := range w.ends {
		if end > n {
			break
		}
		written++
		if end != skipped {
			sent++
		}
	}
	w.c.sent.Add(uint64(sent))
	w.buf, w.ends = w.buf[:0], w.ends[:0]
	if err != nil {
		w.fail(items[first+written:], err)
		return false
	}
	return true
}

// fail keeps rest for the next stream and drops the connection.
func (w *burstWriter) fail(rest []outItem, err error) {
	w.c.mu.Lock()
	w.c.carry = append([]outItem(nil), rest...)
	w.c.mu.Unlock()
	w.c.drop(w.conn, fmt.Errorf("%w: %w", errWriteFailed, err))
}

// keepalive pings the server after PingInterval without inbound traffic and
// drops the connection when the ping goes unanswered (XEP-0199 §4.3).
func (c *Component) keepalive(connCtx context.Context, conn net.Conn) {
	for {
		idle := c.clk.Now().Sub(time.Unix(0, c.lastIn.Load()))
		if c.readerBlocked.Load() {
			idle = 0 // an answer could not be read now anyway
		}
		if wait := c.cfg.PingInterval - idle; wait > 0 {
			if !c.sleep(connCtx, wait) {
				return
			}
			continue
		}
		ping := NewIQ("get", "", c.cfg.Domain, c.cfg.ServerDomain, xmltree.New(ns.Ping, "ping"))
		sentAt := c.clk.Now().UnixNano()
		_, err := c.sendIQ(connCtx, ping, true, c.cfg.PingTimeout)
		var se *agentproto.StanzaError
		// In a cluster the answer may reach another member, which forwards
		// it here; should the relay itself be down, any stanza read on
		// this stream after the ping went out proves the stream alive just
		// as well (the server spreads the members' pongs over all of them).
		readSince := c.cfg.Relay != nil && errors.Is(err, ErrIQTimeout) && c.lastIn.Load() > sentAt
		if err == nil || errors.As(err, &se) || readSince {
			// Any answer, even an error, proves the stream alive; the
			// answer itself refreshed lastIn.
			c.lastIn.Store(c.clk.Now().UnixNano())
			continue
		}
		if connCtx.Err() != nil {
			return
		}
		c.pingFailures.Add(1)
		c.drop(conn, fmt.Errorf("%w (%s): %w", errPingFailed, c.cfg.ServerDomain, err))
		return
	}
}

// Send queues a stanza for the stream. The queue survives reconnects:
// stanzas queued while the stream is down go out on the next one. A missing
// "from" becomes the component domain; a "from" outside the component domain
// is refused, since the server would close the stream for it. The stanza
// must not be modified after Send. Send fails with ErrQueueFull when the
// queue is full and with ErrNotConnected once Run has returned.
func (c *Component) Send(ctx context.Context, el *xmltree.Element) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.state.Load() == stateStopped {
		return ErrNotConnected
	}
	if err := c.checkStanza(el); err != nil {
		return err
	}
	select {
	case c.queue <- outItem{el: el}:
		return nil
	default:
		return ErrQueueFull
	}
}

// SendIQ sends an IQ get or set and waits for the answer. It sets a random
// id when the IQ has none. It returns the answer stanza; for an error answer
// it also returns a *agentproto.StanzaError with its type and condition
// (never the remote text), so errors.Is(err, agentproto.ErrItemNotFound())
// works. It fails with
// ErrNotConnected when no stream is up, ErrStreamLost when the stream drops
// first, ErrIQTimeout after Config.IQTimeout, or ctx's error.
func (c *Component) SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	return c.sendIQ(ctx, iq, false, c.cfg.IQTimeout)
}

func (c *Component) sendIQ(ctx context.Context, iq *xmltree.Element, prio bool, timeout time.Duration) (*xmltree.Element, error) {
	if err := c.checkStanza(iq); err != nil {
		return nil, err
	}
	if typ := iq.AttrValue("type"); iq.Name.Local != "iq" || (typ != "get" && typ != "set") {
		return nil, errNotRequest
	}
	id := iq.AttrValue("id")
	if id == "" && c.cfg.Relay == nil {
		id = ids.New("")
		iq.SetAttr("id", id)
	} else if c.cfg.Relay != nil {
		id = c.tagID(id)
		iq.SetAttr("id", id)
	}
	var to jid.JID
	if s := iq.AttrValue("to"); s != "" {
		var err error
		if to, err = jid.Parse(s); err != nil {
			return nil, errors.New("component: SendIQ: malformed 'to' address")
		}
	}
	p, err := c.pending.register(id, to)
	if err != nil {
		return nil, err
	}
	q := c.queue
	if prio {
		q = c.prio
	}
	select {
	case q <- outItem{el: iq, id: id, iq: p}:
	default:
		c.pending.cancel(id, p)
		return nil, ErrQueueFull
	}

	expired := make(chan struct{})
	t := c.clk.AfterFunc(timeout, func() { close(expired) })
	defer t.Stop()
	var gaveUp error
	select {
	case out := <-p.ch:
		return answer(out)
	case <-expired:
		gaveUp = ErrIQTimeout
	case <-ctx.Done():
		gaveUp = ctx.Err()
	}
	c.pending.cancel(id, p)
	select {
	case out := <-p.ch: // the answer raced the timeout
		return answer(out)
	default:
	}
	if gaveUp == ErrIQTimeout && !prio {
		// One line per answer that never came; the keepalive reports its
		// own. The payload's name says which feature waited.
		what := ""
		if len(iq.Children) > 0 {
			what = iq.Children[0].Name.Space + " " + iq.Children[0].Name.Local
		}
		c.log.Warn("component: no answer to an IQ in time", "id", id, "to", iq.AttrValue("to"), "payload", what, "timeout", timeout)
	}
	return nil, gaveUp
}

func answer(out iqOutcome) (*xmltree.Element, error) {
	if out.err != nil {
		return nil, out.err
	}
	if out.el.AttrValue("type") == "error" {
		return out.el, parseStanzaError(out.el)
	}
	return out.el, nil
}

// parseStanzaError reads the <error/> of an error stanza into a
// *agentproto.StanzaError carrying only the type and a known condition, so
// that no remote text travels further.
func parseStanzaError(el *xmltree.Element) *agentproto.StanzaError {
	se := agentproto.ParseError(el) // el is of type error: never nil
	se.Text = ""
	return se
}

// checkStanza accepts iq, message and presence in jabber:component:accept
// (or no namespace) and makes sure "from" lies in the component domain.
func (c *Component) checkStanza(el *xmltree.Element) error {
	if el == nil || (el.Name.Space != "" && el.Name.Space != NSComponent) {
		return errNotStanza
	}
	switch el.Name.Local {
	case "iq", "message", "presence":
	default:
		return errNotStanza
	}
	from := el.AttrValue("from")
	if from == "" {
		el.SetAttr("from", c.cfg.Domain.String())
		c.localize(el)
		return nil
	}
	j, err := jid.Parse(from)
	if err != nil || j.Domainpart() != c.cfg.Domain.Domainpart() {
		return errForeignFrom
	}
	c.localize(el)
	return nil
}

// localize tags a stanza with Config.Lang, the language of the gateway's
// human-readable text: on the stanza itself, so that titles, instructions,
// questions and summaries inherit it, and on a stanza error's <text/>,
// which RFC 6120 (8.3.2) wants to carry its own. A language already set is
// left alone. Prosody and ejabberd route a component stanza's xml:lang as
// they got it, while the stream header's would not reach the client.
func (c *Component) localize(el *xmltree.Element) {
	if c.cfg.Lang == "" {
		return
	}
	if _, ok := el.Lang(); !ok {
		el.SetLang(c.cfg.Lang)
	}
	if el.AttrValue("type") != "error" {
		return
	}
	for _, e := range el.Children {
		if e.Name.Local != "error" {
			continue
		}
		if t := e.Child(ns.Stanzas, "text"); t != nil {
			if _, ok := t.Lang(); !ok {
				t.SetLang(c.cfg.Lang)
			}
		}
	}
}

// enqueueWait queues a stanza of our own making (a reply), waiting for room
// rather than dropping it: every IQ get or set gets exactly one reply, and
// waiting here pushes back on the reader.
func (c *Component) enqueueWait(ctx context.Context, el *xmltree.Element) {
	c.localize(el)
	select {
	case c.queue <- outItem{el: el}:
	case <-ctx.Done():
		c.log.Debug("component: reply dropped at shutdown")
	}
}

// firstConflict starts the conflict grace period on the first conflict of
// a run of reconnect attempts.
func firstConflict(since *time.Time) time.Time {
	if since.IsZero() {
		*since = time.Now()
	}
	return *since
}
