package backendkit

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentgw/agentgw/internal/ijson"
)

// ManifestDoc is the manifest a bridge generates, with the members every
// bridge fills; the registry validates it against the normative schema.
type ManifestDoc struct {
	ManifestSpecVersion string         `json:"manifestSpecVersion"`
	Agent               ManifestAgent  `json:"agent"`
	Implementation      *ManifestImpl  `json:"implementation,omitempty"`
	Tools               []ManifestTool `json:"tools"`
}

// ManifestAgent is the manifest's agent object.
type ManifestAgent struct {
	JID         string `json:"jid"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version"`
	Vendor      string `json:"vendor,omitempty"`
}

// ManifestImpl is the implementation object.
type ManifestImpl struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ManifestTool is one tool.
type ManifestTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Meta         map[string]any  `json:"_meta,omitempty"`
	Ext          *ToolExt        `json:"urn:xmpp:agent-api:0,omitempty"`
}

// ToolExt is the tool's urn:xmpp:agent-api:0 extension object.
type ToolExt struct {
	SupportsProgress     bool `json:"supportsProgress"`
	SupportsCancellation bool `json:"supportsCancellation"`
	SupportsInput        bool `json:"supportsInput,omitempty"`
}

// Limits of the normative manifest schema that bridges cut remote text to.
const (
	MaxAgentName        = 128
	MaxAgentTitle       = 256
	MaxAgentDescription = 4096
	MaxImplField        = 128
	MaxToolTitle        = 256
	MaxToolDescription  = 8192
)

// Stamp sets the agent version to prefix (mapped onto the schema's version
// characters) plus the digest of the manifest with the version empty and
// of extra (what changes the backend without showing in the manifest), and
// returns the manifest bytes.
func Stamp(doc *ManifestDoc, prefix string, extra ...[]byte) ([]byte, error) {
	doc.Agent.Version = ""
	unversioned, err := ijson.MarshalNoEscape(doc)
	if err != nil {
		return nil, err
	}
	doc.Agent.Version = VersionPrefix(prefix) + "-" + VersionDigest(append([][]byte{unversioned}, extra...)...)
	return ijson.MarshalNoEscape(doc)
}

// maxVersionPrefix leaves room for "-" and the digest within the 64
// characters of a version.
const maxVersionPrefix = 64 - 1 - 2*DigestBytes

// VersionPrefix maps a remote version onto [A-Za-z0-9._~-], leaving room
// for the digest within 64 characters.
func VersionPrefix(v string) string {
	var b strings.Builder
	for i := 0; i < len(v) && b.Len() < maxVersionPrefix; i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '~', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

// Truncate cuts s to at most max runes, for bounding remote text.
func Truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max])
}
