package connectorbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/bindingdb"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/internal/backoff"
	"github.com/agentgw/agentgw/internal/clock"
	"github.com/agentgw/agentgw/internal/logging"
)

// Options configure one connector-backed agent: one [[agents]] entry with
// an [agents.connector] table, as the gateway reads it (the API key
// already read from its env var or file). Zero durations take the
// documented defaults.
type Options struct {
	// Endpoint is the agent's bare JID.
	Endpoint string
	// BaseURL is the connector's base URL (http or https, path prefix kept).
	BaseURL string
	// APIKey is the system API key; "" sends no Authorization header.
	APIKey string

	// Manifest overrides from [[agents]]: name, title, description, and a
	// version prefix used instead of connector.version.
	Name, Title, Description, Version string

	// Bindings keeps the channel binding, connector_id, Card and Skill
	// snapshots, and the live claims on Connector Cards; share one driver
	// between the agents of one store. Nil keeps them in memory only.
	Bindings bindingdb.Driver
	// Publisher registers manifest versions (Backend only); nil builds
	// manifests without publishing them.
	Publisher backendkit.Publisher
	// Availability is told when the agent goes up or down (Backend only).
	Availability backendkit.Availability

	Logger     *slog.Logger
	Clock      clock.Clock
	HTTPClient *http.Client
	// Secrets returns further values to redact from logs and results (the
	// component secret, other backends' keys).
	Secrets func() []string

	// SupportedProfiles is hello's supported_profiles. Default: the three
	// standard profiles, whose tools this bridge projects.
	SupportedProfiles []string

	RequestTimeout      time.Duration // each HTTP request and data-plane request; default 15s
	HealthInterval      time.Duration // GET /health period; default 30s
	PingInterval        time.Duration // data-plane ping period; default 30s
	BindingPollInterval time.Duration // how often the store is checked for a new binding; default 1s
	// Reconnect backoff (backendkit's one policy): from ReconnectMin,
	// growing after each failed connect up to ReconnectMax.
	ReconnectMin time.Duration // first reconnect delay; default 250ms
	ReconnectMax time.Duration // backoff cap; default 30s
	// MaxReconnectFailures consecutive failed connects pause automatic
	// reconnection until the next successful health probe. Default 8.
	MaxReconnectFailures int
	// MaxPacketBytes bounds one data-plane packet. Default 1 MiB.
	MaxPacketBytes int64
	// ReadyWait is how long a call waits for a reconnecting data plane
	// before failing. Default 5s.
	ReadyWait time.Duration
	// AuthTimeout bounds one Auth run. Default 10 minutes.
	AuthTimeout time.Duration
	// ShowQR, when set, renders a qr_login flow's (redacted) qr_code_text
	// to Auth's output after its raw text line; the CLI draws a terminal
	// QR code. Nil prints the raw text only.
	ShowQR func(out io.Writer, text string)
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.RequestTimeout, 15*time.Second)
	def(&o.HealthInterval, 30*time.Second)
	def(&o.PingInterval, 30*time.Second)
	def(&o.BindingPollInterval, time.Second)
	def(&o.ReconnectMin, 250*time.Millisecond)
	def(&o.ReconnectMax, 30*time.Second)
	def(&o.ReadyWait, 5*time.Second)
	def(&o.AuthTimeout, 10*time.Minute)
	if o.MaxReconnectFailures <= 0 {
		o.MaxReconnectFailures = 8
	}
	if o.MaxPacketBytes <= 0 {
		o.MaxPacketBytes = 1 << 20
	}
	if len(o.SupportedProfiles) == 0 {
		o.SupportedProfiles = []string{wire.ProfileIMv1, wire.ProfileIMv2, wire.ProfileDevicev1}
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Client is the gateway's ConnectorClient for one connector: control
// plane, data plane and the agent's one user channel. The Backend runs it
// supervised; `agentgw connector auth` uses it for one session.
type Client struct {
	o      Options
	base   *url.URL
	http   *http.Client
	wsHTTP *http.Client
	log    *slog.Logger
	red    *backendkit.Redactor
	clock  clock.Clock
	st     *bindingStore

	// chanMu serialises channel operations (open, switch, close), which
	// wait on the network; mu guards the fields below and is never held
	// across I/O.
	chanMu sync.Mutex
	mu     sync.Mutex

	card        *wire.Card
	cardRaw     []byte
	skill       Skill
	claimed     string
	supervised  bool // a Backend's client: claims its card in the live registry
	liveClaim   bool
	fatal       error // a condition only the operator can fix (card id conflict)
	health      HealthState
	healthFails int
	healthErr   string
	dataErr     string

	sess            *session
	lastConnectorID string
	chanID          string           // channel open on sess; "" when none
	desc            *wire.Descriptor // descriptor of chanID on sess
	projDesc        *wire.Descriptor // last descriptor, kept across reconnects for projection
	everOpened      bool
	bind            binding

	changed  chan struct{} // closed and replaced at every state change
	onChange func()
	kick     chan struct{}

	stopOnce sync.Once
	stop     context.CancelFunc
	wg       sync.WaitGroup
}

// NewClient validates the options and returns an idle Client.
func NewClient(o Options) (*Client, error) {
	o.defaults()
	if o.Endpoint == "" {
		return nil, errors.New("connectorbridge: Endpoint (the agent JID) is required")
	}
	base, err := wire.ValidateBaseURL(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("connectorbridge: agent %s: %w", o.Endpoint, err)
	}
	if strings.ContainsAny(o.APIKey, "\r\n") {
		return nil, fmt.Errorf("connectorbridge: agent %s: the API key contains a line break", o.Endpoint)
	}
	// The gateway's other secrets are taken once: reading them (files,
	// environment) at every log line would cost more than it protects.
	red := backendkit.NewRedactor(nil)
	red.Add(o.APIKey)
	if o.Secrets != nil {
		red.Add(o.Secrets()...)
	}
	c := &Client{
		o:       o,
		base:    base,
		red:     red,
		clock:   o.Clock,
		health:  HealthUnknown,
		changed: make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	c.log = slog.New(logging.NewHandler(o.Logger.Handler(), red)).With("agent", o.Endpoint)
	c.http = o.HTTPClient
	if c.http == nil {
		c.http = &http.Client{
			// Never follow a redirect: it could carry the Bearer key to
			// another host.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	c.wsHTTP = c.http
	if o.Bindings != nil {
		c.st = &bindingStore{d: o.Bindings, endpoint: o.Endpoint}
	}
	return c, nil
}

// notifyLocked wakes everything waiting for a state change. Callers hold mu.
func (c *Client) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
	if c.onChange != nil {
		c.onChange()
	}
}

func (c *Client) notify() {
	c.mu.Lock()
	c.notifyLocked()
	c.mu.Unlock()
}

// Card returns the current validated Card, or nil before discovery.
func (c *Client) Card() *wire.Card {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.card
}

// Descriptor returns the descriptor of the open channel, or nil.
func (c *Client) Descriptor() *wire.Descriptor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.desc
}

// ChannelID returns the open channel's id, or "".
func (c *Client) ChannelID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chanID
}

// ConnectorID returns the runtime-instance id of the live data plane, or "".
func (c *Client) ConnectorID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return ""
	}
	return c.sess.connectorID
}

// HealthState returns the last health state.
func (c *Client) HealthState() HealthState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

// discover fetches and validates the Card and the Skill, and loads the
// stored binding the first time.
func (c *Client) discover(ctx context.Context) error {
	card, raw, err := c.fetchCard(ctx)
	if err != nil {
		return err
	}
	skill, serr := c.fetchSkill(ctx)
	c.mu.Lock()
	if c.card != nil && c.card.ConnectorCardID != card.ConnectorCardID {
		c.mu.Unlock()
		c.setHealth(HealthIncompatible, "the connector now serves a different connector_card_id")
		return errors.New("connector card id changed; the connector at this base URL is a different connector")
	}
	if serr != nil {
		c.log.Warn("connector Skill unavailable; keeping the previous one", "error", serr)
		skill = c.skill
	}
	first := c.claimed == ""
	c.mu.Unlock()
	if first {
		if c.supervised {
			if err := claimCard(ctx, c.o.Bindings, card.ConnectorCardID, c.o.Endpoint); err != nil {
				c.mu.Lock()
				c.fatal = err
				c.mu.Unlock()
				return err
			}
			c.mu.Lock()
			c.liveClaim = true
			c.mu.Unlock()
		}
		b, err := c.st.load(ctx, card.ConnectorCardID)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.claimed = card.ConnectorCardID
		c.bind = b
		if c.lastConnectorID == "" {
			c.lastConnectorID = b.ConnectorID
		}
		c.mu.Unlock()
	}
	if err := c.st.saveSnapshot(ctx, card.ConnectorCardID, raw, skill.Text); err != nil {
		c.log.Warn("cannot store the Card snapshot", "error", err)
	}
	c.mu.Lock()
	changed := c.card == nil || string(c.cardRaw) != string(raw) || c.skill != skill
	c.card, c.cardRaw, c.skill = card, raw, skill
	if changed {
		c.notifyLocked()
	}
	c.mu.Unlock()
	if changed {
		c.log.Info("connector Card loaded", "connector_card_id", card.ConnectorCardID,
			"connector_version", safeLabel(card.Connector.Version), "tools", len(card.Tools), "skill", skill.Text != "")
	}
	return nil
}

// safeLabel shapes a connector-supplied label for a log line.
func safeLabel(s string) string {
	s = truncateRunes(s, 64)
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// setHealth records a health state and logs transitions only.
func (c *Client) setHealth(h HealthState, reason string) {
	c.mu.Lock()
	old := c.health
	c.health = h
	c.healthErr = reason
	cardID := c.claimed
	if old != h {
		c.notifyLocked()
	}
	sess := c.sess
	c.mu.Unlock()
	if old == h {
		return
	}
	switch h {
	case HealthOK:
		c.log.Info("connector health ok", "was", string(old))
	case HealthDegraded:
		c.log.Warn("connector health degraded", "reason", reason)
	case HealthOffline:
		c.log.Warn("connector offline", "reason", reason)
	case HealthUnauthorized:
		c.log.Error("connector rejected the system API key (authentication failure)", "reason", reason)
	case HealthIncompatible:
		c.log.Error("connector is incompatible and kept offline", "reason", reason)
	}
	if cardID != "" {
		if err := c.st.setHealth(context.Background(), cardID, string(h), reason); err != nil {
			c.log.Warn("cannot store the health state", "error", err)
		}
	}
	if (h == HealthIncompatible || h == HealthUnauthorized) && sess != nil {
		sess.close("connector " + string(h))
	}
}

// checkHealth performs one probe and applies §4.3: 2xx ok, 401/403 an
// authentication failure, anything else one failure (1-2 degraded, 3+
// offline); version, protocol or build changes refetch Card and Skill.
func (c *Client) checkHealth(ctx context.Context) {
	h, err := c.probeHealth(ctx)
	if err != nil {
		if isAuthFailure(err) {
			c.setHealth(HealthUnauthorized, err.Error())
			return
		}
		c.mu.Lock()
		c.healthFails++
		n := c.healthFails
		c.mu.Unlock()
		if n >= 3 {
			c.setHealth(HealthOffline, err.Error())
		} else {
			c.setHealth(HealthDegraded, err.Error())
		}
		return
	}
	c.mu.Lock()
	c.healthFails = 0
	card := c.card
	c.mu.Unlock()
	if card == nil {
		if err := c.discover(ctx); err != nil {
			c.setHealth(HealthDegraded, "Card unavailable: "+err.Error())
			return
		}
		card = c.Card()
	}
	if h.ConnectorCardID != "" && h.ConnectorCardID != card.ConnectorCardID {
		c.setHealth(HealthIncompatible, "/health reports a different connector_card_id")
		return
	}
	if h.ProtocolVersion != "" {
		if err := wire.CheckProtocol("/health", h.ProtocolVersion); err != nil {
			c.setHealth(HealthIncompatible, err.Error())
			return
		}
	}
	if healthDiffers(h, card) {
		c.log.Info("connector version, protocol or build changed; refetching the Card and Skill")
		if err := c.discover(ctx); err != nil {
			c.setHealth(HealthDegraded, "Card refetch failed: "+err.Error())
			return
		}
		card = c.Card()
		if h.ProtocolVersion != "" && !sameProtocol(h.ProtocolVersion, card.ProtocolVersion) {
			c.setHealth(HealthIncompatible, "/health protocol_version does not match the Connector Card")
			return
		}
		if healthDiffers(h, card) {
			c.log.Warn("connector /health still disagrees with its Card after a refetch")
		}
		c.refreshDescriptor(ctx)
	}
	c.mu.Lock()
	was := c.health
	c.mu.Unlock()
	if was == HealthIncompatible {
		// The Card and /health agree again (for example after an upgrade).
		c.log.Info("connector compatible again")
	}
	c.setHealth(HealthOK, "")
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func sameProtocol(a, b string) bool {
	x, err1 := wire.ParseProtocol(a)
	y, err2 := wire.ParseProtocol(b)
	return err1 == nil && err2 == nil && x == y
}

func healthDiffers(h *healthReply, card *wire.Card) bool {
	if h.ConnectorCardVersion != "" && h.ConnectorCardVersion != card.Connector.Version {
		return true
	}
	if h.ProtocolVersion != "" && !sameProtocol(h.ProtocolVersion, card.ProtocolVersion) {
		return true
	}
	return h.Build != nil && !h.Build.Equal(card.Build)
}

// connect dials, says hello with the last connector_id and opens the
// agent's channel, then publishes the new session, replacing the old
// runtime instance atomically.
func (c *Client) connect(ctx context.Context) (*session, error) {
	c.mu.Lock()
	card := c.card
	prev := c.lastConnectorID
	c.mu.Unlock()
	if card == nil {
		return nil, errors.New("no Connector Card yet")
	}
	s, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.hello(ctx, card, prev, c.o.SupportedProfiles); err != nil {
		s.close("hello failed")
		return nil, err
	}
	if prev != "" && s.connectorID != prev {
		c.log.Info("connector issued a new connector_id; replacing the runtime instance (the previous one expired or was rebuilt)",
			"connector_id", s.connectorID)
	}
	if err := c.st.setConnectorID(ctx, card.ConnectorCardID, s.connectorID); err != nil {
		c.log.Warn("cannot store the connector_id", "error", err)
	}
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	c.mu.Lock()
	want := c.bind.ChannelID
	c.mu.Unlock()
	chID, desc, err := c.openChannel(ctx, s, card, want)
	if err != nil {
		s.close("channel.open failed")
		return nil, err
	}
	// Persist first, so that whoever sees the new session sees the
	// binding it implies.
	c.bindChannel(ctx, card, want != "", want, chID, desc)
	c.mu.Lock()
	old := c.sess
	c.sess = s
	c.lastConnectorID = s.connectorID
	c.chanID, c.desc, c.projDesc = chID, desc, desc
	c.everOpened = true
	c.dataErr = ""
	c.notifyLocked()
	c.mu.Unlock()
	if old != nil && old != s {
		old.close("replaced by a new runtime instance")
	}
	return s, nil
}

// openChannel sends channel.open (empty id the first time, the persisted
// one later) and validates the ack (§8.4).
func (c *Client) openChannel(ctx context.Context, s *session, card *wire.Card, want string) (string, *wire.Descriptor, error) {
	ack, err := s.request(ctx, wire.TypeChannelOpen, true, want, struct{}{})
	if err != nil {
		return "", nil, fmt.Errorf("channel.open: %w", err)
	}
	var pl struct {
		ConnectorChannelID   string          `json:"connector_channel_id"`
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	if err := json.Unmarshal(ack.Payload, &pl); err != nil {
		return "", nil, errors.New("channel.open.ack: payload is not a valid object")
	}
	if !wire.ValidWireID(ack.ConnectorChannelID) || pl.ConnectorChannelID != ack.ConnectorChannelID {
		return "", nil, errors.New("channel.open.ack: connector_channel_id is missing or differs between envelope and payload")
	}
	desc, dropped, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, ack.ConnectorChannelID)
	if err != nil {
		return "", nil, fmt.Errorf("channel.open.ack: %w", err)
	}
	c.logDropped(dropped)
	return ack.ConnectorChannelID, desc, nil
}

func (c *Client) logDropped(dropped []string) {
	if len(dropped) > 0 {
		c.log.Warn("connection descriptor lists tools absent from the Card (or twice); ignored", "tools", strings.Join(dropped, ","))
	}
}

// bindChannel applies the persistence rules: a new channel is persisted
// only once authenticated (§5.3); the bound channel is updated in place
// when the connector assigned a new id or its auth state changed. wasBound
// tells whether the channel was opened from the stored binding.
func (c *Client) bindChannel(ctx context.Context, card *wire.Card, wasBound bool, want, got string, desc *wire.Descriptor) {
	if wasBound && want != "" && got != want {
		c.log.Info("connector did not recognise the bound channel and assigned a new one; updating the binding")
	}
	auth := desc.Authenticated()
	if !auth && !wasBound {
		c.log.Info("connector channel is not authenticated; tools stay hidden until `agentgw connector auth` succeeds")
		return
	}
	c.mu.Lock()
	bound := c.bind
	c.mu.Unlock()
	if bound.ChannelID == got && bound.Authenticated == auth {
		return
	}
	g, err := c.st.setChannel(ctx, card.ConnectorCardID, got, auth)
	if err != nil {
		c.log.Error("cannot store the channel binding", "error", err)
		return
	}
	c.mu.Lock()
	c.bind.ChannelID, c.bind.Authenticated = got, auth
	if c.st != nil {
		c.bind.Generation = g
	}
	c.mu.Unlock()
	if auth {
		c.log.Info("connector channel bound", "connector_channel_id", got, "status", desc.Connection.Status)
	} else if bound.Authenticated {
		c.log.Warn("connector channel is no longer authenticated; its tools are withdrawn", "status", desc.Connection.Status)
	}
}

// onDescriptorPush validates a pushed descriptor and ignores any identity
// mismatch (§8.17).
func (c *Client) onDescriptorPush(s *session, p *wire.Packet) {
	c.mu.Lock()
	ok := c.sess == s && p.ConnectorChannelID == c.chanID && c.card != nil
	card := c.card
	c.mu.Unlock()
	if !ok {
		c.log.Debug("connection.descriptor.push for a channel not open here ignored")
		return
	}
	var pl struct {
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	json.Unmarshal(p.Payload, &pl)
	desc, dropped, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, p.ConnectorChannelID)
	if err != nil {
		c.log.Warn("ignoring an invalid connection.descriptor.push", "reason", err.Error())
		return
	}
	c.logDropped(dropped)
	c.applyDescriptor(s, p.ConnectorChannelID, desc)
}

// applyDescriptor installs a fresh descriptor for the open channel and
// persists an auth-state change off the read loop.
func (c *Client) applyDescriptor(s *session, chID string, desc *wire.Descriptor) {
	c.mu.Lock()
	if c.sess != s || c.chanID != chID {
		c.mu.Unlock()
		return
	}
	c.desc, c.projDesc = desc, desc
	card := c.card
	wasBound := c.bind.ChannelID == chID
	c.notifyLocked()
	c.mu.Unlock()
	// Off the read loop: both may wait on the network.
	go func() {
		c.bindChannel(context.Background(), card, wasBound, chID, chID, desc)
		if !desc.Authenticated() {
			ctx, cancel := context.WithTimeout(context.Background(), c.o.RequestTimeout)
			defer cancel()
			c.releaseSignedOut(ctx, s, chID)
		}
	}()
}

// refreshDescriptor asks for the open channel's descriptor (§8.15).
func (c *Client) refreshDescriptor(ctx context.Context) {
	c.mu.Lock()
	s, chID, card := c.sess, c.chanID, c.card
	c.mu.Unlock()
	if s == nil || chID == "" || card == nil {
		return
	}
	desc, err := c.getDescriptor(ctx, s, card, chID)
	if err != nil {
		c.log.Warn("connection.descriptor.get failed", "error", err)
		return
	}
	c.applyDescriptor(s, chID, desc)
}

func (c *Client) getDescriptor(ctx context.Context, s *session, card *wire.Card, chID string) (*wire.Descriptor, error) {
	ack, err := s.request(ctx, wire.TypeDescriptorGet, true, chID, struct{}{})
	if err != nil {
		return nil, err
	}
	var pl struct {
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	if json.Unmarshal(ack.Payload, &pl) != nil {
		return nil, errors.New("connection.descriptor.get.ack: payload is not a valid object")
	}
	desc, dropped, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, chID)
	if err != nil {
		return nil, fmt.Errorf("connection.descriptor.get.ack: %w", err)
	}
	c.logDropped(dropped)
	return desc, nil
}

// closeChannel sends channel.close; it keeps the binding (§8.5).
func (c *Client) closeChannel(ctx context.Context, s *session, chID string) {
	if _, err := s.request(ctx, wire.TypeChannelClose, true, chID, struct{}{}); err != nil {
		c.log.Debug("channel.close not acknowledged", "error", err)
	}
}

// detach forgets a session that ended.
func (c *Client) detach(s *session) {
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil
		c.chanID = ""
		c.desc = nil
		c.dataErr = s.reason
		c.notifyLocked()
	}
	c.mu.Unlock()
}

// start runs the supervised loops until ctx ends or Close is called, and
// returns the loops' context.
func (c *Client) start(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	c.stop = cancel
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.runDataPlane(ctx) }()
	go func() { defer c.wg.Done(); c.runHealth(ctx) }()
	go func() { defer c.wg.Done(); c.runBindingWatch(ctx) }()
	return ctx
}

// sleep waits d on the injected clock; false when ctx ended first.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	ch := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(ch) })
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// reconnectBackoff is the data plane's reconnect delay: backendkit's one
// policy, with full jitter so that many gateways do not reconnect in step.
// Its loop waits on connector health between attempts, so it uses the
// policy directly rather than backendkit.Supervisor.Run.
func (c *Client) reconnectBackoff() *backoff.Backoff {
	return backendkit.Supervisor{Min: c.o.ReconnectMin, Max: c.o.ReconnectMax}.Backoff()
}

func (c *Client) canDial() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.card != nil && c.fatal == nil && c.health.usable()
}

func (c *Client) runDataPlane(ctx context.Context) {
	fails := 0
	bo := c.reconnectBackoff()
	for ctx.Err() == nil {
		if !c.canDial() {
			select {
			case <-c.kick:
			case <-ctx.Done():
				return
			}
			continue
		}
		s, err := c.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			c.mu.Lock()
			c.dataErr = err.Error()
			c.mu.Unlock()
			c.log.Warn("connector data plane connect failed", "error", err, "attempt", fails)
			if isAuthFailure(err) {
				c.setHealth(HealthUnauthorized, err.Error())
			}
			if fails >= c.o.MaxReconnectFailures {
				c.log.Warn("connector data plane: pausing reconnection until the next successful health probe", "failures", fails)
				select {
				case <-c.kick: // drain a stale kick
				default:
				}
				select {
				case <-c.kick:
				case <-ctx.Done():
					return
				}
				fails = 0
				bo.Reset()
				continue
			}
			if !c.sleep(ctx, bo.Next()) {
				return
			}
			continue
		}
		fails = 0
		bo.Reset()
		c.log.Info("connector data plane up", "connector_id", s.connectorID, "connector_channel_id", c.ChannelID())
		c.releaseSignedOut(ctx, s, c.ChannelID())
		pingDone := make(chan struct{})
		go func() { defer close(pingDone); c.pingLoop(ctx, s) }()
		select {
		case <-s.done:
		case <-ctx.Done():
			c.shutdown(s)
			<-pingDone
			return
		}
		<-pingDone
		c.detach(s)
		c.log.Warn("connector data plane lost; reconnecting", "reason", s.reason)
		if !c.sleep(ctx, bo.Next()) {
			return
		}
	}
}

// shutdown closes the channel route and the data plane.
func (c *Client) shutdown(s *session) {
	c.mu.Lock()
	chID := c.chanID
	c.mu.Unlock()
	if chID != "" && s.alive() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.closeChannel(ctx, s, chID)
		cancel()
	}
	s.close("gateway shutting down")
	c.detach(s)
}

func (c *Client) pingLoop(ctx context.Context, s *session) {
	for {
		ch := make(chan struct{})
		t := c.clock.AfterFunc(c.o.PingInterval, func() { close(ch) })
		select {
		case <-ch:
		case <-s.done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		if _, err := s.request(ctx, wire.TypePing, false, "", nil); err != nil {
			var re *RemoteError
			if errors.As(err, &re) || !s.alive() || ctx.Err() != nil {
				continue
			}
			c.log.Warn("connector did not answer ping; closing the data plane", "error", err)
			s.close("ping timeout")
			return
		}
	}
}

func (c *Client) runHealth(ctx context.Context) {
	for {
		if !c.sleep(ctx, c.o.HealthInterval) {
			return
		}
		c.checkHealth(ctx)
	}
}

// runBindingWatch notices bindings written by `agentgw connector auth` (or
// logout) in another process and reopens the channel.
func (c *Client) runBindingWatch(ctx context.Context) {
	for {
		if !c.sleep(ctx, c.o.BindingPollInterval) {
			return
		}
		c.mu.Lock()
		cardID, known := c.claimed, c.bind.Generation
		c.mu.Unlock()
		if cardID == "" || c.st == nil {
			continue
		}
		g, err := c.st.generation(ctx, cardID)
		if err != nil || g == known {
			continue
		}
		b, err := c.st.load(ctx, cardID)
		if err != nil {
			continue
		}
		c.mu.Lock()
		c.bind = b
		c.mu.Unlock()
		c.log.Info("connector channel binding changed in the store; reopening the channel")
		c.switchChannel(ctx, b)
	}
}

// switchChannel moves the live session to the bound channel, closing the
// temporary or stale one.
func (c *Client) switchChannel(ctx context.Context, b binding) {
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	c.mu.Lock()
	s, cur, card := c.sess, c.chanID, c.card
	c.mu.Unlock()
	if s == nil || card == nil || b.ChannelID == "" {
		return
	}
	if b.ChannelID == cur {
		c.refreshDescriptor(ctx)
		c.releaseLocked(ctx, s, cur)
		return
	}
	chID, desc, err := c.openChannel(ctx, s, card, b.ChannelID)
	if err != nil {
		c.log.Warn("reopening the bound channel failed", "error", err)
		return
	}
	c.mu.Lock()
	if c.sess == s {
		c.chanID, c.desc, c.projDesc = chID, desc, desc
		c.notifyLocked()
	}
	c.mu.Unlock()
	if cur != "" && cur != chID {
		c.closeChannel(ctx, s, cur)
	}
	c.bindChannel(ctx, card, true, b.ChannelID, chID, desc)
	c.releaseLocked(ctx, s, chID)
}

// releaseSignedOut removes the gateway's route to a channel that is not
// signed in: the gateway cannot use it, and only `agentgw connector auth`
// (which changes the stored binding and so makes the gateway reopen it)
// can sign it in. The binding is kept (§8.13, architecture §5.7). A
// connector without auth flows keeps its route, since its channel can only
// become ready on its own.
func (c *Client) releaseSignedOut(ctx context.Context, s *session, chID string) {
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	c.releaseLocked(ctx, s, chID)
}

// releaseLocked is releaseSignedOut with chanMu held.
func (c *Client) releaseLocked(ctx context.Context, s *session, chID string) {
	if !c.supervised || chID == "" {
		return
	}
	c.mu.Lock()
	out := c.sess == s && c.chanID == chID && !c.desc.Authenticated() && c.card != nil && len(c.card.AuthFlows) > 0
	if out {
		c.chanID, c.desc = "", nil
		c.notifyLocked()
	}
	c.mu.Unlock()
	if out {
		c.closeChannel(ctx, s, chID)
		c.log.Info("connector channel not signed in; route closed until `agentgw connector auth` binds it (binding kept)")
	}
}

// Close stops the loops, sends channel.close and closes the data plane.
func (c *Client) Close() error {
	c.stopOnce.Do(func() {
		if c.stop != nil {
			c.stop()
			c.wg.Wait()
		}
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s != nil {
			c.shutdown(s)
		}
		c.mu.Lock()
		cardID, live := c.claimed, c.liveClaim
		c.mu.Unlock()
		if live {
			releaseCard(c.o.Bindings, cardID, c.o.Endpoint)
		}
	})
	return nil
}

// Open prepares a one-off session for an operator command: Card, health
// (an API-key rejection is fatal), data plane, hello and the agent's
// channel (the bound one, else a new one). No reconnection loop runs.
func (c *Client) Open(ctx context.Context) error {
	if err := c.discover(ctx); err != nil {
		return err
	}
	if _, err := c.probeHealth(ctx); err != nil {
		if isAuthFailure(err) {
			return err
		}
		c.log.Warn("connector /health failed; trying the data plane anyway", "error", err)
	}
	if _, err := c.connect(ctx); err != nil {
		return err
	}
	return nil
}

// live returns the live session, channel, Card and descriptor.
func (c *Client) live() (*session, string, *wire.Card, *wire.Descriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess, c.chanID, c.card, c.desc
}
