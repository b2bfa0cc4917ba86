// Package a2amap is the one mapping between this protocol's task model and
// A2A 0.3.0 (github.com/a2aproject/a2a-go): task states, lifecycle events,
// MCP CallToolResults against message parts and artifacts, and the losses
// either side cannot represent. Both directions of the A2A bridge use it;
// docs/a2a.md is its table in prose.
package a2amap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentgw/agentgw/agentproto"
)

// ProtocolVersion is the A2A protocol version both the Go SDK here
// (a2a-go v0.3.3) and the official JS SDK (@a2a-js/sdk 1.3.0, through its
// v0.3 compatibility transports) speak.
const ProtocolVersion = "0.3.0"

// ExtensionURI names agentgw's Agent Card extension: the XMPP identity of
// the agent and each skill's JSON Schemas, which A2A 0.3 skills cannot
// carry themselves.
const ExtensionURI = "urn:agentgw:a2a:xmpp:0"

// Metadata keys agentgw puts on A2A objects.
const (
	MetaSkill    = "agentgw/skill"    // message metadata: the skill (tool) to run
	MetaTask     = "agentgw/task"     // task metadata: {endpoint, taskId, revision}
	MetaProgress = "agentgw/progress" // status message metadata: the progress payload
	MetaInput    = "agentgw/input"    // status message metadata: {requestId, inputSchema}
	MetaFailure  = "agentgw/error"    // status message metadata: the failure object
	MetaIsError  = "agentgw/isError"  // artifact metadata: the MCP result had isError=true
)

// State maps a task state to its A2A state. cancelling has no A2A state:
// it stays working (with a status message saying so).
func State(s agentproto.State) a2a.TaskState {
	switch s {
	case agentproto.StateAccepted:
		return a2a.TaskStateSubmitted
	case agentproto.StateRunning, agentproto.StateCancelling:
		return a2a.TaskStateWorking
	case agentproto.StateInputRequired:
		return a2a.TaskStateInputRequired
	case agentproto.StateCompleted:
		return a2a.TaskStateCompleted
	case agentproto.StateFailed:
		return a2a.TaskStateFailed
	case agentproto.StateCancelled:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateUnknown
}

// FromA2A maps an A2A state to the task state a bridged task takes.
// rejected and auth-required have no task state: both become failed, with
// the codes FailureCode gives; unknown states report ok=false.
func FromA2A(s a2a.TaskState) (st agentproto.State, ok bool) {
	switch s {
	case a2a.TaskStateSubmitted:
		return agentproto.StateAccepted, true
	case a2a.TaskStateWorking:
		return agentproto.StateRunning, true
	case a2a.TaskStateInputRequired:
		return agentproto.StateInputRequired, true
	case a2a.TaskStateCompleted:
		return agentproto.StateCompleted, true
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateAuthRequired:
		return agentproto.StateFailed, true
	case a2a.TaskStateCanceled:
		return agentproto.StateCancelled, true
	}
	return "", false
}

// Failure codes for remote A2A outcomes that have no task state of their own.
const (
	CodeFailed       = "agentgw:a2a-failed"
	CodeRejected     = "agentgw:a2a-rejected"
	CodeAuthRequired = "agentgw:a2a-auth-required"
	CodeProtocol     = "agentgw:a2a-protocol"
)

// FailureCode is the failure code for a remote terminal A2A state.
func FailureCode(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateRejected:
		return CodeRejected
	case a2a.TaskStateAuthRequired:
		return CodeAuthRequired
	}
	return CodeFailed
}

// callToolResult is the part of an MCP CallToolResult the mapping reads.
type callToolResult struct {
	Content           []map[string]any `json:"content"`
	StructuredContent map[string]any   `json:"structuredContent,omitempty"`
	IsError           bool             `json:"isError,omitempty"`
}

// ResultArtifact turns a completed task's CallToolResult into one A2A
// artifact: each text content block a text part, structuredContent one data
// part, and every other block (images, resources, links) a data part
// holding the block as it is, so nothing is dropped.
func ResultArtifact(result json.RawMessage, id a2a.ArtifactID) (*a2a.Artifact, error) {
	var r callToolResult
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, fmt.Errorf("a2amap: the result is not a CallToolResult: %w", err)
	}
	art := &a2a.Artifact{ID: id, Name: "result"}
	for _, c := range r.Content {
		if t, _ := c["type"].(string); t == "text" {
			s, _ := c["text"].(string)
			art.Parts = append(art.Parts, a2a.TextPart{Text: s})
			continue
		}
		art.Parts = append(art.Parts, a2a.DataPart{Data: c, Metadata: map[string]any{"agentgw/content": true}})
	}
	if r.StructuredContent != nil {
		art.Parts = append(art.Parts, a2a.DataPart{Data: r.StructuredContent, Metadata: map[string]any{"agentgw/structuredContent": true}})
	}
	if r.IsError {
		art.Metadata = map[string]any{MetaIsError: true}
	}
	if len(art.Parts) == 0 {
		art.Parts = append(art.Parts, a2a.TextPart{Text: ""})
	}
	return art, nil
}

// MaxTextBytes bounds the text the mapping builds from remote content.
const MaxTextBytes = 1 << 20

// ErrTooLarge: a text part of a remote result is over MaxTextBytes. It is
// never cut: the task fails agentgw:result-too-large.
var ErrTooLarge = errors.New("a2amap: a text part is larger than 1 MiB")

// PartsResult turns the parts of remote A2A artifacts (or of a final agent
// message) into a CallToolResult: text parts become text content, the
// first data part becomes structuredContent (later ones text content
// holding their JSON), file parts resource links. Unknown part kinds are
// an error, never silently dropped; a text over MaxTextBytes is
// ErrTooLarge, never cut.
func PartsResult(parts []a2a.Part, isError bool) (json.RawMessage, error) {
	content := []map[string]any{}
	var structured map[string]any
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			if len(v.Text) > MaxTextBytes {
				return nil, ErrTooLarge
			}
			content = append(content, map[string]any{"type": "text", "text": v.Text})
		case a2a.DataPart:
			if structured == nil {
				structured = v.Data
			}
			b, _ := json.Marshal(v.Data)
			if len(b) > MaxTextBytes {
				return nil, ErrTooLarge
			}
			content = append(content, map[string]any{"type": "text", "text": string(b)})
		case a2a.FilePart:
			switch f := v.File.(type) {
			case a2a.FileURI:
				content = append(content, map[string]any{"type": "resource_link", "uri": f.URI, "name": nonEmpty(f.Name, "file"), "mimeType": f.MimeType})
			case a2a.FileBytes:
				content = append(content, map[string]any{"type": "resource", "resource": map[string]any{"uri": "a2a:file/" + nonEmpty(f.Name, "file"), "mimeType": f.MimeType, "blob": f.Bytes}})
			default:
				return nil, fmt.Errorf("a2amap: unknown file part content")
			}
		default:
			return nil, fmt.Errorf("a2amap: unknown part kind %T", p)
		}
	}
	out := map[string]any{"content": content}
	if structured != nil {
		out["structuredContent"] = structured
	}
	if isError {
		out["isError"] = true
	}
	return json.Marshal(out)
}

// Text joins the text parts of a message, bounded.
func Text(parts []a2a.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if t, ok := p.(a2a.TextPart); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return Bound(b.String(), MaxTextBytes)
}

// FirstData returns the first data part's object.
func FirstData(parts []a2a.Part) (map[string]any, bool) {
	for _, p := range parts {
		if d, ok := p.(a2a.DataPart); ok {
			return d.Data, true
		}
	}
	return nil, false
}

// Bound cuts s to at most max bytes at a rune boundary.
func Bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// MessageSchema is the input schema of a remote skill that publishes none:
// a text message, with optional structured data sent as a data part.
var MessageSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":65536,"description":"The message sent to the A2A agent as a text part."},"data":{"type":"object","description":"Optional structured data sent as a data part."}},"required":["text"],"additionalProperties":false}`)

// AnswerSchema is the input schema of an A2A input-required question: the
// free-text reply (A2A questions carry no schema).
var AnswerSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":65536,"description":"Your answer."}},"required":["text"],"additionalProperties":false}`)
