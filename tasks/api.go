// Package tasks implements the durable task lifecycle of
// urn:xmpp:agent-task:0: admission with replay fingerprints, gap-free
// revisions and events, interactive input, cancellation, deadlines,
// retention and recovery. The engine owns every state transition; executors
// only report through a Run.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Call is what an executor is asked to run.
type Call struct {
	TaskID       string
	Caller       string // bare JID of the authenticated caller
	Endpoint     string // bare JID of the target endpoint
	Tool         string
	Version      string
	ManifestHash string
	Arguments    json.RawMessage // RFC 8785 canonical, validated against the input schema
	Deadline     time.Time       // zero when the invoke carried none
	// DelegationDepth is the task's depth below a direct call (0: invoked
	// directly). A backend that can carry it to the tool passes
	// DelegationDepth+1 on, so that calls the tool makes back through a
	// gateway are counted (mcpbridge: _meta ns.MetaDelegationDepth).
	DelegationDepth int
}

// ToolResult is an MCP CallToolResult, kept whole. Content is the JSON
// array; absent members stay nil.
type ToolResult struct {
	Content           json.RawMessage `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           *bool           `json:"isError,omitempty"`
	Meta              json.RawMessage `json:"_meta,omitempty"`
}

// Progress is one progress update. Percent is nil when the total is unknown.
type Progress struct {
	Percent *float64
	Stage   string
	Message string
}

// InputRequest asks the caller for structured input.
type InputRequest struct {
	Question  string
	Schema    json.RawMessage // a JSON Schema object
	ExpiresAt time.Time       // zero for no expiry
}

// Failure is an execution failure. Code is one of agentproto's failure
// codes: the spec's reserved codes where they fit; codes of our own are
// namespace qualified ("agentgw:...", "mcp:...", "xagent:...") and only
// where no reserved code does. Message is a safe sentence without secrets
// or attacker payloads.
type Failure struct {
	Code      string
	Message   string
	Retryable bool
}

// Run is an executor's handle on one task. Every method commits through the
// engine; none of them writes state directly. All are safe for concurrent use.
type Run interface {
	// Progress reports a progress update. Updates are rate-limited per
	// task (Config.ProgressPerSecond): one that arrives while the task's
	// budget is spent is merged into a pending value, committed (one
	// revision, one event) when a slot frees and in any case before
	// input_required or the settlement; Progress then returns nil at once.
	// Percent is clamped to [0, 100] and never below the last value; an
	// update with nothing to report, or equal to the last committed one,
	// commits nothing.
	Progress(p Progress) error
	// RequestInput commits input_required and blocks until the caller's
	// answer has been accepted, returning it (canonical JSON). It fails
	// with ErrInputExpired, ErrInputSuperseded (a cancellation was
	// accepted), ErrSettled, ErrInvalidTransition (another request pending,
	// or cancelling), ErrInvalidRequest, ErrClosed or ctx's error. A zero
	// ExpiresAt takes the engine's InputTimeout.
	RequestInput(ctx context.Context, req InputRequest) (json.RawMessage, error)
	// Complete settles the task as completed with the whole result. A
	// result that is not a valid CallToolResult, whose structuredContent
	// fails the tool's outputSchema (unless isError), or that exceeds the
	// size limit settles the task failed instead, and Complete says so.
	Complete(r ToolResult) error
	// Fail settles the task as failed. After settlement every method
	// returns ErrSettled and changes nothing.
	Fail(f Failure) error
	// Cancelled settles the task as cancelled, after the executor has
	// honoured a cancellation request.
	Cancelled(reason string) error
	// CancelRequested is closed once a cancellation has been accepted.
	// Cancellation is advisory: the executor decides how to settle.
	CancelRequested() <-chan struct{}
}

// Executor runs tasks for one backend. Execute returns when the task has
// been settled through run, or when ctx ends because the gateway is shutting
// down (the task is then settled as interrupted by the engine).
type Executor interface {
	Execute(ctx context.Context, call Call, run Run)
}

// Features are the endpoint-wide task features a backend supports. They
// decide which urn:xmpp:agent-task:0#... features are advertised.
type Features struct {
	Progress bool
	Cancel   bool
	Input    bool
}

// Backend is an executor together with what it supports.
type Backend interface {
	Executor
	Features() Features
}

// Errors returned to executors.
var (
	ErrSettled      = errors.New("tasks: task already settled")
	ErrInputExpired = errors.New("tasks: input request expired")
)
