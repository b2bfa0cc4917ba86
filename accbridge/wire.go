package accbridge

import (
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/agentgw/agentgw/internal/ijson"
)

// Message types of Connector API v1 (seed 002), plus the two the gateway
// fixes where the seed is silent (error, approval_denied; DESIGN.md).
const (
	TypeRegister         = "register"
	TypeRegisterAck      = "register_ack"
	TypeHeartbeat        = "heartbeat"
	TypeHeartbeatAck     = "heartbeat_ack"
	TypeCapabilities     = "capabilities"
	TypeCreateRun        = "create_run"
	TypeRunAccepted      = "run_accepted"
	TypeRunEvent         = "run_event"
	TypeCancelRun        = "cancel_run"
	TypeRunCancelled     = "run_cancelled"
	TypeHandoff          = "handoff"
	TypeUploadArtifact   = "upload_artifact"
	TypeDownloadArtifact = "download_artifact"
	TypeApprovalRequest  = "approval_request"
	TypeApprovalGranted  = "approval_granted"
	TypeApprovalDenied   = "approval_denied"
	TypeError            = "error"
)

// Run event kinds (seed: "Типы событий").
const (
	EventThinking   = "thinking"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventProgress   = "progress"
	EventWarning    = "warning"
	EventError      = "error"
	EventCompletion = "completion"
)

// The seed's error codes.
const (
	ErrInvalidRequest = 4001
	ErrUnknownType    = 4002
	ErrAgentNotFound  = 4003
	ErrRunNotFound    = 4004
	ErrAgentBusy      = 4005
	ErrQuotaExceeded  = 4006
	ErrUnauthorized   = 4007
	ErrApprovalDenied = 4008
	ErrConnector      = 5001
	ErrAdapter        = 5002
)

// Field bounds (the seed has none; docs/acc-bridge.md).
const (
	maxIDLen      = 128
	maxShortText  = 256
	maxAgentTools = 256
)

// frame is every field any inbound message may carry; unknown members
// are ignored, as the seed's "{ ... }" examples imply.
type frame struct {
	Type        string          `json:"type"`
	ConnectorID string          `json:"connector_id,omitempty"`
	Version     string          `json:"version,omitempty"`
	Host        string          `json:"host,omitempty"`
	Adapters    []string        `json:"adapters,omitempty"`
	Timestamp   string          `json:"timestamp,omitempty"`
	Metrics     json.RawMessage `json:"metrics,omitempty"`
	Agents      []agentDecl     `json:"agents,omitempty"`
	RunID       string          `json:"run_id,omitempty"`
	Status      string          `json:"status,omitempty"`
	Event       string          `json:"event,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Action      string          `json:"action,omitempty"`
	RiskLevel   string          `json:"risk_level,omitempty"`
	ApprovalID  string          `json:"approval_id,omitempty"`
	Code        int             `json:"code,omitempty"`
	Message     string          `json:"message,omitempty"`
	FromRunID   string          `json:"from_run_id,omitempty"`
	ToAgentID   string          `json:"to_agent_id,omitempty"`
	Bundle      json.RawMessage `json:"bundle,omitempty"`
	Name        string          `json:"name,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	SizeBytes   int64           `json:"size_bytes,omitempty"`
	ArtifactID  string          `json:"artifact_id,omitempty"`
}

// agentDecl is one agent of a capabilities message.
type agentDecl struct {
	AgentID  string   `json:"agent_id"`
	Runtime  string   `json:"runtime"`
	Model    string   `json:"model"`
	Tools    []string `json:"tools"`
	MaxTurns int      `json:"max_turns"`
	Supports []string `json:"supports"`
}

func (d agentDecl) supports(f string) bool {
	for _, s := range d.Supports {
		if s == f {
			return true
		}
	}
	return false
}

// errFrame is the gateway's error shape (DESIGN.md).
type errFrame struct {
	Type    string `json:"type"`
	Code    int    `json:"code"`
	Message string `json:"message"`
	RunID   string `json:"run_id,omitempty"`
}

// decodeFrame parses one inbound text frame within I-JSON limits. The
// error is a fixed sentence: attacker bytes are never echoed.
func decodeFrame(data []byte, maxBytes int) (*frame, error) {
	if _, err := ijson.Parse(data, ijson.Limits{MaxBytes: maxBytes, MaxDepth: 32, MaxMembers: 20000, MaxStringBytes: 64 << 10}); err != nil {
		if ijson.IsLimit(err) {
			return nil, errors.New("the frame exceeds the gateway's JSON limits")
		}
		return nil, errors.New("the frame is not valid JSON")
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, errors.New("the frame is not a message object of the expected shape")
	}
	if f.Type == "" {
		return nil, errors.New("the frame has no type")
	}
	for _, s := range []string{f.ConnectorID, f.RunID, f.ApprovalID, f.ToAgentID, f.FromRunID, f.ArtifactID} {
		if len(s) > maxIDLen || !utf8.ValidString(s) {
			return nil, errors.New("an identifier is too long")
		}
	}
	return &f, nil
}

// validAgents checks a capabilities list.
func validAgents(as []agentDecl, max int) error {
	if len(as) > max {
		return errors.New("too many agents declared")
	}
	seen := make(map[string]bool, len(as))
	for _, a := range as {
		if a.AgentID == "" || len(a.AgentID) > maxIDLen {
			return errors.New("an agent has no agent_id or one that is too long")
		}
		if seen[a.AgentID] {
			return errors.New("an agent_id is declared twice")
		}
		seen[a.AgentID] = true
		if len(a.Tools) > maxAgentTools || len(a.Supports) > 32 {
			return errors.New("an agent declares too many tools")
		}
		for _, t := range a.Tools {
			if t == "" || len(t) > 128 {
				return errors.New("a tool name is empty or too long")
			}
		}
		if len(a.Runtime) > maxShortText || len(a.Model) > maxShortText {
			return errors.New("an agent's runtime or model is too long")
		}
	}
	return nil
}

// clip returns at most n runes of s.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
