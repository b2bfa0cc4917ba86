package connectorbridge

import (
	"context"
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
	"github.com/agentgw/agentgw/connectorbridge/chatdb"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
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
	// IM Profile v2 (chat.go). Chat is off unless Inbox and Chats are set.
	// Inbox is the bare JID that receives the IM network's messages and
	// whose replies go back ([agents.connector] inbox).
	Inbox string
	// Chats is the durable queue of chat messages in both directions.
	Chats chatdb.Driver
	// Uploader offers inbound files to the XMPP side (XEP-0363); nil sends
	// a file's absence as a note in the text.
	Uploader FileUploader
	// DownloadOrigins are the origins ("https://host:port") the gateway
	// downloads XMPP users' shared files from, beside the upload service's
	// own ([agents.connector] download_origins).
	DownloadOrigins []string
	// ChatLimits bound chat traffic; zero fields take the defaults.
	ChatLimits ChatLimits
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
	o     Options
	base  *url.URL
	http  *http.Client
	ctl   *transport.Control
	dp    *transport.DataPlane
	log   *slog.Logger
	red   *backendkit.Redactor
	clock clock.Clock
	st    *bindingStore

	// chanMu serialises channel operations (open, switch, close), which
	// wait on the network; mu guards the fields below and is never held
	// across I/O.
	chanMu sync.Mutex
	mu     sync.Mutex

	card        *wire.Card
	cardRaw     []byte
	skill       transport.Skill
	claimed     string
	supervised  bool // a Backend's client: claims its card in the live registry
	liveClaim   bool
	fatal       error // a condition only the operator can fix (card id conflict)
	health      HealthState
	healthFails int
	healthErr   string
	dataErr     string

	sess            *transport.Session
	lastConnectorID string
	chanID          string           // channel open on sess; "" when none
	desc            *wire.Descriptor // descriptor of chanID on sess
	projDesc        *wire.Descriptor // last descriptor, kept across reconnects for projection
	everOpened      bool
	bind            binding

	// onChat takes IM v2 pushes (set by a Backend with an inbox); nil
	// refuses them.
	onChat func(*transport.Session, *wire.Packet)

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
	return c.sess.ConnectorID()
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
	card, raw, err := c.control().FetchCard(ctx)
	if err != nil {
		return err
	}
	skill, serr := c.control().FetchSkill(ctx)
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
	s = wire.TruncateRunes(s, 64)
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, s)
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
	if _, err := c.control().ProbeHealth(ctx); err != nil {
		if transport.IsAuthFailure(err) {
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
func (c *Client) live() (*transport.Session, string, *wire.Card, *wire.Descriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess, c.chanID, c.card, c.desc
}

// control is the HTTP control plane with the current options.
func (c *Client) control() *transport.Control {
	return &transport.Control{Base: c.base, HTTP: c.http, APIKey: c.o.APIKey, Timeout: c.o.RequestTimeout, Red: c.red, Log: c.log}
}

// dataPlane is the WebSocket data plane with the current options; its
// sessions call back into the Client when they end or get a descriptor.
func (c *Client) dataPlane() *transport.DataPlane {
	return &transport.DataPlane{
		Base: c.base, HTTP: c.http, APIKey: c.o.APIKey, Timeout: c.o.RequestTimeout, MaxPacketBytes: c.o.MaxPacketBytes,
		Red: c.red, Log: c.log, Clock: c.clock, OnEnd: c.detach, OnDescriptorPush: c.onDescriptorPush,
		OnChat: c.onChat,
	}
}
