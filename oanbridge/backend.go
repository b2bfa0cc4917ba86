// Package oanbridge makes one OpenAgentNetwork account an XMPP agent
// endpoint: the gateway is the account's OAN connector (Connector
// Protocol v1, shared/references/oan-protocol.md). The bridge follows the
// account's event stream (GET /events back-fill, then the /oan Socket.IO
// namespace) with a durable numeric cursor, applies each event's effect
// exactly once together with the cursor (oanbridge/oandb), and offers the
// tools create_gofer, list_gofers, chat, escalations and send_direct
// through the task engine. Decisions that touch the owner's interests are
// asked of the configured owner only; counterpart content is untrusted
// data throughout. docs/oan-bridge.md is the mapping.
package oanbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/logging"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/sio"
	"github.com/agentgw/agentgw/oanbridge/wire"
	"github.com/agentgw/agentgw/tasks"
)

// keepEvents is how many applied-event ids below the cursor the store
// keeps for de-duplication (overlapping and replayed deliveries are near
// the cursor).
const keepEvents = 100000

// Options configure one OAN endpoint.
type Options struct {
	Endpoint string // bare JID of the endpoint (the account)
	BaseURL  string // the OAN API origin; REST under /api/v1
	KeyFile  string // the gofers_ key, written by `agentgw oan pair`
	Owner    string // bare JID of the account's owner
	// ReplyTimeout bounds the wait for a Gofer's reply (default 60s).
	ReplyTimeout time.Duration

	Store        oandb.Driver
	Publisher    backendkit.Publisher
	Availability backendkit.Availability
	Logger       *slog.Logger
	// Secrets returns further values to redact (the gateway's secrets).
	Secrets func() []string

	Name, Title, Description, Version string

	// PageLimit is the GET /events page size (default and max 200);
	// MaxPages bounds one back-fill round (default 1000), so a server
	// that answers full pages forever cannot hold the bridge.
	PageLimit, MaxPages int
	// KeyPoll is how often a revoked or banned endpoint re-reads the key
	// file to notice a new pairing (default 5s).
	KeyPoll time.Duration
	// KeyCheck is how often a connected endpoint asks OAN whether its key
	// still works (default 5 min): a revocation OAN could not announce
	// (no forced disconnect, no notice) and no call meets makes the
	// endpoint unavailable within this bound.
	KeyCheck   time.Duration
	Supervisor backendkit.Supervisor
}

// Backend is one OAN account as an endpoint. It implements tasks.Backend,
// backendkit.Conversant and backendkit.ChatAttacher.
type Backend struct {
	o     Options
	log   *slog.Logger
	red   *backendkit.Redactor
	api   *api
	st    oandb.Driver
	pub   *backendkit.Manifests
	avail *backendkit.Presence

	mu        sync.Mutex
	key       string
	keyID     string
	connected bool
	status    string
	waiters   map[string]*waiter // gofer id → the chat task waiting for it
	held      map[string]bool    // question event ids a chat task is asking
	locks     map[string]chan struct{}
	changed   chan struct{} // closed and replaced when items change
	chat      backendkit.Chat
	lastGofer string
	started   bool
	stopped   chan struct{}
	probe     chan struct{}   // a tool saw 401: check the key now
	refused   map[string]bool // event ids whose refusal was logged
}

var (
	_ tasks.Backend           = (*Backend)(nil)
	_ backendkit.Readiness    = (*Backend)(nil)
	_ backendkit.Conversant   = (*Backend)(nil)
	_ backendkit.ChatAttacher = (*Backend)(nil)
)

// New validates the options.
func New(o Options) (*Backend, error) {
	if o.Endpoint == "" || o.KeyFile == "" || o.Owner == "" || o.Store == nil {
		return nil, errors.New("oanbridge: Endpoint, KeyFile, Owner and Store are required")
	}
	if o.ReplyTimeout <= 0 {
		o.ReplyTimeout = 60 * time.Second
	}
	if o.PageLimit <= 0 || o.PageLimit > 200 {
		o.PageLimit = 200
	}
	if o.MaxPages <= 0 {
		o.MaxPages = 1000
	}
	if o.KeyPoll <= 0 {
		o.KeyPoll = 5 * time.Second
	}
	if o.KeyCheck <= 0 {
		o.KeyCheck = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	b := &Backend{
		o: o, st: o.Store, waiters: map[string]*waiter{}, held: map[string]bool{}, locks: map[string]chan struct{}{},
		changed: make(chan struct{}), status: oandb.StatusOK, stopped: make(chan struct{}), probe: make(chan struct{}, 1),
		pub: backendkit.NewManifests(o.Publisher), avail: backendkit.NewPresence(o.Endpoint, o.Availability),
	}
	b.red = backendkit.NewRedactor(o.Secrets)
	b.log = slog.New(logging.NewHandler(o.Logger.Handler(), b.red)).With("agent", o.Endpoint)
	a, err := newAPI(o.BaseURL, b.currentKey)
	if err != nil {
		return nil, err
	}
	b.api = a
	return b, nil
}

func (b *Backend) currentKey() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.key
}

// Features: progress ("accepted by OAN"), cancellation and input (Gofer
// questions and the owner's decisions).
func (b *Backend) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true, Input: true}
}

// Ready reports a published manifest.
func (b *Backend) Ready() bool { return b.pub.Ready() }

// Manifest returns the last published manifest JSON.
func (b *Backend) Manifest() []byte { return append([]byte(nil), b.pub.Last()...) }

// Connected reports whether the event socket is up with a valid key.
func (b *Backend) Connected() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connected
}

// AttachChat implements backendkit.ChatAttacher.
func (b *Backend) AttachChat(c backendkit.Chat) {
	b.mu.Lock()
	b.chat = c
	b.mu.Unlock()
}

func (b *Backend) setConnected(up bool) {
	b.mu.Lock()
	b.connected = up
	b.mu.Unlock()
	b.avail.Set(up)
}

// Start publishes the manifest and follows the account's events until ctx
// ends. It blocks.
func (b *Backend) Start(ctx context.Context) error {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return errors.New("oanbridge: Start called twice")
	}
	b.started = true
	b.mu.Unlock()
	defer close(b.stopped)
	b.setConnected(false)
	go b.publishLoop(ctx)
	b.o.Supervisor.Run(ctx, b.session, func(err error, wait time.Duration) {
		if err != nil {
			b.log.Warn("OAN session ended; reconnecting", "error", err, "wait", wait.Round(time.Millisecond))
		}
	})
	b.setConnected(false)
	return nil
}

// Close is a no-op: Start ends with its context.
func (b *Backend) Close() error { return nil }

func (b *Backend) publishLoop(ctx context.Context) {
	m, version := b.manifest()
	for {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, _, _, err := b.pub.Publish(pctx, version, m)
		cancel()
		if err == nil {
			return
		}
		b.log.Warn("publishing the OAN agent manifest failed; will retry", "error", err)
		if !backendkit.Sleep(ctx, 5*time.Second) {
			return
		}
	}
}

// session is one connection: key, cursor, back-fill, socket, back-fill
// again, live events. It returns when the socket ends.
func (b *Backend) session(ctx context.Context) (time.Duration, error) {
	key, err := ReadKey(b.o.KeyFile)
	if err != nil {
		b.setConnected(false)
		return 0, err
	}
	id := KeyID(key)
	b.mu.Lock()
	b.key, b.keyID = key, id
	b.mu.Unlock()
	b.red.Set(key)
	if st, kid, err := b.st.Status(ctx, b.o.Endpoint); err != nil {
		return 0, err
	} else if st != oandb.StatusOK && kid == id {
		b.log.Error("the OAN API key was "+st+" earlier; the endpoint stays unavailable until it is paired again (agentgw oan pair --force)", "key_id", id)
		return 0, b.waitForNewKey(ctx, id, st)
	}

	if err := b.startCursor(ctx); err != nil {
		return 0, b.classify(ctx, err)
	}
	if err := b.reconcilePosting(ctx); err != nil {
		return 0, b.classify(ctx, err)
	}
	// Event ids far below the cursor are kept out by the cursor alone.
	if cur, err := b.st.Cursor(ctx, b.o.Endpoint); err == nil && cur > keepEvents {
		b.st.Prune(ctx, b.o.Endpoint, cur-keepEvents)
	}
	if err := b.backfill(ctx); err != nil {
		return 0, b.classify(ctx, err)
	}
	conn, err := sio.Dial(ctx, sio.Options{
		URL: b.api.base.String(), Namespace: wire.Namespace, Auth: map[string]string{"token": key},
		HTTPClient: b.api.hc, MaxMessage: wire.MaxEnvelopeBytes + 1024,
	})
	if err != nil {
		var ce *sio.ConnectError
		if errors.As(err, &ce) {
			// The handshake says little; REST tells a revoked key (401)
			// from a banned account.
			if _, perr := b.api.do(ctx, "GET", "/events/cursor", nil, nil, nil); perr != nil {
				return 0, b.classify(ctx, perr)
			}
		}
		return 0, err
	}
	defer conn.Close()
	began := time.Now()
	// The second back-fill closes the race between the first one's last
	// page and the subscription (§6): anything recorded in between is in
	// it, and live duplicates are dropped by seq and event id.
	if err := b.backfill(ctx); err != nil {
		return 0, b.classify(ctx, err)
	}
	b.setConnected(true)
	b.log.Info("OAN event stream connected", "key_id", id)
	b.deliverOutbound(ctx)
	var refill <-chan time.Time // a back-fill after refused live events
	keyCheck := time.NewTicker(b.o.KeyCheck)
	defer keyCheck.Stop()
	for {
		select {
		case <-ctx.Done():
			b.setConnected(false)
			return time.Since(began), nil
		case <-refill:
			refill = nil
			if err := b.backfill(ctx); err != nil {
				b.setConnected(false)
				return time.Since(began), b.classify(ctx, err)
			}
		case <-keyCheck.C:
			// A quiet revocation or ban: the socket stays up and no call
			// comes to meet the 401.
			if _, perr := b.api.do(ctx, "GET", "/events/cursor", nil, nil, nil); errors.Is(perr, ErrRevoked) || errors.Is(perr, ErrBanned) {
				b.setConnected(false)
				return time.Since(began), b.classify(ctx, perr)
			}
		case <-b.probe:
			if _, perr := b.api.do(ctx, "GET", "/events/cursor", nil, nil, nil); errors.Is(perr, ErrRevoked) || errors.Is(perr, ErrBanned) {
				b.setConnected(false)
				return time.Since(began), b.classify(ctx, perr)
			}
		case ev, ok := <-conn.Events():
			if !ok {
				b.setConnected(false)
				err := conn.Err()
				if errors.Is(err, sio.ErrServerDisconnect) {
					// Revocation force-disconnects; REST says whether
					// the key still works.
					if _, perr := b.api.do(ctx, "GET", "/events/cursor", nil, nil, nil); perr != nil {
						return time.Since(began), b.classify(ctx, perr)
					}
				}
				return time.Since(began), err
			}
			if ev.Name != wire.Event || len(ev.Args) != 1 {
				b.log.Warn("OAN sent an unexpected Socket.IO event; dropped")
				continue
			}
			env, err := wire.ParseEnvelope(ev.Args[0])
			if err != nil {
				b.log.Warn("OAN event refused", "reason", err.Error())
				continue
			}
			if err := b.handle(ctx, env, live); errors.Is(err, errRefusedLive) {
				// Coalesced: a burst of refusals costs one GET /events.
				if refill == nil {
					refill = time.After(200 * time.Millisecond)
				}
			} else if err != nil {
				b.setConnected(false)
				return time.Since(began), b.classify(ctx, err)
			}
		}
	}
}

// classify turns a revoked key or a ban into the endpoint's stopped
// state: one clear log line, then wait for a new pairing.
func (b *Backend) classify(ctx context.Context, err error) error {
	b.mu.Lock()
	id := b.keyID
	b.mu.Unlock()
	switch {
	case errors.Is(err, ErrRevoked):
		b.setConnected(false)
		b.st.SetStatus(ctx, b.o.Endpoint, oandb.StatusRevoked, id)
		b.log.Error("OAN revoked the API key; the endpoint is unavailable until it is paired again (agentgw oan pair --force)", "key_id", id)
		return b.waitForNewKey(ctx, id, oandb.StatusRevoked)
	case errors.Is(err, ErrBanned):
		b.setConnected(false)
		b.st.SetStatus(ctx, b.o.Endpoint, oandb.StatusBanned, id)
		b.log.Error("OAN banned the account; the endpoint is unavailable until it is paired again", "key_id", id)
		return b.waitForNewKey(ctx, id, oandb.StatusBanned)
	}
	return err
}

// waitForNewKey keeps the endpoint down until the key file holds another
// key (a new pairing), then lets the supervisor reconnect.
func (b *Backend) waitForNewKey(ctx context.Context, id, status string) error {
	b.setConnected(false)
	b.mu.Lock()
	b.status = status
	b.mu.Unlock()
	for {
		if !backendkit.Sleep(ctx, b.o.KeyPoll) {
			return ctx.Err()
		}
		k, err := ReadKey(b.o.KeyFile)
		if err == nil && KeyID(k) != id {
			b.st.SetStatus(ctx, b.o.Endpoint, oandb.StatusOK, KeyID(k))
			b.mu.Lock()
			b.status = oandb.StatusOK
			b.mu.Unlock()
			b.log.Info("a new OAN API key was paired; reconnecting", "key_id", KeyID(k))
			return errors.New("new key")
		}
	}
}

// startCursor initialises a fresh connector from GET /events/cursor and
// imports /events/unresolved (§2.5): it never replays the account's
// history as new traffic.
func (b *Backend) startCursor(ctx context.Context) error {
	if _, err := b.st.Cursor(ctx, b.o.Endpoint); err == nil {
		return nil
	} else if !errors.Is(err, oandb.ErrNoCursor) {
		return err
	}
	var c struct {
		Seq string `json:"seq"`
	}
	if _, err := b.api.do(ctx, "GET", "/events/cursor", nil, nil, &c); err != nil {
		return err
	}
	seq, err := wire.ParseSeq(c.Seq)
	if err != nil {
		return errors.New("OAN's /events/cursor is not a decimal cursor")
	}
	var u struct {
		Events []json.RawMessage `json:"events"`
	}
	if _, err := b.api.do(ctx, "GET", "/events/unresolved", nil, nil, &u); err != nil {
		return err
	}
	if _, err := b.st.InitCursor(ctx, b.o.Endpoint, seq); err != nil {
		return err
	}
	n := 0
	for _, raw := range u.Events {
		env, err := wire.ParseEnvelope(raw)
		if err != nil {
			b.log.Warn("an unresolved OAN event was refused", "reason", err.Error())
			continue
		}
		if err := b.handle(ctx, env, imported); err != nil {
			return err
		}
		n++
	}
	b.log.Info("fresh OAN connector: cursor initialised from /events/cursor", "seq", c.Seq, "unresolved_imported", n)
	return nil
}

// reconcilePosting settles decisions that were being POSTed when the
// gateway stopped: still unresolved on OAN means the POST did not land,
// and the item is put to the owner again (never re-sent by itself).
func (b *Backend) reconcilePosting(ctx context.Context) error {
	items, err := b.st.Items(ctx, b.o.Endpoint, oandb.StatePosting)
	if err != nil || len(items) == 0 {
		return err
	}
	var u struct {
		Events []struct {
			EventID string `json:"eventId"`
		} `json:"events"`
	}
	if _, err := b.api.do(ctx, "GET", "/events/unresolved", nil, nil, &u); err != nil {
		return err
	}
	open := map[string]bool{}
	for _, e := range u.Events {
		open[e.EventID] = true
	}
	for _, it := range items {
		to := oandb.StatePosted
		if open[it.EventID] {
			to = oandb.StatePending
		}
		b.st.Transition(ctx, b.o.Endpoint, it.EventID, []string{oandb.StatePosting}, to, "")
		b.log.Warn("a decision was in flight when the gateway stopped", "event", it.EventID, "now", to)
	}
	b.kick()
	return nil
}

// backfill pages GET /events?since= until a short page.
func (b *Backend) backfill(ctx context.Context) error {
	for page := 0; ; page++ {
		if page >= b.o.MaxPages {
			return fmt.Errorf("OAN back-fill stopped after %d full pages; continuing from the cursor later", page)
		}
		since, err := b.st.Cursor(ctx, b.o.Endpoint)
		if err != nil {
			return err
		}
		q := url.Values{"since": {wire.FormatSeq(since)}, "limit": {fmt.Sprint(b.o.PageLimit)}}
		var items []json.RawMessage
		if _, err := b.api.do(ctx, "GET", "/events", q, nil, &items); err != nil {
			return err
		}
		if len(items) > b.o.PageLimit {
			return errors.New("OAN returned a page longer than the limit asked for")
		}
		var maxSeq uint64
		for _, raw := range items {
			env, err := wire.ParseEnvelope(raw)
			if err != nil {
				b.log.Warn("OAN event refused in back-fill", "reason", err.Error())
				continue
			}
			maxSeq = max(maxSeq, env.Seq)
			if err := b.handle(ctx, env, backfill); err != nil {
				return err
			}
		}
		if len(items) < b.o.PageLimit {
			return nil
		}
		if maxSeq <= since {
			return errors.New("OAN returned a full page that does not advance the cursor")
		}
	}
}

func (b *Backend) kick() {
	b.mu.Lock()
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

func (b *Backend) changedCh() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// lockGofer serialises chat turns per Gofer: replies are matched to the
// one turn in flight.
func (b *Backend) lockGofer(ctx context.Context, gofer string) (func(), error) {
	b.mu.Lock()
	l, ok := b.locks[gofer]
	if !ok {
		l = make(chan struct{}, 1)
		b.locks[gofer] = l
	}
	b.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *Backend) isOwner(caller string) bool {
	return strings.EqualFold(bareOf(caller), b.o.Owner)
}

func bareOf(j string) string {
	if i := strings.IndexByte(j, '/'); i >= 0 {
		return j[:i]
	}
	return j
}

var _ backendkit.Describer = (*Backend)(nil)

// BridgeDetails tells the console the OAN account: its owner, whether the
// event socket is up, and the key's health by its key id (a hash; the key
// itself never leaves the key file and this process).
func (b *Backend) BridgeDetails() []backendkit.BridgeDetail {
	b.mu.Lock()
	connected, status, keyID := b.connected, b.status, b.keyID
	b.mu.Unlock()
	state := "disconnected"
	if connected {
		state = "connected"
	}
	key := "key " + status
	switch {
	case keyID == "":
		key = "no key read (agentgw oan pair)"
	default:
		key += ", key id " + keyID
	}
	return []backendkit.BridgeDetail{{Kind: "oan account", Name: b.o.Endpoint, State: state,
		Detail: "owner " + b.o.Owner + ", " + key}}
}
