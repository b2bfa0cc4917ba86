package directory

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
)

// Tool and tool-collection disco nodes (spec "Protocol Namespaces and
// Identifiers"):
//
//	urn:xmpp:agent-tools:0#VERSION
//	urn:xmpp:agent-tool:0#VERSION#BASE64URL(name)   (RFC 4648 §5, unpadded)

const (
	toolNodePrefix  = ns.Tool + "#"
	toolsNodePrefix = ns.ToolsNodePrefix + "#"
)

// ErrBadNode reports a tool node that does not follow the grammar.
var ErrBadNode = errors.New("directory: malformed tool node")

// ToolNode returns the tool node of a tool in an API version.
func ToolNode(version, tool string) string {
	return toolNodePrefix + version + "#" + base64.RawURLEncoding.EncodeToString([]byte(tool))
}

// ParseToolNode splits a tool node into its version and tool name. It
// rejects padding, characters outside the base64url alphabet (including
// line breaks the standard decoder would skip), non-canonical encodings
// (non-zero trailing bits), invalid UTF-8, empty names, names that violate
// ValidToolName, and invalid versions. Errors are ErrBadNode.
func ParseToolNode(node string) (version, tool string, err error) {
	rest, ok := strings.CutPrefix(node, toolNodePrefix)
	if !ok {
		return "", "", ErrBadNode
	}
	version, enc, ok := strings.Cut(rest, "#")
	if !ok || !ids.ValidVersion(version) || enc == "" {
		return "", "", ErrBadNode
	}
	// The longest encoding of a MaxToolNameBytes name.
	if len(enc) > base64.RawURLEncoding.EncodedLen(MaxToolNameBytes) {
		return "", "", ErrBadNode
	}
	for i := 0; i < len(enc); i++ {
		if !b64urlChar(enc[i]) {
			return "", "", ErrBadNode
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", "", ErrBadNode
	}
	name := string(raw)
	if !ValidToolName(name) {
		return "", "", ErrBadNode
	}
	// Strict decoding plus the alphabet check already imply a canonical
	// encoding; the round trip makes that independent of decoder details.
	if base64.RawURLEncoding.EncodeToString(raw) != enc {
		return "", "", ErrBadNode
	}
	return version, name, nil
}

func b64urlChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// ToolsNode returns the tool collection node of an API version.
func ToolsNode(version string) string { return toolsNodePrefix + version }

// ParseToolsNode returns the version of a tool collection node.
func ParseToolsNode(node string) (version string, ok bool) {
	version, ok = strings.CutPrefix(node, toolsNodePrefix)
	if !ok || !ids.ValidVersion(version) {
		return "", false
	}
	return version, true
}
