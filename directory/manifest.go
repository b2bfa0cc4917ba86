package directory

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Manifest limits. They are this deployment's documented limits under the
// protocol maxima of the normative manifest schema; exceeding any of them
// yields an error that wraps ErrTooLarge (a resource-constraint on the wire).
//
//	limit                    value     applies to
//	MaxManifestBytes         1 MiB     the whole JSON text as received
//	MaxManifestDepth         64        nesting of objects and arrays, schemas included
//	MaxManifestMembers       10000     members of one object or elements of one array
//	MaxManifestStringBytes   64 KiB    one string or member name, after unescaping
//	MaxManifestValues        200000    JSON values in the whole document
//	MaxToolNameBytes         512       one tool name (UTF-8 bytes)
//	MaxTimeoutSeconds        2^31-1    defaultTimeoutSeconds, maximumTimeoutSeconds
//	schema.MaxPatternBytes   4096      one regular expression in a tool schema
//
// The schema itself caps tools at 4096 per manifest and bounds the agent's
// strings.
const (
	MaxManifestBytes       = 1 << 20
	MaxManifestDepth       = 64
	MaxManifestMembers     = 10000
	MaxManifestStringBytes = 64 << 10
	MaxManifestValues      = 200000
	MaxToolNameBytes       = 512
	MaxTimeoutSeconds      = math.MaxInt32
)

// ManifestLimits are the ijson limits ParseManifest applies.
var ManifestLimits = ijson.Limits{
	MaxBytes:       MaxManifestBytes,
	MaxDepth:       MaxManifestDepth,
	MaxMembers:     MaxManifestMembers,
	MaxStringBytes: MaxManifestStringBytes,
	MaxValues:      MaxManifestValues,
}

// ManifestSchemaJSON is the normative manifest JSON Schema, verbatim from
// the specification.
//
//go:embed manifest.schema.json
var ManifestSchemaJSON []byte

var manifestSchema = func() *schema.Schema {
	s, err := schema.CompileTrusted(ManifestSchemaJSON)
	if err != nil {
		panic("directory: the embedded manifest schema does not compile: " + err.Error())
	}
	return s
}()

// extNS is the name of the tool's XMPP extension object.
const extNS = "urn:xmpp:agent-api:0"

func invalid(format string, args ...any) error {
	return &ValidationError{Reason: fmt.Sprintf(format, args...)}
}

// ParseManifest validates raw as an Agent API manifest and returns it with
// its RFC 8785 canonical bytes and hash. The checks, in order: the limits
// above and the I-JSON prerequisites; no string or member name holding
// U+FFFE or U+FFFF (the only characters its canonical text cannot carry in
// XML); the normative manifest schema; the application rules (agent.jid a
// normalized bare JID with a localpart; version grammar; homepage and
// avatarUrl absolute lowercase-https URIs without userinfo or fragment and
// with a host; tool names non-empty, XML-legal, at most MaxToolNameBytes and
// unique; annotation hints boolean; timeouts within MaxTimeoutSeconds and
// default not above maximum); every tool schema compiles under
// internal/schema and every input schema has an object root.
//
// Errors are *ValidationError, or wrap ErrTooLarge for limit violations.
// Neither quotes the document.
func ParseManifest(raw []byte) (*Manifest, error) {
	return parseManifest(raw, true)
}

func parseManifest(raw []byte, compileSchemas bool) (*Manifest, error) {
	if len(raw) > MaxManifestBytes {
		return nil, fmt.Errorf("%w: manifest is larger than %d bytes", ErrTooLarge, MaxManifestBytes)
	}
	v, err := ijson.Parse(raw, ManifestLimits)
	if err != nil {
		return nil, jsonError(err)
	}
	if err := checkXMLStrings(v, "", 0); err != nil {
		return nil, err
	}
	if err := manifestSchema.Validate(v); err != nil {
		return nil, manifestSchemaError(err)
	}
	canon, err := ijson.Canonical(v)
	if err != nil {
		return nil, jsonError(err)
	}
	// An exact-size copy: append growth leaves up to half the backing array
	// unused, and registered manifests live for the process's lifetime.
	canon = bytes.Clone(canon)
	m := &Manifest{Canonical: canon, Hash: ijson.Hash(canon)}
	root := v.(map[string]any) // the schema guarantees the shapes below

	if err := fillAgent(m, root["agent"].(map[string]any)); err != nil {
		return nil, err
	}
	if impl, ok := root["implementation"].(map[string]any); ok {
		m.Implementation = &Implementation{Name: impl["name"].(string), Version: impl["version"].(string)}
	}
	if s, ok := root["mcpProtocolVersion"].(string); ok {
		m.MCPProtocolVersion = s
	}
	tools := root["tools"].([]any)
	m.Tools = make([]Tool, len(tools))
	seen := make(map[string]struct{}, len(tools))
	cursor := 0
	for i, tv := range tools {
		t := &m.Tools[i]
		if err := fillTool(t, tv.(map[string]any), i, compileSchemas); err != nil {
			return nil, err
		}
		if _, dup := seen[t.Name]; dup {
			return nil, invalid("/tools/%d/name: tool name is not unique in the manifest", i)
		}
		seen[t.Name] = struct{}{}
		// RFC 8785 output is compositional: a member's canonical bytes
		// appear verbatim inside its parent's, so the tool and its schemas
		// share the manifest's memory instead of holding copies.
		if cursor, err = shareTool(t, canon, cursor); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// manifestSchemaError explains schema failures with fixed phrases. The
// manifest schema never descends into schemas, _meta or other free-form
// members, so its instance pointers hold only fixed names and indexes.
func manifestSchemaError(err error) error {
	var ve *schema.ValidationError
	if !errors.As(err, &ve) || len(ve.Failures) == 0 {
		return invalid("manifest does not match the manifest schema")
	}
	parts := make([]string, 0, len(ve.Failures))
	for _, f := range ve.Failures {
		p := pointerOrRoot(f.Pointer)
		var what string
		switch f.Keyword {
		case "additionalProperties":
			what = "has a member the manifest schema does not allow"
			if p == "/" {
				what = "has an unknown top-level member"
			}
		case "required":
			what = "lacks a required member"
		case "type":
			what = "has the wrong JSON type"
		case "pattern":
			what = "does not match the required pattern"
			if p == "/agent/homepage" || p == "/agent/avatarUrl" {
				what = "must be an absolute URI with the scheme https in lowercase"
			}
		case "const", "enum":
			what = "has an unsupported value"
		case "minLength", "maxLength", "minItems", "maxItems", "minimum", "maximum":
			what = "is outside the allowed length or range"
		case "uniqueItems":
			what = "has duplicate items"
		default:
			what = "is invalid"
		}
		parts = append(parts, p+" "+what+" ("+f.Keyword+")")
	}
	return invalid("manifest does not match the manifest schema: %s", strings.Join(parts, "; "))
}

func jsonError(err error) error {
	var e *ijson.Error
	if !errors.As(err, &e) {
		return invalid("manifest could not be canonicalized")
	}
	if e.Kind == ijson.KindLimit {
		return fmt.Errorf("%w: %s", ErrTooLarge, e.Reason)
	}
	var what string
	switch e.Kind {
	case ijson.KindSyntax:
		what = "manifest is not valid JSON"
	case ijson.KindDuplicateKey:
		what = "duplicate member name in an object"
	case ijson.KindLoneSurrogate:
		what = "lone Unicode surrogate in a string"
	case ijson.KindInvalidUTF8:
		what = "invalid UTF-8"
	case ijson.KindNumberRange:
		what = "number not representable as an IEEE-754 double"
	default:
		what = "manifest is not I-JSON"
	}
	if e.Offset >= 0 {
		return invalid("%s (byte offset %d)", what, e.Offset)
	}
	return invalid("%s", what)
}

// checkXMLStrings rejects strings and member names that the canonical
// manifest text cannot carry in XML. The manifest travels only as JSON text
// (the <json/> of a manifest or schema reply), where RFC 8785 writes control
// characters as escapes that are legal XML character data ("JSON Payload
// Encoding" requires exactly that); only U+FFFE and U+FFFF stay raw and are
// forbidden by XML 1.0, so only they are refused. The XML text copies of
// manifest fields (disco names, forms, vCards) are sanitized where they are
// built, in dirxmpp.
func checkXMLStrings(v any, ptr string, depth int) error {
	switch x := v.(type) {
	case string:
		if !ijson.XMLSafe(x) {
			return invalid("%s: string contains U+FFFE or U+FFFF, which JSON text in XML cannot carry", pointerOrRoot(ptr))
		}
	case []any:
		for i, e := range x {
			if err := checkXMLStrings(e, ptr+"/"+strconv.Itoa(i), depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range x {
			if !ijson.XMLSafe(k) {
				return invalid("%s: member name contains U+FFFE or U+FFFF, which JSON text in XML cannot carry", pointerOrRoot(ptr))
			}
			if err := checkXMLStrings(e, ptr+"/"+safeToken(k), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// safeToken renders a member name for an error pointer: the manifest's own
// fixed member names pass through; anything else is elided so that errors
// never quote the document.
func safeToken(k string) string {
	switch k {
	case "manifestSpecVersion", "agent", "implementation", "mcpProtocolVersion", "tools",
		"jid", "name", "title", "description", "version", "vendor", "homepage", "avatarUrl",
		"inputSchema", "outputSchema", "annotations", "execution", "_meta", extNS:
		return k
	}
	return "*"
}

func fillAgent(m *Manifest, a map[string]any) error {
	str := func(k string) string { s, _ := a[k].(string); return s }
	m.Agent = Agent{
		JID: str("jid"), Name: str("name"), Title: str("title"), Description: str("description"),
		Version: str("version"), Vendor: str("vendor"), Homepage: str("homepage"), AvatarURL: str("avatarUrl"),
	}
	ep, err := NormalizeEndpoint(m.Agent.JID)
	if err != nil {
		return invalid("/agent/jid: not a bare JID with a localpart")
	}
	if ep != m.Agent.JID {
		return invalid("/agent/jid: JID is not in normalized form (RFC 7622 case mapping and preparation)")
	}
	m.Endpoint = ep
	if !ids.ValidVersion(m.Agent.Version) {
		return invalid("/agent/version: version must match [A-Za-z0-9._~-]{1,64}")
	}
	m.Version = m.Agent.Version
	if _, ok := a["homepage"]; ok {
		if reason := checkHTTPSURI(m.Agent.Homepage); reason != "" {
			return invalid("/agent/homepage: %s", reason)
		}
	}
	if _, ok := a["avatarUrl"]; ok {
		if reason := checkHTTPSURI(m.Agent.AvatarURL); reason != "" {
			return invalid("/agent/avatarUrl: %s", reason)
		}
	}
	return nil
}

// NormalizeEndpoint returns the normalized form of an endpoint identifier:
// a bare JID with a localpart. Errors wrap ErrBadEndpoint.
func NormalizeEndpoint(s string) (string, error) {
	if s == "" || len(s) > 3071 || strings.ContainsRune(s, '/') {
		return "", ErrBadEndpoint
	}
	j, err := jid.Parse(s)
	if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return "", ErrBadEndpoint
	}
	return j.String(), nil
}

// checkHTTPSURI applies the manifest's URI rules and returns "" or a fixed
// reason.
func checkHTTPSURI(s string) string {
	if !strings.HasPrefix(s, "https://") {
		return "must be an absolute URI with the scheme https in lowercase"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "contains an invalid percent-encoding"
			}
		case c == '#':
			return "must not contain a fragment"
		case !uriChar(c):
			return "contains a character not allowed in a URI"
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Opaque != "" {
		return "is not a valid absolute URI"
	}
	if u.User != nil {
		return "must not contain userinfo"
	}
	if u.Hostname() == "" {
		return "must have a non-empty host"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "has an invalid port"
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return "has an invalid port"
	}
	return ""
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// uriChar reports RFC 3986 unreserved and reserved characters.
func uriChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0
}

// ValidToolName reports whether name satisfies the tool name grammar:
// non-empty, valid UTF-8, only XML 1.0 characters, at most MaxToolNameBytes.
// Names are compared code point by code point without normalization.
func ValidToolName(name string) bool {
	return name != "" && len(name) <= MaxToolNameBytes && xmltree.ValidText(name)
}

func fillTool(t *Tool, o map[string]any, i int, compileSchemas bool) error {
	t.Name = o["name"].(string)
	if !ValidToolName(t.Name) {
		return invalid("/tools/%d/name: tool name must be non-empty, XML-legal and at most %d bytes", i, MaxToolNameBytes)
	}
	t.Title, _ = o["title"].(string)
	t.Description, _ = o["description"].(string)

	if ann, ok := o["annotations"].(map[string]any); ok {
		for _, h := range []struct {
			key string
			dst **bool
		}{
			{"readOnlyHint", &t.Annotations.ReadOnly},
			{"destructiveHint", &t.Annotations.Destructive},
			{"idempotentHint", &t.Annotations.Idempotent},
			{"openWorldHint", &t.Annotations.OpenWorld},
		} {
			hv, present := ann[h.key]
			if !present {
				continue
			}
			b, ok := hv.(bool)
			if !ok {
				return invalid("/tools/%d/annotations/%s: must be a boolean", i, h.key)
			}
			*h.dst = &b
		}
	}
	if ext, ok := o[extNS].(map[string]any); ok {
		if err := fillExt(&t.Ext, ext, i); err != nil {
			return err
		}
	}

	in := o["inputSchema"]
	canon, err := ijson.Canonical(in)
	if err != nil {
		return invalid("/tools/%d/inputSchema: schema could not be canonicalized", i)
	}
	t.InputSchema, t.InputHash = canon, ijson.Hash(canon)
	if compileSchemas {
		s, err := schema.CompileDocument(in)
		if err != nil {
			return schemaError(err, i, "inputSchema")
		}
		if err := s.RequireObjectRoot(); err != nil {
			return schemaError(err, i, "inputSchema")
		}
	}
	if out, ok := o["outputSchema"]; ok {
		canon, err := ijson.Canonical(out)
		if err != nil {
			return invalid("/tools/%d/outputSchema: schema could not be canonicalized", i)
		}
		t.OutputSchema, t.OutputHash = canon, ijson.Hash(canon)
		if compileSchemas {
			if _, err := schema.CompileDocument(out); err != nil {
				return schemaError(err, i, "outputSchema")
			}
		}
	}
	canon, err = ijson.Canonical(o)
	if err != nil {
		return invalid("/tools/%d: tool could not be canonicalized", i)
	}
	t.Canonical = canon
	return nil
}

func schemaError(err error, i int, member string) error {
	if errors.Is(err, schema.ErrTooLarge) {
		return fmt.Errorf("%w: /tools/%d/%s: %s", ErrTooLarge, i, member, strings.TrimPrefix(err.Error(), "schema: "))
	}
	return invalid("/tools/%d/%s: %s", i, member, strings.TrimPrefix(err.Error(), "schema: "))
}

func fillExt(e *ToolExt, o map[string]any, i int) error {
	e.SupportsProgress, _ = o["supportsProgress"].(bool)
	e.SupportsCancellation, _ = o["supportsCancellation"].(bool)
	e.SupportsInput, _ = o["supportsInput"].(bool)
	e.ApprovalRequired, _ = o["approvalRequired"].(bool)
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"defaultTimeoutSeconds", &e.DefaultTimeoutSeconds},
		{"maximumTimeoutSeconds", &e.MaximumTimeoutSeconds},
	} {
		n, ok := o[f.key].(float64)
		if !ok {
			continue
		}
		if n > MaxTimeoutSeconds {
			return fmt.Errorf("%w: /tools/%d/%s/%s exceeds %d seconds", ErrTooLarge, i, extNS, f.key, MaxTimeoutSeconds)
		}
		*f.dst = int(n)
	}
	if e.DefaultTimeoutSeconds > 0 && e.MaximumTimeoutSeconds > 0 && e.DefaultTimeoutSeconds > e.MaximumTimeoutSeconds {
		return invalid("/tools/%d/%s: defaultTimeoutSeconds exceeds maximumTimeoutSeconds", i, extNS)
	}
	e.RequiredPermissions = stringList(o["requiredPermissions"])
	e.Tags = stringList(o["tags"])
	return nil
}

func stringList(v any) []string {
	a, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, len(a))
	for i, s := range a {
		out[i], _ = s.(string)
	}
	return out
}

// shareTool points the tool's canonical byte slices into the manifest's
// canonical bytes. Any occurrence of identical bytes is identical content, so
// the first match at or after cursor serves; tools appear in order, which
// keeps the searches linear overall.
func shareTool(t *Tool, canon []byte, cursor int) (int, error) {
	at := bytes.Index(canon[cursor:], t.Canonical)
	if at < 0 {
		return 0, invalid("manifest could not be canonicalized")
	}
	start := cursor + at
	end := start + len(t.Canonical)
	t.Canonical = canon[start:end:end]
	t.InputSchema = sub(t.Canonical, t.InputSchema)
	if t.OutputSchema != nil {
		t.OutputSchema = sub(t.Canonical, t.OutputSchema)
	}
	return end, nil
}

func sub(parent, child []byte) []byte {
	at := bytes.Index(parent, child)
	if at < 0 {
		return child
	}
	return parent[at : at+len(child) : at+len(child)]
}
