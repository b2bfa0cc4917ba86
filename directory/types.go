package directory

import (
	"context"
	"errors"
)

// Manifest is one immutable registered version of an endpoint's Agent API
// manifest (urn:xmpp:agent-api:0). Canonical holds the RFC 8785 bytes that
// were hashed; every retrieval returns exactly those bytes.
type Manifest struct {
	Endpoint           string // normalized bare JID (agent.jid)
	Version            string // agent.version
	Canonical          []byte
	Hash               string // XEP-0300 base64 SHA-256 of Canonical
	Agent              Agent
	Implementation     *Implementation
	MCPProtocolVersion string
	Tools              []Tool // in manifest order
}

// Agent is the manifest's agent object.
type Agent struct {
	JID, Name, Title, Description, Version, Vendor, Homepage, AvatarURL string
}

// Implementation is the manifest's implementation object.
type Implementation struct{ Name, Version string }

// Tool is one tool of a manifest. Schemas are kept as canonical bytes so that
// schema retrieval and hashing never re-serialize.
type Tool struct {
	Name         string
	Title        string
	Description  string
	InputSchema  []byte // canonical JSON
	InputHash    string
	OutputSchema []byte // canonical JSON; nil when the tool declares none
	OutputHash   string
	Annotations  Annotations
	Ext          ToolExt
	// Canonical is the canonical JSON of the whole tool object, for bridges
	// that rebuild an MCP Tool from it.
	Canonical []byte
}

// Annotations are the MCP tool hints. A nil field was absent and must stay
// absent on every surface.
type Annotations struct {
	ReadOnly, Destructive, Idempotent, OpenWorld *bool
}

// ToolExt is the tool's urn:xmpp:agent-api:0 extension object.
type ToolExt struct {
	SupportsProgress      bool
	SupportsCancellation  bool
	SupportsInput         bool
	DefaultTimeoutSeconds int // 0 when absent
	MaximumTimeoutSeconds int // 0 when absent
	RequiredPermissions   []string
	ApprovalRequired      bool
	Tags                  []string
}

// Tool returns the tool with exactly this name.
func (m *Manifest) Tool(name string) (*Tool, bool) {
	for i := range m.Tools {
		if m.Tools[i].Name == name {
			return &m.Tools[i], true
		}
	}
	return nil, false
}

// DisplayName is the title if any, else the name.
func (m *Manifest) DisplayName() string {
	if m.Agent.Title != "" {
		return m.Agent.Title
	}
	return m.Agent.Name
}

// PageQuery is an XEP-0059 request. Before with HasBefore and an empty value
// asks for the last page.
type PageQuery struct {
	Max       int // <= 0 means the gateway's default page size
	After     string
	Before    string
	HasBefore bool
	Index     int // -1 when absent
}

// Entry is one visible endpoint in a directory or search page.
type Entry struct {
	JID  string
	Name string // display name (title, else name)
}

// Page is one RSM page of endpoints ordered octetwise by bare JID.
type Page struct {
	Items      []Entry
	First      string
	Last       string
	FirstIndex int // position of First among all matches; meaningful only when Items is non-empty
	Count      int // visible endpoints matching, over all pages
}

// VersionStatus describes one registered version for registration-status.
type VersionStatus struct {
	Version   string
	Hash      string
	Active    bool
	Removable bool
}

// Status is the answer to registration-status.
type Status struct {
	Endpoint string
	Active   string // "" when deactivated
	Versions []VersionStatus
}

// ReferenceChecker tells whether retained tasks still reference a version.
// The task engine implements it; until one is installed nothing is
// referenced.
type ReferenceChecker interface {
	VersionReferenced(endpoint, version string) (bool, error)
}

// Errors of registry operations. ValidationError carries the clear,
// attacker-free reason a manifest was rejected.
var (
	ErrConflict     = errors.New("directory: conflicting content for an existing version")
	ErrNotFound     = errors.New("directory: no such endpoint or version")
	ErrHashMismatch = errors.New("directory: hash does not match the registered version")
	ErrActive       = errors.New("directory: the version is active")
	ErrReferenced   = errors.New("directory: retained tasks reference the version")
	ErrTooLarge     = errors.New("directory: manifest exceeds a size or complexity limit")
	ErrBadEndpoint  = errors.New("directory: invalid endpoint identifier")
	// ErrForeignDomain: the manifest's agent.jid is outside the domain the
	// gateway answers for, so nobody would answer the listed endpoint.
	ErrForeignDomain = errors.New("directory: agent.jid is outside the gateway's domain")
)

// ValidationError reports why a manifest or schema was rejected. Reason is
// composed by the validator from fixed phrases and JSON pointers; it never
// quotes the document's values.
type ValidationError struct {
	Reason string
}

func (e *ValidationError) Error() string { return "invalid manifest: " + e.Reason }

// Reader is the read side of the directory that discovery, search,
// invocation and the bridges use. Implementations answer from memory.
type Reader interface {
	// Manifest returns a registered, not removed version.
	Manifest(endpoint, version string) (*Manifest, bool)
	// Active returns the active version, if the endpoint has one.
	Active(endpoint string) (*Manifest, bool)
	// Exists reports whether the endpoint has any registered version.
	Exists(endpoint string) bool
	// List pages the endpoints that have an active version and that
	// visible accepts, ordered octetwise by bare JID.
	List(visible func(endpoint string) bool, q PageQuery) Page
	// Search is List restricted to endpoints whose localpart, name or
	// title contains nick, compared Unicode case-insensitively.
	Search(visible func(endpoint string) bool, nick string, q PageQuery) Page
}

// Admin is the Administrative Provisioning surface, shared by the admin IQs
// and the local `agentgw admin` command.
type Admin interface {
	Register(ctx context.Context, raw []byte) (*Manifest, error)
	Activate(ctx context.Context, endpoint, version, hash string) error
	Deactivate(ctx context.Context, endpoint string) error
	Status(ctx context.Context, endpoint string) (*Status, error)
	RemoveVersion(ctx context.Context, endpoint, version string) error
	RemoveEndpoint(ctx context.Context, endpoint string) error
}
