package agentproto

import (
	"testing"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// The types RFC 6120 (8.3.3) gives the conditions the gateway sends.
func TestConstructorTypes(t *testing.T) {
	for _, c := range []struct {
		se   *StanzaError
		want Type
	}{
		{ErrBadRequest(""), TypeModify},
		{ErrConflict(""), TypeCancel},
		{ErrForbidden(""), TypeAuth},
		{ErrNotAcceptable(""), TypeModify},
		{ErrNotAllowed(""), TypeCancel},
		{ErrPolicyViolation(""), TypeModify},
		{ErrResourceConstraint(""), TypeWait},
		{ErrUnexpectedRequest(""), TypeWait},
		{ErrServiceUnavailable(), TypeCancel},
		{ErrInternal(), TypeCancel},
		{ErrItemNotFound(), TypeCancel},
	} {
		if c.se.Type != c.want {
			t.Errorf("%s has type %s, want %s", c.se.Condition, c.se.Type, c.want)
		}
	}
}

func TestParseError(t *testing.T) {
	for _, c := range []struct {
		xml  string
		typ  Type
		cond Condition
		text string
	}{
		{`<iq type="error"><error type="auth"><forbidden xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/><text xmlns="urn:ietf:params:xml:ns:xmpp-stanzas">no</text></error></iq>`, TypeAuth, CondForbidden, "no"},
		{`<iq type="error"><error type="evil"><made-up xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></iq>`, TypeCancel, CondUndefinedCondition, ""},
		{`<iq type="error"><error><resource-constraint xmlns="urn:ietf:params:xml:ns:xmpp-stanzas"/></error></iq>`, TypeWait, CondResourceConstraint, ""},
		{`<iq type="error"/>`, TypeCancel, CondUndefinedCondition, ""},
	} {
		el, err := xmltree.Parse([]byte(c.xml), xmltree.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		se := ParseError(el)
		if se.Type != c.typ || se.Condition != c.cond || se.Text != c.text {
			t.Errorf("%s: got %+v", c.xml, se)
		}
	}
	if ParseError(xmltree.New("", "iq", "type", "result")) != nil {
		t.Error("a result parsed as an error")
	}
}

func TestVocabulary(t *testing.T) {
	for _, s := range States {
		if !s.Known() {
			t.Errorf("%s not known", s)
		}
	}
	for _, s := range TerminalStates {
		if !s.Terminal() || !EventType(s).Terminal() || !EventType(s).Known() {
			t.Errorf("%s: terminal state is not a terminal event type", s)
		}
	}
	if MCPCode(-32603) != "mcp:-32603" || XAgentCode("x") != "xagent:x" {
		t.Error("prefixed codes")
	}
}
