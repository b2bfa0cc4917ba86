package mcpfront

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/displaytext"
)

// _meta keys the front adds. "agentgw/" is our own prefix under MCP's
// _meta key rules.
const (
	// MetaTool on a tool names the XMPP endpoint, tool, API version and
	// manifest hash the MCP tool is pinned to.
	MetaTool = "agentgw/xmpp"
	// MetaTask on a result, progress notification or error names the XMPP
	// task behind the call, so it can be recovered with "agentgw task".
	MetaTask = "agentgw/task"
)

// JSON-RPC error codes of the front, in the implementation-defined server
// error range.
const (
	// CodeTaskCancelled: the XMPP task settled "cancelled" although this
	// host did not cancel it.
	CodeTaskCancelled int64 = -32080
	// CodeInputUnavailable: the task needed input and the host cannot
	// elicit, or the user declined or dismissed the form; the task was
	// cancelled.
	CodeInputUnavailable int64 = -32081
	// CodeTaskLost: the task's state could not be followed to the end; it
	// may still run. The error data names it.
	CodeTaskLost int64 = -32082
	// CodeAgentUnavailable: the agent refused or did not answer the
	// invocation; no task exists (or, after timeouts, its existence is
	// unknown and the data names the request-id to retry).
	CodeAgentUnavailable int64 = -32083
)

// taskMeta is what a host learns about the XMPP task behind a call.
type taskMeta struct {
	Endpoint    string           `json:"endpoint"`
	Tool        string           `json:"tool"`
	Version     string           `json:"version"`
	TaskID      string           `json:"taskId,omitempty"`
	RequestID   string           `json:"requestId"`
	State       agentproto.State `json:"state,omitempty"`
	Revision    int64            `json:"revision"`
	RetainUntil string           `json:"retainUntil,omitempty"`
	Summary     string           `json:"summary,omitempty"`
	Code        string           `json:"code,omitempty"`
	Retryable   *bool            `json:"retryable,omitempty"`
	Condition   string           `json:"condition,omitempty"`
	// Converted counts content items the SDK could not represent and that
	// were passed as text instead.
	Converted int `json:"convertedContent,omitempty"`
	// DroppedStructured is set when structuredContent was not a JSON object
	// and the host's protocol revision cannot carry that.
	DroppedStructured bool `json:"droppedStructuredContent,omitempty"`
}

// Bounds of text the front copies from XMPP payloads into MCP results.
const (
	maxMessageText = 2000
	maxSummaryText = 2000
)

// completedResult maps the payload of a completed task, {"result": R,
// "summary": S}, to the CallToolResult R with its members as sent:
// content, structuredContent (raw bytes, so numbers keep their precision),
// isError and _meta. MetaTask is added to _meta.
//
// objectOnly is set for hosts on MCP revisions before 2026-07-28, whose
// structuredContent must be a JSON object.
func completedResult(payload json.RawMessage, tm taskMeta, objectOnly bool) (*mcp.CallToolResult, error) {
	var p agentproto.CompletedPayload
	if err := json.Unmarshal(payload, &p); err != nil || len(p.Result) == 0 {
		return nil, fmt.Errorf("the completed task carries no result object")
	}
	var w struct {
		Content           []json.RawMessage          `json:"content"`
		StructuredContent json.RawMessage            `json:"structuredContent"`
		IsError           *bool                      `json:"isError"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(p.Result, &w); err != nil {
		return nil, fmt.Errorf("the task result is not a CallToolResult")
	}
	tm.Summary = safeText(p.Summary, maxSummaryText)
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	for _, item := range w.Content {
		var one mcp.CallToolResult
		wrapped := append(append([]byte(`{"content":[`), item...), ']', '}')
		if err := json.Unmarshal(wrapped, &one); err == nil && len(one.Content) == 1 {
			res.Content = append(res.Content, one.Content[0])
			continue
		}
		// A content type this SDK does not model still reaches the host,
		// as its JSON in a text item.
		res.Content = append(res.Content, &mcp.TextContent{Text: string(item)})
		tm.Converted++
	}
	if sc := w.StructuredContent; len(sc) > 0 && string(sc) != "null" {
		if objectOnly && !isObjectJSON(sc) {
			tm.DroppedStructured = true
			if len(res.Content) == 0 {
				res.Content = append(res.Content, &mcp.TextContent{Text: string(sc)})
			}
		} else {
			res.StructuredContent = sc
		}
	}
	if w.IsError != nil {
		res.IsError = *w.IsError
	}
	res.Meta = mcp.Meta{}
	for k, v := range w.Meta {
		res.Meta[k] = v
	}
	res.Meta[MetaTask] = tm
	return res, nil
}

// failedResult maps a failed task to a CallToolResult with isError set and
// the failure code and message as text.
func failedResult(payload json.RawMessage, tm taskMeta) *mcp.CallToolResult {
	var p agentproto.FailedPayload
	_ = json.Unmarshal(payload, &p)
	code := safeText(p.Error.Code, 128)
	if code == "" {
		code = "unknown"
	}
	msg := safeText(p.Error.Message, maxMessageText)
	text := "The XMPP task failed: " + code
	if msg != "" {
		text += ": " + msg
	}
	if p.Error.Retryable {
		text += " (retryable)"
	}
	tm.Code = code
	r := p.Error.Retryable
	tm.Retryable = &r
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		IsError: true,
		Meta:    mcp.Meta{MetaTask: tm},
	}
}

// cancelledError maps a task the agent settled "cancelled" (without this
// host asking) to a JSON-RPC error.
func cancelledError(payload json.RawMessage, tm taskMeta) *jsonrpc.Error {
	var p agentproto.CancelledPayload
	_ = json.Unmarshal(payload, &p)
	msg := "the XMPP task was cancelled"
	if r := safeText(p.Reason, maxMessageText); r != "" {
		msg += ": " + r
	}
	return rpcError(CodeTaskCancelled, msg, tm)
}

// rpcError builds a JSON-RPC error whose data is the task metadata.
func rpcError(code int64, msg string, tm taskMeta) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{MetaTask: tm})
	return &jsonrpc.Error{Code: code, Message: msg, Data: data}
}

// toolError is a tool-level error the model can act on (for example
// arguments that fail the input schema).
func toolError(msg string, tm *taskMeta) *mcp.CallToolResult {
	r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
	if tm != nil {
		r.Meta = mcp.Meta{MetaTask: *tm}
	}
	return r
}

// safeText is remote text for one line of a host's display or log, under
// the one display-text rule (internal/displaytext): control characters
// and bidi overrides cannot forge structure, at most max code points.
func safeText(s string, max int) string { return displaytext.Line(s, max) }

func truncateUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

func isObjectJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}
