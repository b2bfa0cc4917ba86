package component

import (
	"log/slog"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/clock"
)

// Config configures a Component. Zero fields take the defaults documented
// beside them.
type Config struct {
	// Domain is the component domain (agents.example.test). When zero the
	// router's domain is used.
	Domain jid.JID
	// Addr is the server's XEP-0114 listener, host:port.
	Addr string
	// Secret is the shared component secret. It is never logged and never
	// part of an error.
	Secret string
	Logger *slog.Logger

	// ServerDomain receives the keepalive pings. Default: Domain without its
	// first label (agents.example.test → example.test), or Domain itself
	// when it has a single label.
	ServerDomain jid.JID

	PingInterval     time.Duration // idle time before pinging the server; default 60s
	PingTimeout      time.Duration // default 10s
	IQTimeout        time.Duration // default 30s
	HandshakeTimeout time.Duration // TCP connect plus handshake; default 10s
	QueueSize        int           // outbound queue; default 4096
	Workers          int           // inbound handler workers; default 16

	MinBackoff  time.Duration // default 250ms
	MaxBackoff  time.Duration // default 30s
	StableAfter time.Duration // a connection up this long resets the backoff; default 60s
	// ConflictGrace is how long a conflict on a reconnect (the server still
	// holding the previous, dead session) is retried before it is fatal; a
	// conflict on the very first connection is fatal at once. Default 10m.
	ConflictGrace time.Duration
	// StartupGrace is how long host-unknown is retried on the first
	// connection, for a server that accepts the component port before its
	// component hosts are active. Default 15s; negative disables it.
	StartupGrace time.Duration

	MaxStanzaBytes int // inbound stanza limit (xmltree MaxBytes); default 2<<20

	// Lang is the xml:lang of the gateway's human-readable XML text (error
	// texts, form titles and instructions, questions): set on every stanza
	// sent that has none, and on stanza error <text/>. "" sets nothing.
	Lang string

	// Instance and Relay are set in a cluster, where several members
	// hold sessions for Domain and the server may hand the answer to an
	// IQ one member sent to another (relay.go): IQ ids carry Instance, and
	// answers for another member's ids are forwarded to it over Relay.
	// Nil Relay: a single instance, ids untagged, nothing forwarded.
	Instance string
	Relay    Relay
	// RelayMaxBytes bounds one forwarded answer (cluster.MaxPayload); a
	// larger answer fails its waiter with ErrAnswerTooLarge. Default 1 MiB.
	RelayMaxBytes int

	// AllowMultiple sends allowMultiple='true' on the stream header:
	// Openfire then lets several sessions share the component domain
	// (the cluster's members); other servers ignore the attribute.
	AllowMultiple bool

	// Clock drives timers and idle detection; default clock.Real.
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PingInterval, 60*time.Second)
	def(&c.PingTimeout, 10*time.Second)
	def(&c.IQTimeout, 30*time.Second)
	def(&c.HandshakeTimeout, 10*time.Second)
	def(&c.MinBackoff, 250*time.Millisecond)
	def(&c.MaxBackoff, 30*time.Second)
	def(&c.StableAfter, 60*time.Second)
	def(&c.ConflictGrace, 10*time.Minute)
	if c.StartupGrace == 0 {
		c.StartupGrace = 15 * time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 4096
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.RelayMaxBytes <= 0 {
		c.RelayMaxBytes = 1 << 20
	}
	if c.MaxStanzaBytes <= 0 {
		c.MaxStanzaBytes = 2 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	c.Domain = c.Domain.Domain()
	if c.ServerDomain.Equal(jid.JID{}) {
		c.ServerDomain = ParentDomain(c.Domain)
	}
	return c
}

// ParentDomain strips the first label of a component domain: the server
// that hosts agents.example.test answers pings to example.test. It is the
// default Config.ServerDomain, which keepalive pings go to.
func ParentDomain(d jid.JID) jid.JID {
	s := d.Domainpart()
	if i := strings.IndexByte(s, '.'); i > 0 && i < len(s)-1 {
		if p, err := jid.Parse(s[i+1:]); err == nil {
			return p
		}
	}
	return d
}

// Stats are counters for metrics.
type Stats struct {
	Connects     uint64 // successful handshakes
	Reconnects   uint64 // connection attempts after a lost or failed connection
	Sent         uint64 // stanzas written to the stream
	Received     uint64 // stanzas read from the stream
	PingFailures uint64 // keepalive pings that failed and caused a reconnect
	QueueLen     int    // stanzas waiting in the outbound queue
	PendingIQs   int    // outbound IQs waiting for their answer

	// In a cluster (Config.Relay): answers read here and forwarded to the
	// member that asked, answers other members forwarded here that
	// completed a wait, and answers dropped (nobody waited, or they could
	// not be forwarded).
	ForwardedAnswers uint64
	RelayedAnswers   uint64
	DroppedAnswers   uint64
}

// FatalError ends Run: the server refused the component for a reason that
// retrying cannot fix. Its text is written for the operator and never holds
// the secret.
type FatalError struct {
	Condition string // the stream error condition, e.g. "conflict"
	Advice    string // what the operator must fix
}

func (e *FatalError) Error() string {
	return "component: server refused the component (" + e.Condition + "): " + e.Advice
}

// FatalAdvice maps the stream error conditions that retrying cannot fix to
// advice for the operator (FatalError.Advice); other conditions are
// transient. agentgw doctor words its handshake check with it.
func FatalAdvice(cond string, domain jid.JID, addr string) (string, bool) {
	d := domain.String()
	switch cond {
	case "conflict":
		return "another component session holds " + d +
			": stop the other gateway instance (or whatever else connects as " + d + ")", true
	case "not-authorized":
		return "the server rejected the component secret for " + d +
			": check secret_env/secret_file against the server's component secret", true
	case "host-unknown", "host-gone":
		return "the server at " + addr + " does not accept " + d +
			" as an external component: declare it (Prosody: Component \"" + d +
			"\"; ejabberd: a host of the ejabberd_service listener; Openfire: the subdomain on Server > Server Settings > External Components) or fix [xmpp] component_domain", true
	}
	return "", false
}
