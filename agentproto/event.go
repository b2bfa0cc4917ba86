package agentproto

import "encoding/json"

// EventType is the type attribute of a lifecycle <event/>; it selects the
// payload's definition in the spec's lifecycle JSON Schema.
type EventType string

// Lifecycle event types. The three terminal ones equal the terminal states.
const (
	EventStatus        EventType = "status"
	EventProgress      EventType = "progress"
	EventInputRequired EventType = EventType(StateInputRequired)
	EventCompleted     EventType = EventType(StateCompleted)
	EventFailed        EventType = EventType(StateFailed)
	EventCancelled     EventType = EventType(StateCancelled)
)

// EventTypes lists every event type.
var EventTypes = []EventType{EventStatus, EventProgress, EventInputRequired, EventCompleted, EventFailed, EventCancelled}

// Known reports whether t is one of the protocol's event types.
func (t EventType) Known() bool {
	switch t {
	case EventStatus, EventProgress, EventInputRequired, EventCompleted, EventFailed, EventCancelled:
		return true
	}
	return false
}

// Terminal reports whether an event of type t settles its task.
func (t EventType) Terminal() bool {
	return t == EventCompleted || t == EventFailed || t == EventCancelled
}

// The payload structs below decode the JSON text of an <event/> (and of a
// task-result, which carries the terminal event's payload). Members the
// spec makes optional are omitted when empty.

// StatusPayload is the payload of a status event.
type StatusPayload struct {
	State     State  `json:"state"`
	UpdatedAt string `json:"updatedAt"`
}

// ProgressPayload is the payload of a progress event. Percent is nil when
// the total is unknown.
type ProgressPayload struct {
	Percent *float64 `json:"percent,omitempty"`
	Stage   string   `json:"stage,omitempty"`
	Message string   `json:"message,omitempty"`
}

// InputRequiredPayload is the payload of an input_required event, and the
// pending-input of a task-state.
type InputRequiredPayload struct {
	RequestID   string          `json:"requestId"`
	Question    string          `json:"question"`
	InputSchema json.RawMessage `json:"inputSchema"`
	CreatedAt   string          `json:"createdAt"`
	ExpiresAt   string          `json:"expiresAt,omitempty"`
	// Revision is not part of the JSON: it is the task revision of the
	// event (or task-state) that carried the request, which an answer
	// sends as expected-revision.
	Revision int64 `json:"-"`
}

// CompletedPayload is the payload of a completed event: the whole MCP
// CallToolResult, kept raw, and an optional summary.
type CompletedPayload struct {
	Result  json.RawMessage `json:"result"`
	Summary string          `json:"summary,omitempty"`
}

// FailedPayload is the payload of a failed event.
type FailedPayload struct {
	Error TaskError `json:"error"`
}

// TaskError is the error object of a failed event. Code is one of the
// codes in codes.go or another namespace-qualified code.
type TaskError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// CancelledPayload is the payload of a cancelled event.
type CancelledPayload struct {
	Reason string `json:"reason,omitempty"`
}
