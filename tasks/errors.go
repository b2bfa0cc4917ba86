package tasks

import "errors"

// Errors of the caller-facing operations (Admit, ProvideInput, Cancel, State,
// Result). Each is a protocol condition; the XMPP layer maps them to stanza
// errors with errors.Is. Returned errors may wrap one of these with a fixed,
// attacker-free reason for logs; the wire reply carries the condition only.
//
// Tool-level authorization (approvalRequired, requiredPermissions) is part
// of "authorize the requested endpoint and exact tool", so a tool the caller
// may not run gets the same ErrNotFound as a tool that does not exist.
var (
	// ErrBadRequest: a syntactically invalid identifier, version or shape.
	ErrBadRequest = errors.New("tasks: bad request")
	// ErrNotFound: the single answer for nonexistent, unauthorized,
	// expired and other-caller objects.
	ErrNotFound = errors.New("tasks: item not found")
	// ErrConflict: stale version or hash, replay fingerprint mismatch,
	// stale/expired/answered/superseded input, cancel after settlement or
	// with a different tuple.
	ErrConflict = errors.New("tasks: conflict")
	// ErrNotAcceptable: arguments or input failing I-JSON or their schema,
	// a deadline already reached or beyond the tool's maximum, a wrong
	// media type.
	ErrNotAcceptable = errors.New("tasks: not acceptable")
	// ErrResourceConstraint: task capacity or a caller's or remote
	// domain's quota exhausted, or a JSON limit exceeded.
	ErrResourceConstraint = errors.New("tasks: resource constraint")
	// ErrDelegationDepth: the invocation's delegation depth exceeds the
	// gateway's bound (Config.MaxDelegationDepth).
	ErrDelegationDepth = errors.New("tasks: delegation depth exceeds the bound")
	// ErrUnexpectedRequest: a result request for a non-terminal task.
	ErrUnexpectedRequest = errors.New("tasks: unexpected request")
	// ErrServiceUnavailable: no backend for the endpoint, an optional
	// feature the backend lacks, or an engine not running.
	ErrServiceUnavailable = errors.New("tasks: service unavailable")
)

// Errors returned to executors through Run, besides ErrSettled and
// ErrInputExpired.
var (
	// ErrClosed: the engine is shutting down; the engine settles the task.
	ErrClosed = errors.New("tasks: engine closed")
	// ErrInvalidTransition: the call is not allowed in the task's state
	// (input while another request is pending or while cancelling).
	ErrInvalidTransition = errors.New("tasks: transition not allowed in this state")
	// ErrInputSuperseded: the pending input request was superseded by an
	// accepted cancellation.
	ErrInputSuperseded = errors.New("tasks: input request superseded by cancellation")
	// ErrInvalidRequest: an input request the executor built is invalid
	// (empty question, schema not a compilable object).
	ErrInvalidRequest = errors.New("tasks: invalid input request")
)

// reject wraps a condition with a fixed reason phrase.
type rejection struct {
	cond   error
	reason string
}

func (r *rejection) Error() string { return r.cond.Error() + ": " + r.reason }
func (r *rejection) Unwrap() error { return r.cond }

func reject(cond error, reason string) error { return &rejection{cond: cond, reason: reason} }
