// Package agentproto is the vocabulary of the XMPP Agent Gateway protocol
// (urn:xmpp:agent-task:0 and the directory it builds on) that the gateway
// and its callers share: task states, lifecycle event types and their JSON
// payloads, task failure codes, and RFC 6120 stanza errors with one builder
// and one parser. The XML namespaces are in agentproto/ns.
//
// It is the lowest tier of the module: it imports no other project package
// except xep/xmltree and agentproto/ns, so that every other package,
// on either end of the protocol, can spell the protocol's words from here.
package agentproto

// State is a task state of the protocol.
type State string

// Task states. accepted is set by admission; running, input_required and
// cancelling by the engine on behalf of the executor or the caller; the
// terminal states only by the engine when the executor settles (or a
// deadline or input expiry fires). Terminal states never change. The
// stored task rows use the same names (tasks/taskdb; the CHECK constraint
// of the SQL schema spells them too).
const (
	StateAccepted      State = "accepted"
	StateRunning       State = "running"
	StateInputRequired State = "input_required"
	StateCancelling    State = "cancelling"
	StateCompleted     State = "completed"
	StateFailed        State = "failed"
	StateCancelled     State = "cancelled"
)

// States lists every task state, in lifecycle order.
var States = []State{StateAccepted, StateRunning, StateInputRequired, StateCancelling, StateCompleted, StateFailed, StateCancelled}

// TerminalStates lists the terminal states.
var TerminalStates = []State{StateCompleted, StateFailed, StateCancelled}

// Terminal reports whether s is a terminal state.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Known reports whether s is one of the protocol's task states.
func (s State) Known() bool {
	switch s {
	case StateAccepted, StateRunning, StateInputRequired, StateCancelling, StateCompleted, StateFailed, StateCancelled:
		return true
	}
	return false
}
