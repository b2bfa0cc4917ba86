package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// SemanticLossKey is the tool member that lists what the bridge could not
// carry between MCP and XMPP for this endpoint and tool. It is a tool-level
// extension member (the manifest schema admits URI-named members there), so
// the MCP _meta object stays exactly the server's. docs/mcp-bridge.md lists
// the values.
const SemanticLossKey = "urn:xmpp:agent-gateway:semantic-loss"

// Limits of the manifest schema and the protocol the bridge fits into.
const (
	maxTools          = 4096
	maxPages          = 1000
	maxAgentName      = 128
	maxAgentTitle     = 256
	maxAgentDesc      = 4096
	maxImplField      = 128
	maxToolTitle      = 256
	maxToolDesc       = 8192
	maxToolJSON       = 4 << 20
	versionHashPrefix = "mcp-"
)

var (
	protocolVersionRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	lossNameRE        = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	toolLimits        = ijson.Limits{MaxBytes: maxToolJSON, MaxStringBytes: 1 << 20}
)

// mcpToolMembers are the Tool members the manifest carries unchanged.
var mcpToolMembers = map[string]bool{
	"name": true, "title": true, "description": true, "inputSchema": true,
	"outputSchema": true, "annotations": true, "execution": true, "_meta": true,
}

// built is one manifest built from a live session.
type built struct {
	canonical []byte
	version   string
	tools     int
	dropped   []string // tools left out, with the reason
}

// serverState is what the manifest needs from the initialize exchange.
type serverState struct {
	info            *mcp.Implementation
	protocolVersion string
	capabilities    map[string]json.RawMessage // raw, to see members the SDK does not model
	instructions    bool
}

// buildManifest lists every tool page and assembles the manifest.
func (b *Backend) buildManifest(ctx context.Context, s *session) (*built, error) {
	raws, err := b.listTools(ctx, s)
	if err != nil {
		return nil, err
	}
	support := map[string]string{}
	for _, raw := range raws {
		var t struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name != "" {
			support[t.Name] = t.Execution.TaskSupport
		}
	}
	s.mu.Lock()
	s.taskSupport = support
	s.mu.Unlock()
	return b.assemble(s.state, raws)
}

// listTools follows nextCursor to the end. MCP cursors stay here: they are
// never exposed as XMPP RSM cursors.
func (b *Backend) listTools(ctx context.Context, s *session) ([]json.RawMessage, error) {
	var all []json.RawMessage
	cursor := ""
	seen := map[string]bool{}
	for page := 0; ; page++ {
		if page >= maxPages {
			return nil, errors.New("tools/list did not end within 1000 pages")
		}
		token := ids.New("agw-list-")
		slot := s.tap.expect(token)
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Meta: mcp.Meta{"progressToken": token}, Cursor: cursor})
		raw := slot.get()
		s.tap.forget(token, true) // a tools/list never asks the caller anything
		if err != nil {
			return nil, b.callError("tools/list", err)
		}
		var tools []json.RawMessage
		next := res.NextCursor
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if raw != nil && json.Unmarshal(raw, &page) == nil {
			tools, next = page.Tools, page.NextCursor
		} else {
			// The SDK answered from its cache or the frame was not seen:
			// its decoded tools lose "execution" and unknown members.
			b.log.Warn("raw tools/list page unavailable; using the SDK's decoded tools")
			for _, t := range res.Tools {
				data, err := json.Marshal(t)
				if err == nil {
					tools = append(tools, data)
				}
			}
		}
		for _, t := range tools {
			// Secrets never reach a manifest, whatever the server lists.
			t, _, _ = b.red.ScrubJSON(t)
			all = append(all, t)
		}
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, errors.New("tools/list repeated a cursor")
		}
		seen[next] = true
		cursor = next
	}
}

// frontToolMeta is front.MetaTool: the _meta key with which `agentgw mcp`
// names the XMPP endpoint behind each MCP tool it serves.
const frontToolMeta = "agentgw/xmpp"

// mirrorsOwnTool reports whether an MCP tool is `agentgw mcp`'s mirror of a
// tool of endpoint itself: a front that can see the endpoint it backs would
// otherwise have the endpoint mirror its own tools one level deeper on
// every refresh, each time as a new manifest version.
func mirrorsOwnTool(raw json.RawMessage, endpoint string) bool {
	var t struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(raw, &t) != nil || t.Meta[frontToolMeta] == nil {
		return false
	}
	var m struct {
		Endpoint string `json:"endpoint"`
	}
	if json.Unmarshal(t.Meta[frontToolMeta], &m) != nil {
		return false
	}
	ep, _, err := bareJID(m.Endpoint)
	return err == nil && ep == endpoint
}

// assemble builds the canonical manifest from the server state and the raw
// tools. The version is the configured one or derived from the content.
func (b *Backend) assemble(st serverState, raws []json.RawMessage) (*built, error) {
	endpointLoss := st.losses()
	out := &built{}
	var tools []any
	names := map[string]bool{}
	size, values := 0, 0
	for i, raw := range raws {
		if len(tools) == maxTools {
			out.dropped = append(out.dropped, fmt.Sprintf("tools beyond %d", maxTools))
			break
		}
		if mirrorsOwnTool(raw, b.Endpoint()) {
			out.dropped = append(out.dropped, fmt.Sprintf("tool #%d: an agentgw mcp mirror of this endpoint's own tool", i+1))
			continue
		}
		t, reason := convertTool(raw, endpointLoss, serverTasks(st))
		if reason == "" {
			reason = b.checkTool(t)
		}
		if reason != "" {
			out.dropped = append(out.dropped, fmt.Sprintf("tool #%d: %s", i+1, reason))
			continue
		}
		name := t["name"].(string)
		if names[name] {
			out.dropped = append(out.dropped, fmt.Sprintf("tool #%d: duplicate name", i+1))
			continue
		}
		c, _ := ijson.Canonical(t)
		n := countValues(t)
		if size+len(c) > manifestToolBudget || values+n > manifestValueBudget {
			out.dropped = append(out.dropped, fmt.Sprintf("tool #%d and later: the manifest size limit is reached", i+1))
			break
		}
		size, values = size+len(c)+1, values+n
		names[name] = true
		tools = append(tools, t)
	}
	if tools == nil {
		tools = []any{}
	}
	out.tools = len(tools)

	agent := map[string]any{"jid": b.jid}
	cfg := b.o
	info := &mcp.Implementation{}
	if st.info != nil {
		info = &mcp.Implementation{
			Name:        b.red.Scrub(st.info.Name),
			Title:       b.red.Scrub(st.info.Title),
			Description: b.red.Scrub(st.info.Description),
			Version:     b.red.Scrub(st.info.Version),
		}
	}
	name := firstNonEmpty(cfg.Name, info.Name, b.local)
	agent["name"] = bound(ijson.ToXMLSafe(name), maxAgentName)
	if t := firstNonEmpty(cfg.Title, info.Title); t != "" {
		agent["title"] = bound(ijson.ToXMLSafe(t), maxAgentTitle)
	}
	if d := firstNonEmpty(cfg.Description, info.Description); d != "" {
		agent["description"] = bound(ijson.ToXMLSafe(d), maxAgentDesc)
	}
	m := map[string]any{
		"manifestSpecVersion": "0",
		"agent":               agent,
		"tools":               tools,
	}
	if info.Name != "" && info.Version != "" {
		m["implementation"] = map[string]any{
			"name":    bound(ijson.ToXMLSafe(info.Name), maxImplField),
			"version": bound(ijson.ToXMLSafe(info.Version), maxImplField),
		}
	}
	if protocolVersionRE.MatchString(st.protocolVersion) {
		m["mcpProtocolVersion"] = st.protocolVersion
	}

	version := cfg.Version
	if version == "" {
		// Derived from everything but the version itself: the same server
		// output always gives the same version, and different content never
		// reuses one (a registered version is immutable).
		agent["version"] = ""
		c, err := ijson.Canonical(m)
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		version = versionHashPrefix + backendkit.VersionDigest(c)
	}
	agent["version"] = version
	c, err := ijson.Canonical(m)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	// The registrar's own validation, so a manifest the directory would
	// refuse fails here with its reason.
	if _, err := directory.ParseManifest(c); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	out.canonical, out.version = c, version
	return out, nil
}

// Budgets for the tools of one manifest, below directory.MaxManifestBytes
// and MaxManifestValues with room for the agent members.
const (
	manifestToolBudget  = directory.MaxManifestBytes - 32<<10
	manifestValueBudget = directory.MaxManifestValues - 1000
)

// checkTool runs the registrar's validation on a manifest holding only t,
// so one unrepresentable tool is left out instead of failing the endpoint.
func (b *Backend) checkTool(t map[string]any) string {
	m := map[string]any{
		"manifestSpecVersion": "0",
		"agent":               map[string]any{"jid": b.jid, "name": "check", "version": "0"},
		"tools":               []any{t},
	}
	c, err := ijson.Canonical(m)
	if err != nil {
		return "not I-JSON"
	}
	if _, err := directory.ParseManifest(c); err != nil {
		// Validation errors are fixed phrases with JSON pointers.
		return err.Error()
	}
	return ""
}

func countValues(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range x {
			n += countValues(e)
		}
		return n
	case []any:
		n := 1
		for _, e := range x {
			n += countValues(e)
		}
		return n
	}
	return 1
}

// serverTasks reports whether the bridge carries the server's tasks: it
// declares task-augmented tools/call in the 2025-11-25 form (taskcall.go).
func serverTasks(st serverState) bool {
	if st.protocolVersion >= "2026-07-28" {
		return false
	}
	var caps struct {
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	return json.Unmarshal(st.capabilities["tasks"], &caps) == nil && caps.Requests.Tools.Call != nil
}

// serverTasksExt reports whether a 2026-07-28 server advertises the Tasks
// extension (io.modelcontextprotocol/tasks, SEP-2663), which the bridge
// carries (taskext.go).
func serverTasksExt(st serverState) bool {
	if st.protocolVersion < "2026-07-28" {
		return false
	}
	var ext map[string]json.RawMessage
	return json.Unmarshal(st.capabilities["extensions"], &ext) == nil && ext[extTasks] != nil
}

// onlyTasksExt: the server's extensions are the Tasks extension alone, so
// nothing of them is lost.
func onlyTasksExt(st serverState) bool {
	var ext map[string]json.RawMessage
	return serverTasksExt(st) && json.Unmarshal(st.capabilities["extensions"], &ext) == nil && len(ext) == 1
}

// losses lists the server capabilities the bridge does not carry.
func (st serverState) losses() []string {
	var l []string
	for k := range st.capabilities {
		if k == "tools" || !lossNameRE.MatchString(k) || (k == "tasks" && serverTasks(st)) || (k == "extensions" && onlyTasksExt(st)) {
			continue
		}
		l = append(l, k)
	}
	if st.instructions {
		l = append(l, "instructions")
	}
	sort.Strings(l)
	return l
}

// convertTool turns one raw MCP Tool into a manifest tool. A non-empty
// reason means the tool cannot be represented and is left out.
func convertTool(raw json.RawMessage, endpointLoss []string, tasksCarried bool) (map[string]any, string) {
	v, err := ijson.Parse(raw, toolLimits)
	if err != nil {
		return nil, "not I-JSON or too large"
	}
	src, ok := v.(map[string]any)
	if !ok {
		return nil, "not an object"
	}
	name, ok := src["name"].(string)
	if !ok || name == "" || !xmltree.ValidText(name) {
		return nil, "missing or unrepresentable name"
	}
	loss := slices.Clone(endpointLoss)
	t := map[string]any{"name": name}
	for k := range src {
		if !mcpToolMembers[k] {
			if k == "icons" {
				loss = append(loss, "tool-icons")
			} else {
				loss = append(loss, "tool-member")
			}
		}
	}
	for _, k := range []string{"title", "description"} {
		v, ok := src[k]
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr {
			loss = append(loss, "tool-"+k)
			continue
		}
		max := maxToolTitle
		if k == "description" {
			max = maxToolDesc
		}
		// Control characters travel as JSON escapes; only what the
		// manifest cannot carry at all (U+FFFE, U+FFFF) is replaced.
		if !ijson.XMLSafe(s) {
			loss = append(loss, "tool-"+k+"-sanitized")
			s = ijson.ToXMLSafe(s)
		}
		if b := bound(s, max); b != s {
			loss = append(loss, "tool-"+k+"-truncated")
			s = b
		}
		t[k] = s
	}
	for _, k := range []string{"annotations", "execution", "_meta"} {
		v, ok := src[k]
		if !ok {
			continue
		}
		if _, isObj := v.(map[string]any); !isObj {
			loss = append(loss, "tool-"+strings.TrimPrefix(k, "_"))
			continue
		}
		t[k] = v
	}
	if ex, ok := t["execution"].(map[string]any); ok && ex["taskSupport"] == "required" && !tasksCarried {
		// Called task-augmented when the server declares
		// tasks.requests.tools.call (taskcall.go); otherwise its calls
		// fail.
		loss = append(loss, "task-required")
	}

	in, ok := src["inputSchema"].(map[string]any)
	if !ok {
		return nil, "inputSchema is not an object"
	}
	in, changed, reason := fitSchema(in, true)
	if reason != "" {
		return nil, "inputSchema: " + reason
	}
	if changed {
		loss = append(loss, "schema-dialect")
	}
	t["inputSchema"] = in
	if v, ok := src["outputSchema"]; ok {
		out, isObj := v.(map[string]any)
		var changed bool
		var reason string
		if isObj {
			out, changed, reason = fitSchema(out, false)
		}
		switch {
		case !isObj || reason != "":
			// Without it structuredContent goes unvalidated; say so.
			loss = append(loss, "output-schema")
		default:
			if changed {
				loss = append(loss, "schema-dialect")
			}
			t["outputSchema"] = out
		}
	}

	t[ns.API] = map[string]any{
		"supportsProgress":     true,
		"supportsCancellation": true,
		"supportsInput":        true,
	}
	if len(loss) > 0 {
		slices.Sort(loss)
		loss = slices.Compact(loss)
		l := make([]any, len(loss))
		for i, s := range loss {
			l[i] = s
		}
		t[SemanticLossKey] = l
	}
	return t, ""
}

// fitSchema translates a schema to 2020-12 if needed and checks that the
// gateway's schema engine accepts it. changed reports a rewrite.
func fitSchema(s map[string]any, input bool) (map[string]any, bool, string) {
	d := dialectOf(s)
	if d == "unknown" {
		return nil, false, "unsupported $schema dialect"
	}
	changed := d != "" && d != "2020-12"
	if d != "" {
		if !to202012(s, d) {
			return nil, false, "schema uses a construct that cannot be translated to JSON Schema 2020-12"
		}
	}
	c, err := ijson.Canonical(s)
	if err != nil {
		return nil, false, "schema is not I-JSON"
	}
	if input {
		_, err = schema.CompileInput(c)
	} else {
		_, err = schema.Compile(c)
	}
	if err != nil {
		// schema errors name a pointer and a fixed phrase, never values.
		return nil, false, err.Error()
	}
	return s, changed, ""
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// bareJID normalizes the configured endpoint address.
func bareJID(s string) (bare, local string, err error) {
	j, err := jid.Parse(s)
	if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return "", "", errors.New("agent jid is not a bare JID localpart@domain")
	}
	return j.Bare().String(), j.Localpart(), nil
}

// callError describes a failed request for the log without server text
// beyond a bounded, redacted rendering of the error.
func (b *Backend) callError(method string, err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return fmt.Errorf("%s: JSON-RPC error %d", method, werr.Code)
	}
	return fmt.Errorf("%s: %s", method, safeText(b.red, err.Error(), 512))
}
