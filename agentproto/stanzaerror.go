package agentproto

import (
	"errors"
	"fmt"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Type is the type attribute of a stanza <error/> (RFC 6120, 8.3.2): what
// the requester may do next.
type Type string

// Stanza error types.
const (
	TypeAuth     Type = "auth"     // retry after providing credentials
	TypeCancel   Type = "cancel"   // do not retry: the error cannot be remedied
	TypeContinue Type = "continue" // proceed: the condition was only a warning
	TypeModify   Type = "modify"   // retry after changing the data sent
	TypeWait     Type = "wait"     // retry after waiting: the error is temporary
)

// Known reports whether t is one of RFC 6120's error types.
func (t Type) Known() bool {
	switch t {
	case TypeAuth, TypeCancel, TypeContinue, TypeModify, TypeWait:
		return true
	}
	return false
}

// Condition is a defined stanza error condition (RFC 6120, 8.3.3), the
// local name of the condition element in ns.Stanzas.
type Condition string

// The defined conditions of RFC 6120, 8.3.3, with the type that section
// gives each (defaultType); the constructors below use these types.
const (
	CondBadRequest            Condition = "bad-request"
	CondConflict              Condition = "conflict"
	CondFeatureNotImplemented Condition = "feature-not-implemented"
	CondForbidden             Condition = "forbidden"
	CondGone                  Condition = "gone"
	CondInternalServerError   Condition = "internal-server-error"
	CondItemNotFound          Condition = "item-not-found"
	CondJIDMalformed          Condition = "jid-malformed"
	CondNotAcceptable         Condition = "not-acceptable"
	CondNotAllowed            Condition = "not-allowed"
	CondNotAuthorized         Condition = "not-authorized"
	CondPolicyViolation       Condition = "policy-violation"
	CondRecipientUnavailable  Condition = "recipient-unavailable"
	CondRedirect              Condition = "redirect"
	CondRegistrationRequired  Condition = "registration-required"
	CondRemoteServerNotFound  Condition = "remote-server-not-found"
	CondRemoteServerTimeout   Condition = "remote-server-timeout"
	CondResourceConstraint    Condition = "resource-constraint"
	CondServiceUnavailable    Condition = "service-unavailable"
	CondSubscriptionRequired  Condition = "subscription-required"
	CondUndefinedCondition    Condition = "undefined-condition"
	CondUnexpectedRequest     Condition = "unexpected-request"
)

// defaultType is the error type RFC 6120 (8.3.3.x) gives each condition.
// Where the RFC allows two (policy-violation: modify or wait;
// unexpected-request: wait or modify; feature-not-implemented: cancel or
// modify) the type of its example is taken.
var defaultType = map[Condition]Type{
	CondBadRequest:            TypeModify,
	CondConflict:              TypeCancel,
	CondFeatureNotImplemented: TypeCancel,
	CondForbidden:             TypeAuth,
	CondGone:                  TypeCancel,
	CondInternalServerError:   TypeCancel,
	CondItemNotFound:          TypeCancel,
	CondJIDMalformed:          TypeModify,
	CondNotAcceptable:         TypeModify,
	CondNotAllowed:            TypeCancel,
	CondNotAuthorized:         TypeAuth,
	CondPolicyViolation:       TypeModify,
	CondRecipientUnavailable:  TypeWait,
	CondRedirect:              TypeModify,
	CondRegistrationRequired:  TypeAuth,
	CondRemoteServerNotFound:  TypeCancel,
	CondRemoteServerTimeout:   TypeWait,
	CondResourceConstraint:    TypeWait,
	CondServiceUnavailable:    TypeCancel,
	CondSubscriptionRequired:  TypeAuth,
	CondUndefinedCondition:    TypeCancel,
	CondUnexpectedRequest:     TypeWait,
}

// Known reports whether c is one of RFC 6120's defined conditions.
func (c Condition) Known() bool {
	_, ok := defaultType[c]
	return ok
}

// DefaultType is the error type RFC 6120 gives c (cancel for a condition
// it does not define).
func (c Condition) DefaultType() Type {
	if t, ok := defaultType[c]; ok {
		return t
	}
	return TypeCancel
}

// StanzaError is a stanza <error/>: one the gateway answers with, or one a
// remote entity answered. Text on an error we send must be a fixed, safe
// sentence written by us: never attacker input.
type StanzaError struct {
	Type      Type
	Condition Condition
	Text      string
	// App is an optional application-specific condition (RFC 6120
	// 8.3.4), such as XEP-0050's <bad-sessionid/>; ParseError leaves it nil.
	App *xmltree.Element
}

// NewError is the one builder of stanza errors: condition c with the type
// RFC 6120 gives it and an optional text.
func NewError(c Condition, text string) *StanzaError {
	return &StanzaError{Type: c.DefaultType(), Condition: c, Text: text}
}

func (e *StanzaError) Error() string {
	if e.Text != "" {
		return fmt.Sprintf("%s (%s)", e.Condition, e.Text)
	}
	return string(e.Condition)
}

// Is makes errors.Is match on the condition alone.
func (e *StanzaError) Is(target error) bool {
	var t *StanzaError
	if errors.As(target, &t) {
		return t.Condition == e.Condition
	}
	return false
}

// Element renders the <error/> child of an error stanza in the stanza's
// namespace space (jabber:component:accept, jabber:client).
func (e *StanzaError) Element(space string) *xmltree.Element {
	el := xmltree.New(space, "error", "type", string(e.Type))
	el.Add(xmltree.New(ns.Stanzas, string(e.Condition)))
	if e.Text != "" {
		el.Add(xmltree.New(ns.Stanzas, "text").WithText(e.Text))
	}
	if e.App != nil {
		el.Add(e.App)
	}
	return el
}

// ParseError is the one parser of stanza errors. It reads the <error/>
// child of stanza into a *StanzaError: a condition RFC 6120 does not define
// (or none) reads as undefined-condition, and a missing or unknown type as
// the condition's default type. Text is the remote entity's text as sent:
// the gateway drops it before it travels further. ParseError returns nil
// when stanza is not of type error.
func ParseError(stanza *xmltree.Element) *StanzaError {
	if stanza == nil || stanza.AttrValue("type") != "error" {
		return nil
	}
	se := &StanzaError{Condition: CondUndefinedCondition}
	e := stanza.Child("", "error")
	if e != nil {
		found := false
		for _, ch := range e.Children {
			if ch.Name.Space != ns.Stanzas {
				continue
			}
			if ch.Name.Local == "text" {
				se.Text = ch.Text
			} else if c := Condition(ch.Name.Local); !found && c.Known() {
				se.Condition, found = c, true
			}
		}
		se.Type = Type(e.AttrValue("type"))
	}
	if !se.Type.Known() {
		se.Type = se.Condition.DefaultType()
	}
	return se
}

// Constructors for the conditions the spec's error tables use.

func ErrBadRequest(text string) *StanzaError { return NewError(CondBadRequest, text) }
func ErrConflict(text string) *StanzaError   { return NewError(CondConflict, text) }
func ErrForbidden(text string) *StanzaError  { return NewError(CondForbidden, text) }
func ErrNotAcceptable(text string) *StanzaError {
	return NewError(CondNotAcceptable, text)
}
func ErrNotAllowed(text string) *StanzaError { return NewError(CondNotAllowed, text) }

// ErrPolicyViolation is RFC 6120's policy-violation: the request broke a
// local service policy (a delegation depth beyond the gateway's bound).
// Retrying the same request cannot succeed.
func ErrPolicyViolation(text string) *StanzaError {
	return NewError(CondPolicyViolation, text)
}

// ErrResourceConstraint (type wait) is a temporary refusal: a rate limit or
// full capacity. Callers retry it with backoff.
func ErrResourceConstraint(text string) *StanzaError {
	return NewError(CondResourceConstraint, text)
}
func ErrUnexpectedRequest(text string) *StanzaError {
	return NewError(CondUnexpectedRequest, text)
}
func ErrServiceUnavailable() *StanzaError { return NewError(CondServiceUnavailable, "") }

// ErrInternal is internal-server-error, type cancel as RFC 6120 8.3.3.5
// gives it.
func ErrInternal() *StanzaError { return NewError(CondInternalServerError, "") }

// ErrItemNotFound is the one safe reply for anything nonexistent, hidden or
// unauthorized. It never carries text, so every such reply is
// byte-identical whatever the reason was.
func ErrItemNotFound() *StanzaError { return NewError(CondItemNotFound, "") }
