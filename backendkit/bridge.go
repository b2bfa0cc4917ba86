package backendkit

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/config"
)

// Bridge is one kind of backend as the root plugs it in: one line of the
// root's bridge table (gateway.Bridges) serves `agentgw serve`, `agentgw
// host` and `agentgw doctor`. A bridge owns its [agents.<Section>] table
// (its type, decoding and validation), builds an agent's backend from it
// on a Host the root provides, and checks it for doctor. Adding a bridge
// touches its folder and the table, nothing else (docs/design-notes.md,
// "Adding a bridge").
type Bridge struct {
	// Section is the table under [[agents]] that selects this bridge, as
	// in [agents.mcp]. Its keys are the operator contract of DESIGN.md.
	Section string
	// Config returns a pointer to an empty section of the bridge's own
	// type: the config loader decodes the table into it (unknown keys are
	// refused there) and asks it to validate itself. It may implement
	// SecretSources.
	Config func() Section
	// Check reports problems that span the bridge's agents or other
	// sections of the file (a shared listener, duplicates); optional.
	Check func(c *config.Config) []error
	// MaxRunning, when above zero, is the fixed running limit of every
	// agent of the bridge (the engine's max_running override).
	MaxRunning int
	// Build makes agent a's backend and adds it to h.
	Build func(ctx context.Context, h Host, a Agent) error
	// Secrets lists secret values outside the agents' sections that the
	// bridge reads (key material of a shared listener), for the redactor;
	// optional.
	Secrets func(c *config.Config) []string
	// Doctor checks agent a for `agentgw doctor`, reporting through d;
	// optional.
	Doctor func(ctx context.Context, d Doctor, a Agent)
	// Hosted, when set, says `agentgw host` can run the bridge (it needs
	// no store, cluster or shared listener) and what its table needs, for
	// the host file's "is required" message (such as "command or url").
	Hosted string
}

// Bridges is a bridge table. It gives the config loader the sections
// (config.Sections, config.HostSections).
type Bridges []Bridge

// Check reports a malformed table: a line without a section, config or
// build, or two lines with one section. It is a programming error, which
// the root reports at startup.
func (t Bridges) Check() error {
	seen := map[string]bool{}
	for i, b := range t {
		switch {
		case b.Section == "" || b.Config == nil || b.Build == nil:
			return fmt.Errorf("backendkit: bridge table line %d (%q) needs Section, Config and Build", i+1, b.Section)
		case seen[b.Section]:
			return fmt.Errorf("backendkit: bridge table has two lines for [agents.%s]", b.Section)
		}
		seen[b.Section] = true
	}
	return nil
}

// Lookup returns the bridge owning section name.
func (t Bridges) Lookup(name string) (Bridge, bool) {
	for _, b := range t {
		if b.Section == name {
			return b, true
		}
	}
	return Bridge{}, false
}

// SectionNames lists the sections in table order.
func (t Bridges) SectionNames() []string {
	out := make([]string, len(t))
	for i, b := range t {
		out[i] = b.Section
	}
	return out
}

// NewSection returns an empty section of the bridge owning name.
func (t Bridges) NewSection(name string) config.Section {
	if b, ok := t.Lookup(name); ok {
		return b.Config()
	}
	return nil
}

// CheckSections runs every bridge's Check over its agents.
func (t Bridges) CheckSections(c *config.Config) []error {
	var errs []error
	for _, b := range t {
		if b.Check != nil {
			errs = append(errs, b.Check(c)...)
		}
	}
	return errs
}

// Hosted lists the bridges `agentgw host` can run.
func (t Bridges) Hosted() (names, needs []string) {
	for _, b := range t {
		if b.Hosted != "" {
			names, needs = append(names, b.Section), append(needs, b.Hosted)
		}
	}
	return names, needs
}

// Agents are the agents of c with section name, their Endpoint the bare
// JID as written (the loader has checked it).
func (t Bridges) Agents(c *config.Config, name string) []Agent {
	var out []Agent
	for _, a := range c.Agents {
		if a.Backend == name {
			out = append(out, NewAgent(c, a))
		}
	}
	return out
}

// NewAgent is a's view for its bridge.
func NewAgent(c *config.Config, a config.Agent) Agent {
	ep := a.JID
	if j, err := jid.Parse(a.JID); err == nil {
		ep = j.Bare().String()
	}
	return Agent{Agent: a, Endpoint: ep, Config: c}
}

// Section is a bridge's decoded [agents.<name>] table: Validate reports
// its problems as phrases such as "[agents.mcp] needs exactly one of
// command or url", which the loader prefixes with the agent.
type Section = config.Section

// SecretSources is implemented by sections that read secrets: the
// environment variables and files (relative to the config) they come
// from. The redactor scrubs their values and serve moves the variables
// out of the process environment.
type SecretSources = config.SecretSources

// Agent is one configured agent of a bridge, as Build and Doctor get it.
type Agent struct {
	config.Agent
	// Endpoint is the agent's bare JID.
	Endpoint string
	// Log is the agent's logger (with its endpoint); nil outside Build.
	Log *slog.Logger
	// Config is the whole file, for its directory (Config.Path) and the
	// sections a bridge shares between its agents.
	Config *config.Config
}

// Host is what the root provides a bridge's Build. The gateway implements
// it for `agentgw serve`, the endpoint host for `agentgw host`.
type Host interface {
	Publisher() Publisher
	Availability() Availability
	// Logger is the host's logger (Agent.Log is the agent's).
	Logger() *slog.Logger
	// ComponentDomain is the domain the agent's JID is below.
	ComponentDomain() string
	// Secrets lists every configured secret, for the bridge's own
	// scrubbing; Redactor is the shared redactor over them.
	Secrets() []string
	Redactor() *Redactor
	// Store fills ptr, a pointer to a variable of a store driver interface
	// the bridge owns (such as *oandb.Driver), with the open store's
	// driver, and reports whether the store has one.
	Store(ptr any) bool
	// Uploader is the XEP-0363 client the agent offers files through:
	// service, else one discovered on the server's domain; nil where the
	// host has none.
	Uploader(service string, maxBytes int64) FileUploader
	// Add registers endpoint's backend (a tasks.Backend; nil for none)
	// and, when start is not nil, runs start while the host runs.
	Add(endpoint string, backend any, start func(ctx context.Context) error) error
	// Leased reports whether connection-holding backends must run under a
	// cluster lease (cluster mode); then Lease registers one.
	Leased() bool
	// Lease registers endpoint as a backend that holds one connection and
	// so runs on one instance at a time, under lease name lease: the
	// holder builds a fresh term with newTerm. template (a tasks.Backend)
	// gives the features the endpoint advertises everywhere.
	Lease(endpoint, lease string, template any, newTerm func() (LeasedTerm, error)) error
	// Hold runs run (a resource several endpoints share, such as one
	// listener) on one instance at a time in cluster mode, under lease
	// name lease, restarting it while the lease is held; the tasks of the
	// endpoints that endpoints() lists are dispatched to the holder.
	// Outside cluster mode run simply runs while the host runs.
	Hold(lease string, endpoints func() []string, run func(ctx context.Context) error) error
	// Shared returns the value the host keeps under key, making it with
	// make the first time (one listener for several agents).
	Shared(key string, make func() (any, error)) (any, error)
}

// LeasedTerm is one lease term of a connection-holding backend: the
// backend (a tasks.Backend) that executes tasks, Run holding its
// connection until ctx ends, and Ready (optional) telling when it serves.
type LeasedTerm struct {
	Backend any
	Run     func(ctx context.Context) error
	Ready   func() bool
}

// FileUploader offers bytes to the XMPP side and returns the URL to share
// (XEP-0363).
type FileUploader interface {
	Upload(ctx context.Context, from, name, mediaType string, data []byte) (string, error)
	Origins() []string
}

// Doctor is what `agentgw doctor` gives a bridge's check: one line per
// check, the redactor, the bounds of its probes and the store.
type Doctor interface {
	OK(format string, args ...any)
	Fail(format string, args ...any)
	// Redact adds secrets to the redactor; Scrub applies it.
	Redact(secrets ...string)
	Scrub(s string) string
	Logger() *slog.Logger
	// Timeout bounds each network check; StartTimeout a started
	// process's start and initialize (--mcp-timeout).
	Timeout() time.Duration
	StartTimeout() time.Duration
	// Dial checks that something listens on host:port; the error names
	// the address and ends with hint.
	Dial(ctx context.Context, hostPort, hint string) error
	// ConfigPath is the --config path, for commands a line suggests.
	ConfigPath() string
	// Store is Host.Store on the store doctor opened; false when it did
	// not open.
	Store(ptr any) bool
}

// FillStore sets *ptr, a variable of a store driver interface, to the
// first of handles that implements it: a Host's Store over the drivers
// of the open store.
func FillStore(ptr any, handles ...any) bool {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	want := v.Elem().Type()
	for _, h := range handles {
		hv := reflect.ValueOf(h)
		if !hv.IsValid() || (hv.Kind() == reflect.Pointer || hv.Kind() == reflect.Interface) && hv.IsNil() {
			continue
		}
		if hv.Type().AssignableTo(want) {
			v.Elem().Set(hv)
			return true
		}
	}
	return false
}
