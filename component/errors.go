package component

import (
	"errors"

	"github.com/agentgw/agentgw/internal/xmltree"
)

// NSStanzas is the namespace of stanza error conditions (RFC 6120).
const NSStanzas = "urn:ietf:params:xml:ns:xmpp-stanzas"

// Stanza error types.
const (
	ErrTypeCancel   = "cancel"
	ErrTypeModify   = "modify"
	ErrTypeWait     = "wait"
	ErrTypeAuth     = "auth"
	ErrTypeContinue = "continue"
)

// Stanza error conditions used by agentgw, with the spec's names.
const (
	CondBadRequest          = "bad-request"
	CondConflict            = "conflict"
	CondFeatureNotImpl      = "feature-not-implemented"
	CondForbidden           = "forbidden"
	CondInternalServerError = "internal-server-error"
	CondItemNotFound        = "item-not-found"
	CondNotAcceptable       = "not-acceptable"
	CondNotAllowed          = "not-allowed"
	CondPolicyViolation     = "policy-violation"
	CondResourceConstraint  = "resource-constraint"
	CondServiceUnavailable  = "service-unavailable"
	CondUnexpectedRequest   = "unexpected-request"
)

// StanzaError is a protocol error returned to the requester. Text must be a
// fixed, safe sentence written by us: never attacker input.
type StanzaError struct {
	Type      string
	Condition string
	Text      string
}

func (e *StanzaError) Error() string {
	if e.Text != "" {
		return e.Condition + ": " + e.Text
	}
	return e.Condition
}

// Is makes errors.Is match on the condition alone.
func (e *StanzaError) Is(target error) bool {
	var t *StanzaError
	if errors.As(target, &t) {
		return t.Condition == e.Condition
	}
	return false
}

// Element renders the <error/> child of an error stanza.
func (e *StanzaError) Element() *xmltree.Element {
	el := xmltree.New(NSComponent, "error", "type", e.Type)
	el.Add(xmltree.New(NSStanzas, e.Condition))
	if e.Text != "" {
		el.Add(xmltree.New(NSStanzas, "text").WithText(e.Text))
	}
	return el
}

// Constructors for the conditions the spec's error table uses.
func ErrBadRequest(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeModify, Condition: CondBadRequest, Text: text}
}
func ErrConflict(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeCancel, Condition: CondConflict, Text: text}
}

// ErrPolicyViolation is RFC 6120's policy-violation: the request broke a
// local service policy (a delegation depth beyond the gateway's bound).
// Retrying the same request cannot succeed.
func ErrPolicyViolation(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeModify, Condition: CondPolicyViolation, Text: text}
}
func ErrForbidden(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeAuth, Condition: CondForbidden, Text: text}
}
func ErrNotAcceptable(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeModify, Condition: CondNotAcceptable, Text: text}
}
func ErrResourceConstraint(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeWait, Condition: CondResourceConstraint, Text: text}
}
func ErrServiceUnavailable() *StanzaError {
	return &StanzaError{Type: ErrTypeCancel, Condition: CondServiceUnavailable}
}
func ErrUnexpectedRequest(text string) *StanzaError {
	return &StanzaError{Type: ErrTypeWait, Condition: CondUnexpectedRequest, Text: text}
}
func ErrInternal() *StanzaError {
	return &StanzaError{Type: ErrTypeWait, Condition: CondInternalServerError}
}

// ErrItemNotFound is the one safe reply for anything nonexistent, hidden or
// unauthorized. It never carries text, so every such reply is
// byte-identical whatever the reason was.
func ErrItemNotFound() *StanzaError {
	return &StanzaError{Type: ErrTypeCancel, Condition: CondItemNotFound}
}

// Errors of outbound IQs.
var (
	ErrIQTimeout    = errors.New("component: IQ timed out")
	ErrStreamLost   = errors.New("component: stream lost before the IQ was answered")
	ErrNotConnected = errors.New("component: not connected")
	ErrQueueFull    = errors.New("component: send queue full")
)
