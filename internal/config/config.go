// Package config loads and checks agentgw's TOML configuration. The key
// names are the operator contract of DESIGN.md: add keys, never rename them.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"mellium.im/xmpp/jid"
)

// Config is the whole file.
type Config struct {
	XMPP       XMPP       `toml:"xmpp"`
	Store      Store      `toml:"store"`
	Tasks      Tasks      `toml:"tasks"`
	Policy     Policy     `toml:"policy"`
	Federation Federation `toml:"federation"`
	Metrics    Metrics    `toml:"metrics"`
	Log        Log        `toml:"log"`
	// Agents are the [[agents]] entries; each bridge section in them is
	// decoded by the bridge that owns it (Load's Sections).
	Agents []Agent `toml:"-"`
	// ACC is the agent-control-center listener (accbridge); nil when absent.
	ACC       *ACC      `toml:"acc"`
	Messaging Messaging `toml:"messaging"`
	Cluster   Cluster   `toml:"cluster"`
	// Telemetry is OpenTelemetry tracing; off by default.
	Telemetry Telemetry `toml:"telemetry"`
	// Console is the operator web console; off by default.
	Console Console `toml:"console"`

	// Dir is the directory of the config file; relative paths in the file
	// are resolved against it.
	Dir string `toml:"-"`
}

// XMPP is the component link.
type XMPP struct {
	ComponentDomain string   `toml:"component_domain"`
	Server          string   `toml:"server"`
	SecretEnv       string   `toml:"secret_env"`
	SecretFile      string   `toml:"secret_file"`
	LocalDomains    []string `toml:"local_domains"`
	Admins          []string `toml:"admins"`
	// GatewayName is the disco identity name of the gateway.
	GatewayName string `toml:"gateway_name"`
	// PingIntervalSeconds is the idle time before the gateway pings the
	// server (XEP-0199). Default 60.
	PingIntervalSeconds int `toml:"ping_interval_seconds"`
	// IQTimeoutSeconds bounds every IQ the gateway sends. Default 30.
	IQTimeoutSeconds int `toml:"iq_timeout_seconds"`
	// Lang is the xml:lang (a BCP 47 tag) of the human-readable XML text
	// the gateway sends: error texts, forms, instructions, questions, and,
	// as deployment policy, the manifest texts copied into disco and
	// vCards. Default "en", the language of the gateway's own texts.
	Lang string `toml:"lang"`
	// SelfRegisterDomains are the local domains whose C2S accounts may
	// self-register a manifest for their own bare JID (the spec's Self
	// Registration profile, used by `agentgw host`). Empty (the default)
	// turns the profile off. Every entry must also be in local_domains:
	// federation never authorizes self-registration.
	SelfRegisterDomains []string `toml:"self_register_domains"`
}

// langTag is the BCP 47 language-tag syntax (RFC 5646), loosely: subtags of
// 1 to 8 letters or digits, the first letters only. xml:lang admits any
// BCP 47 tag.
var langTag = regexp.MustCompile(`^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$`)

// Store is the database: SQLite (the default, one file) or PostgreSQL
// (several instances sharing one database).
type Store struct {
	// Driver is "sqlite" (default) or "postgres".
	Driver string `toml:"driver"`
	// Path is the SQLite file (driver sqlite).
	Path string `toml:"path"`
	// DSNEnv or DSNFile names where the PostgreSQL connection string (a
	// libpq URL) is read from (driver postgres). It carries the database
	// password, so it is a secret: read with ReadSecret, never logged.
	DSNEnv  string `toml:"dsn_env"`
	DSNFile string `toml:"dsn_file"`
}

// Store drivers.
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Cluster names this instance among those sharing one PostgreSQL store.
type Cluster struct {
	// Instance is unique per instance; default the host name.
	Instance string `toml:"instance"`
	// LeaseSeconds is each instance's renewable lease on its tasks and
	// bridge connections (docs/cluster.md): a dead instance's work moves
	// to a survivor between LeaseSeconds and 4/3·LeaseSeconds after its
	// last renewal. Default 10, 1 to 300.
	LeaseSeconds int `toml:"lease_seconds"`
	// AllowMultiple sends Openfire's allowMultiple attribute on the
	// component stream header in cluster mode, so that Openfire lets the
	// members share the component domain (docs/cluster.md, openfire/).
	// Default true; ejabberd ignores it. Unused on SQLite.
	AllowMultiple *bool `toml:"allow_multiple"`
}

// ClusterAllowMultiple is [cluster] allow_multiple with its default.
func (c *Config) ClusterAllowMultiple() bool {
	return c.Cluster.AllowMultiple == nil || *c.Cluster.AllowMultiple
}

// LeaseTTL is [cluster] lease_seconds as a duration.
func (c *Config) LeaseTTL() time.Duration { return time.Duration(c.Cluster.LeaseSeconds) * time.Second }

// instanceName is what an instance name may be: it appears in lease rows,
// metric labels and logs.
var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Tasks tunes the durable task engine.
type Tasks struct {
	// ReplaySeconds is the advertised request_replay_seconds. Default 86400.
	ReplaySeconds int `toml:"replay_seconds"`
	// RetentionSeconds is how long a terminal task and its result stay
	// queryable after creation (retain-until). Default 86400.
	RetentionSeconds int `toml:"retention_seconds"`
	// MaxActive is the number of non-terminal tasks admitted at once before
	// invoke answers resource-constraint. Default 10000.
	MaxActive int `toml:"max_active"`
	// DefaultTimeoutSeconds applies when neither the invoke nor the tool
	// gives a deadline. Default 3600.
	DefaultTimeoutSeconds int `toml:"default_timeout_seconds"`
	// InputTimeoutSeconds is how long an input request waits. Default 600.
	InputTimeoutSeconds int `toml:"input_timeout_seconds"`
	// ProgressPerSecond is the most progress revisions (events) one task
	// commits in any second; updates in between are coalesced into the
	// latest value, which is always committed before the task settles.
	// Default 10.
	ProgressPerSecond int `toml:"progress_per_second"`
	// MaxActivePerPrincipal caps the non-terminal tasks of one caller
	// (bare JID); beyond it invoke answers resource-constraint. Default
	// 1000.
	MaxActivePerPrincipal int `toml:"max_active_per_principal"`
	// MaxActivePerDomain caps the non-terminal tasks of all callers of one
	// remote domain together. Default 2000.
	MaxActivePerDomain int `toml:"max_active_per_domain"`
	// RetainedBytesPerPrincipal is the budget of stored arguments and
	// results of one caller's terminal tasks, until they are purged at
	// the end of retention. While it is spent new invokes of that caller
	// answer resource-constraint; nothing retained is evicted. Default
	// 268435456 (256 MiB).
	RetainedBytesPerPrincipal int64 `toml:"retained_bytes_per_principal"`
	// MaxRunningPerBackend bounds the dispatched, unsettled tasks of one
	// agent's backend; further invokes are admitted and wait accepted
	// until a slot frees. [[agents]] max_running overrides it. Default 64.
	MaxRunningPerBackend int `toml:"max_running_per_backend"`
	// MaxDelegationDepth bounds how deep a chain of calls back through the
	// gateway may go (an MCP backend that is `agentgw mcp`): a direct call
	// is depth 0, and an invoke whose delegation depth is above this is
	// refused with policy-violation. Default 8.
	MaxDelegationDepth int `toml:"max_delegation_depth"`
}

// Policy is trusted local policy for tools that declare approval or
// permissions. Without an entry such tools fail closed.
type Policy struct {
	// Permissions maps a permission name to the principals (bare JIDs or
	// domains) that hold it.
	Permissions map[string][]string `toml:"permissions"`
	// Approved lists "endpoint-jid tool-name" pairs whose approvalRequired
	// is satisfied by operator approval, for the listed principals.
	Approvals []Approval `toml:"approvals"`
	// TrustedFronts are the accounts (bare JIDs) that may invoke on behalf
	// of the principal their user's token named (urn:agentgw:principal:0,
	// docs/oauth.md); anyone else asserting a principal is refused.
	TrustedFronts []string `toml:"trusted_fronts"`
}

// Approval grants operator approval for one tool to some principals.
type Approval struct {
	Endpoint   string   `toml:"endpoint"`
	Tool       string   `toml:"tool"`
	Principals []string `toml:"principals"`
}

// Federation tunes rate limits for requesters. The top-level rates are
// the per-JID budgets of remote principals (a remote domain as a whole gets
// DomainMultiplier times them); [federation.local] holds those of local
// principals, whose defaults are sized for service accounts.
type Federation struct {
	Rates
	DomainMultiplier float64 `toml:"domain_multiplier"`
	Local            Rates   `toml:"local"`
}

// Rates are rate limits in requests per second with a burst, per requester
// bare JID. Zero takes the default; a negative rate disables the limit.
type Rates struct {
	DiscoveryPerSecond float64 `toml:"discovery_per_second"`
	DiscoveryBurst     int     `toml:"discovery_burst"`
	SchemaPerSecond    float64 `toml:"schema_per_second"`
	SchemaBurst        int     `toml:"schema_burst"`
	InvokePerSecond    float64 `toml:"invoke_per_second"`
	InvokeBurst        int     `toml:"invoke_burst"`
	InputPerSecond     float64 `toml:"input_per_second"`
	InputBurst         int     `toml:"input_burst"`
}

// Metrics is the Prometheus endpoint; off unless Listen is set.
type Metrics struct {
	Listen string `toml:"listen"`
}

// Log selects the log format ("text" or "json") and level.
type Log struct {
	Format string `toml:"format"`
	Level  string `toml:"level"`
}

// Agent is one [[agents]] entry.
type Agent struct {
	JID         string   `toml:"jid"`
	Manifest    string   `toml:"manifest"`
	Name        string   `toml:"name"`
	Title       string   `toml:"title"`
	Description string   `toml:"description"`
	Version     string   `toml:"version"`
	VisibleTo   []string `toml:"visible_to"`
	InvocableBy []string `toml:"invocable_by"`
	// MaxRunning overrides [tasks] max_running_per_backend for this agent.
	MaxRunning int `toml:"max_running"`

	// Backend names the bridge section the entry has ("mcp" for
	// [agents.mcp]); empty for a manifest entry. Section is that table,
	// decoded into the bridge's own type.
	Backend string  `toml:"-"`
	Section Section `toml:"-"`
	// extra are further bridge sections of the entry (refused).
	extra []string
}

// Section is a bridge's decoded [agents.<name>] table (its type lives in
// the bridge's package).
type Section interface {
	// Validate reports the table's problems, each a phrase that the loader
	// prefixes with the agent, such as "[agents.mcp] needs exactly one of
	// command or url".
	Validate(c *Config, a *Agent) []string
}

// Sections are the bridge sections a file may hold: the root's bridge
// table implements it (backendkit.Bridges).
type Sections interface {
	// SectionNames lists the sections in the order messages name them.
	SectionNames() []string
	// NewSection returns an empty section to decode table name into, or
	// nil when no bridge owns name.
	NewSection(name string) Section
	// CheckSections reports the problems that span agents (after every
	// section validated itself).
	CheckSections(c *Config) []error
}

// SecretSources is implemented by sections that read secrets: the
// environment variables and the files (relative to the config) they are
// read from.
type SecretSources interface {
	SecretSources() (envs, files []string)
}

// readFile reads the TOML file at path (at most 1 MiB).
func readFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	if len(data) > 1<<20 {
		return "", fmt.Errorf("config: %s is larger than 1 MiB", path)
	}
	return string(data), nil
}

// decodeFile decodes the TOML file at path into v and refuses unknown
// keys, naming them. Before that check, more (optional) decodes the
// primitives v left undecoded and returns the keys among them that are
// unknown.
func decodeFile(path string, v any, more func(md toml.MetaData) ([]string, error)) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	md, err := toml.Decode(data, v)
	if err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	var unknown []string
	if more != nil {
		if unknown, err = more(md); err != nil {
			return fmt.Errorf("config: %s: %w", path, err)
		}
	}
	var keys []string
	for _, k := range md.Undecoded() {
		keys = append(keys, k.String())
	}
	for _, u := range unknown {
		// A table of unknown name is named by its undecoded keys already.
		if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, u+".") }) {
			keys = append(keys, u)
		}
	}
	if len(keys) > 0 {
		return fmt.Errorf("config: %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	return nil
}

// fileConfig is the file as decoded: the [[agents]] entries stay
// primitives until decodeAgent splits them into the common keys and the
// bridge's section.
type fileConfig struct {
	Config
	Agents []map[string]toml.Primitive `toml:"agents"`
}

// decodeAgent decodes the common keys of one [[agents]] entry (or of a
// host file) into a, and the one table a bridge owns into a.Section. It
// returns the keys that are neither (prefixed with where), which refuse
// the file.
func decodeAgent(md toml.MetaData, raw map[string]toml.Primitive, a *Agent, sections Sections, where string) ([]string, error) {
	var unknown []string
	v := reflect.ValueOf(a).Elem()
	common := map[string]bool{}
	for i := 0; i < v.NumField(); i++ {
		tag := v.Type().Field(i).Tag.Get("toml")
		if tag == "" || tag == "-" {
			continue
		}
		common[tag] = true
		if p, ok := raw[tag]; ok {
			if err := md.PrimitiveDecode(p, v.Field(i).Addr().Interface()); err != nil {
				return nil, fmt.Errorf("%s: %w", tag, err)
			}
		}
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if common[k] {
			continue
		}
		var s Section
		if sections != nil {
			s = sections.NewSection(k)
		}
		if s == nil {
			unknown = append(unknown, where+k)
			continue
		}
		if err := md.PrimitiveDecode(raw[k], s); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if a.Section != nil {
			a.extra = append(a.extra, k)
			continue
		}
		a.Backend, a.Section = k, s
	}
	return unknown, nil
}

// Load reads and validates the file at path; sections are the bridges'
// [agents.<name>] tables it may hold.
func Load(path string, sections Sections) (*Config, error) {
	var f fileConfig
	err := decodeFile(path, &f, func(md toml.MetaData) ([]string, error) {
		var unknown []string
		f.Config.Agents = make([]Agent, len(f.Agents))
		for i, raw := range f.Agents {
			u, err := decodeAgent(md, raw, &f.Config.Agents[i], sections, "agents.")
			if err != nil {
				return nil, fmt.Errorf("[[agents]] #%d: %w", i+1, err)
			}
			unknown = append(unknown, u...)
		}
		return unknown, nil
	})
	if err != nil {
		return nil, err
	}
	c := f.Config
	c.Dir = dirOf(path)
	c.applyDefaults()
	if err := c.validate(sections); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return &c, nil
}

func dirOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "."
	}
	return path[:i]
}

func (c *Config) applyDefaults() {
	c.Telemetry.applyDefaults()
	c.Console.applyDefaults()
	if c.XMPP.PingIntervalSeconds == 0 {
		c.XMPP.PingIntervalSeconds = 60
	}
	if c.XMPP.IQTimeoutSeconds == 0 {
		c.XMPP.IQTimeoutSeconds = 30
	}
	if c.XMPP.GatewayName == "" {
		c.XMPP.GatewayName = "agentgw"
	}
	if c.XMPP.Lang == "" {
		c.XMPP.Lang = "en"
	}
	if c.Store.Path == "" {
		c.Store.Path = "agentgw.db"
	}
	if c.Store.Driver == "" {
		c.Store.Driver = DriverSQLite
	}
	if c.Cluster.Instance == "" {
		// The host name, when it fits an instance name; a single SQLite
		// instance then falls back to "agentgw", while a cluster member
		// must be named (Validate says so).
		h, _ := os.Hostname()
		switch {
		case instanceName.MatchString(h):
			c.Cluster.Instance = h
		case c.Store.Driver != DriverPostgres:
			c.Cluster.Instance = "agentgw"
		}
	}
	if c.Cluster.LeaseSeconds == 0 {
		c.Cluster.LeaseSeconds = 10
	}
	if c.Tasks.ReplaySeconds == 0 {
		c.Tasks.ReplaySeconds = 86400
	}
	if c.Tasks.RetentionSeconds == 0 {
		c.Tasks.RetentionSeconds = 86400
	}
	if c.Tasks.MaxActive == 0 {
		c.Tasks.MaxActive = 10000
	}
	if c.Tasks.DefaultTimeoutSeconds == 0 {
		c.Tasks.DefaultTimeoutSeconds = 3600
	}
	if c.Tasks.InputTimeoutSeconds == 0 {
		c.Tasks.InputTimeoutSeconds = 600
	}
	if c.Tasks.ProgressPerSecond == 0 {
		c.Tasks.ProgressPerSecond = 10
	}
	if c.Tasks.MaxActivePerPrincipal == 0 {
		c.Tasks.MaxActivePerPrincipal = 1000
	}
	if c.Tasks.MaxActivePerDomain == 0 {
		c.Tasks.MaxActivePerDomain = 2000
	}
	if c.Tasks.RetainedBytesPerPrincipal == 0 {
		c.Tasks.RetainedBytesPerPrincipal = 256 << 20
	}
	if c.Tasks.MaxRunningPerBackend == 0 {
		c.Tasks.MaxRunningPerBackend = 64
	}
	if c.Tasks.MaxDelegationDepth == 0 {
		c.Tasks.MaxDelegationDepth = 8
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.ACC != nil {
		c.ACC.applyDefaults()
	}
	c.Messaging.applyDefaults()
}

// Validate checks the whole config and reports every problem it finds;
// sections are the bridges' tables (as given to Load).
func (c *Config) Validate(sections Sections) error { return c.validate(sections) }

func (c *Config) validate(sections Sections) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	x := c.XMPP
	if x.ComponentDomain == "" {
		add("[xmpp] component_domain is required")
	} else if d, err := jid.Parse(x.ComponentDomain); err != nil || d.Localpart() != "" || d.Resourcepart() != "" {
		add("[xmpp] component_domain %q is not a bare domain", x.ComponentDomain)
	}
	if x.Server == "" {
		add("[xmpp] server is required (host:port of the server's component listener)")
	}
	if (x.SecretEnv == "") == (x.SecretFile == "") {
		add("[xmpp] set exactly one of secret_env or secret_file")
	}
	for _, d := range x.LocalDomains {
		if j, err := jid.Parse(d); err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			add("[xmpp] local_domains entry %q is not a domain", d)
		}
	}
	for _, d := range x.SelfRegisterDomains {
		j, err := jid.Parse(d)
		if err != nil || j.Localpart() != "" || j.Resourcepart() != "" {
			add("[xmpp] self_register_domains entry %q is not a domain", d)
			continue
		}
		local := false
		for _, l := range x.LocalDomains {
			local = local || strings.EqualFold(l, j.Domainpart())
		}
		if !local {
			add("[xmpp] self_register_domains entry %q is not in local_domains (remote domains can never self-register)", d)
		}
		if strings.EqualFold(j.Domainpart(), x.ComponentDomain) {
			add("[xmpp] self_register_domains entry %q is the component domain, which has no C2S accounts", d)
		}
	}
	for _, a := range x.Admins {
		// A domain here would name no one (admins are matched by bare JID)
		// and a resource would be dropped: both are typos, refused.
		if j, err := jid.Parse(a); err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
			add("[xmpp] admins entry %q is not a bare JID localpart@domain", a)
		}
	}
	for _, k := range []struct {
		name string
		v    int64
	}{
		{"progress_per_second", int64(c.Tasks.ProgressPerSecond)},
		{"max_active_per_principal", int64(c.Tasks.MaxActivePerPrincipal)},
		{"max_active_per_domain", int64(c.Tasks.MaxActivePerDomain)},
		{"retained_bytes_per_principal", c.Tasks.RetainedBytesPerPrincipal},
		{"max_running_per_backend", int64(c.Tasks.MaxRunningPerBackend)},
	} {
		if k.v < 0 {
			add("[tasks] %s must be at least 1", k.name)
		}
	}
	if x.Lang != "" && !langTag.MatchString(x.Lang) {
		add("[xmpp] lang %q is not a BCP 47 language tag (such as \"en\" or \"de-CH\")", x.Lang)
	}
	for _, perm := range sortedKeys(c.Policy.Permissions) {
		for _, e := range c.Policy.Permissions[perm] {
			if _, err := ParsePrincipal(e); err != nil {
				add("[policy.permissions] %q: entry %q %v", perm, e, err)
			}
		}
	}
	for _, e := range c.Policy.TrustedFronts {
		if j, err := jid.Parse(e); err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
			add("[policy] trusted_fronts: %q is not a bare JID localpart@domain", e)
		}
	}
	for i, ap := range c.Policy.Approvals {
		where := fmt.Sprintf("[[policy.approvals]] #%d", i+1)
		if j, err := jid.Parse(ap.Endpoint); err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
			add("%s: endpoint %q is not a bare JID localpart@domain", where, ap.Endpoint)
		}
		if ap.Tool == "" {
			add("%s: tool is required", where)
		}
		for _, e := range ap.Principals {
			if _, err := ParsePrincipal(e); err != nil {
				add("%s (endpoint %q): principals entry %q %v", where, ap.Endpoint, e, err)
			}
		}
	}
	if c.Tasks.MaxDelegationDepth < 0 || c.Tasks.MaxDelegationDepth > 1000 {
		add("[tasks] max_delegation_depth must be from 1 to 1000")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		add("[log] format must be \"text\" or \"json\"")
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		where := fmt.Sprintf("[[agents]] #%d", i+1)
		j, err := jid.Parse(a.JID)
		if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
			add("%s: jid %q is not a bare JID localpart@domain", where, a.JID)
			continue
		}
		if x.ComponentDomain != "" && j.Domainpart() != strings.ToLower(x.ComponentDomain) {
			add("%s: jid %q is not below component_domain %q", where, a.JID, x.ComponentDomain)
		}
		bare := j.Bare().String()
		// visible_to and invocable_by fail open when empty (all local
		// principals), so an entry that is not a principal must stop the
		// config rather than be dropped.
		for _, l := range [...]struct {
			key     string
			entries []string
		}{{"visible_to", a.VisibleTo}, {"invocable_by", a.InvocableBy}} {
			for _, e := range l.entries {
				if _, err := ParsePrincipal(e); err != nil {
					add("%s (jid %q): %s entry %q %v", where, a.JID, l.key, e, err)
				}
			}
		}
		if seen[bare] {
			add("%s: jid %q is declared twice", where, a.JID)
		}
		seen[bare] = true
		if a.MaxRunning < 0 {
			add("%s: max_running must be at least 1", where)
		}
		n := len(a.extra)
		if a.Manifest != "" {
			n++
		}
		if a.Section != nil {
			n++
			for _, p := range a.Section.Validate(c, &c.Agents[i]) {
				add("%s: %s", where, p)
			}
		}
		if n != 1 {
			add("%s: set exactly one backend: %s", where, backendNames(sections))
		}
	}
	if sections != nil {
		errs = append(errs, sections.CheckSections(c)...)
	}
	c.validateACC(add)
	errs = append(errs, c.Messaging.validate()...)
	errs = append(errs, c.Telemetry.validate()...)
	errs = append(errs, c.Console.validate()...)
	if (c.Console.TokenEnv != "" || c.Console.TokenFile != "") && c.Console.Listen != "" && len(c.XMPP.Admins) == 0 {
		errs = append(errs, errors.New("[console] a token login acts as the first of [xmpp] admins: list one"))
	}
	switch st := c.Store; st.Driver {
	case "", DriverSQLite:
		if st.DSNEnv != "" || st.DSNFile != "" {
			add(`[store] dsn_env and dsn_file apply to driver = "postgres"; the sqlite driver uses path`)
		}
	case DriverPostgres:
		if (st.DSNEnv == "") == (st.DSNFile == "") {
			add(`[store] driver = "postgres" needs exactly one of dsn_env or dsn_file (a libpq URL such as postgresql://agentgw@db.example:5432/agentgw)`)
		}
	default:
		add(`[store] driver %q is not "sqlite" or "postgres"`, st.Driver)
	}
	if c.Cluster.Instance == "" {
		if c.Store.Driver == DriverPostgres {
			add("[cluster] instance is required with driver = \"postgres\" when the host name is not a usable instance name (1 to 64 letters, digits, '.', '_' or '-')")
		}
	} else if !instanceName.MatchString(c.Cluster.Instance) {
		add("[cluster] instance %q must be 1 to 64 letters, digits, '.', '_' or '-' (it defaults to the host name; set it when that does not fit)", c.Cluster.Instance)
	}
	if c.Cluster.LeaseSeconds < 1 || c.Cluster.LeaseSeconds > 300 {
		add("[cluster] lease_seconds %d must be 1 to 300", c.Cluster.LeaseSeconds)
	}
	return errors.Join(errs...)
}

// StoreDSN reads the PostgreSQL connection string ([store] dsn_env or
// dsn_file). Errors name the source, never the value.
func (c *Config) StoreDSN() (string, error) {
	dsn, err := ReadSecret(c.Store.DSNEnv, c.Path(c.Store.DSNFile))
	if err != nil {
		return "", fmt.Errorf("[store] DSN: %w", err)
	}
	return dsn, nil
}

// ParsePrincipal parses one entry of a principal list (visible_to,
// invocable_by, [policy] principals): a bare JID or a domain. It returns the
// entry in the normalized form requesters are compared in.
func ParsePrincipal(s string) (string, error) {
	if strings.Contains(s, "*") {
		return "", errors.New("is not a bare JID or a domain: wildcards are not supported (a domain entry covers every principal of that domain)")
	}
	j, err := jid.Parse(s)
	if err != nil {
		return "", fmt.Errorf("is not a bare JID or a domain: %v", err)
	}
	if j.Resourcepart() != "" {
		return "", errors.New("is not a bare JID or a domain: it has a resource part")
	}
	return j.String(), nil
}

// ParsePrincipals parses a whole principal list; it fails on the first
// entry that is not a principal instead of dropping it.
func ParsePrincipals(list []string) ([]string, error) {
	out := make([]string, len(list))
	for i, s := range list {
		p, err := ParsePrincipal(s)
		if err != nil {
			return nil, fmt.Errorf("entry %q %w", s, err)
		}
		out[i] = p
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Path resolves p against the config file's directory.
func (c *Config) Path(p string) string {
	if p == "" || strings.HasPrefix(p, "/") || c.Dir == "" {
		return p
	}
	return c.Dir + "/" + p
}

// ReadSecret returns the secret named by an env var or a file. The value is
// trimmed of one trailing newline. Errors name the source, never the value.
// A variable moved out of the environment by TakeSecretEnv is still found.
func ReadSecret(envName, file string) (string, error) {
	switch {
	case envName != "":
		v, ok := lookupSecretEnv(envName)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", envName)
		}
		return v, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("cannot read secret file: %w", err)
		}
		v := strings.TrimRight(string(data), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", file)
		}
		return v, nil
	}
	return "", errors.New("no secret source configured")
}

// ComponentSecret reads the component secret.
func (c *Config) ComponentSecret() (string, error) {
	return ReadSecret(c.XMPP.SecretEnv, c.Path(c.XMPP.SecretFile))
}

// PingInterval and IQTimeout as durations.
func (c *Config) PingInterval() time.Duration {
	return time.Duration(c.XMPP.PingIntervalSeconds) * time.Second
}
func (c *Config) IQTimeout() time.Duration {
	return time.Duration(c.XMPP.IQTimeoutSeconds) * time.Second
}

// backendNames is the list the exactly-one-backend message offers.
func backendNames(sections Sections) string {
	names := []string{"manifest"}
	if sections != nil {
		for _, n := range sections.SectionNames() {
			names = append(names, "[agents."+n+"]")
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
