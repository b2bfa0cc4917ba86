package mcpfront

import (
	"errors"
	"strings"

	"mellium.im/xmpp/jid"
)

// An MCP task id names the XMPP task behind it, and nothing else: the
// endpoint's bare JID, the XMPP task-id and the XMPP tool name, each
// base64url, after the prefix "xmpp1.". The XMPP task stays the source of
// truth; the front keeps no table, so a restarted front (or a second one
// for the same account) resolves the same id. Access is XMPP's: the front
// asks the endpoint as the one account it logs in as, and a gateway
// answers only the owner of a task, so an id of another account's task is
// answered exactly like one that never existed.
const taskIDPrefix = "xmpp1."

// Bounds of an MCP task id the front will decode.
const (
	maxTaskIDLen   = 1024
	maxXMPPTaskID  = 128
	minXMPPTaskID  = 1
	maxToolNameLen = 256
)

// errNoTask is the one answer for every id that does not resolve: not
// ours, malformed, unknown, expired, or another account's. The message
// never repeats the id.
var errNoTask = errors.New("task not found (unknown, expired, or not visible to this account)")

// taskRef is a decoded MCP task id.
type taskRef struct {
	ep     jid.JID
	taskID string
	tool   string
}

func encodeTaskID(ep jid.JID, taskID, tool string) string {
	return taskIDPrefix + b64.EncodeToString([]byte(ep.Bare().String())) + "." +
		b64.EncodeToString([]byte(taskID)) + "." + b64.EncodeToString([]byte(tool))
}

func decodeTaskID(s string) (taskRef, error) {
	if len(s) > maxTaskIDLen || !strings.HasPrefix(s, taskIDPrefix) {
		return taskRef{}, errNoTask
	}
	parts := strings.Split(s[len(taskIDPrefix):], ".")
	if len(parts) != 3 {
		return taskRef{}, errNoTask
	}
	var dec [3]string
	for i, p := range parts {
		b, err := b64.DecodeString(p)
		if err != nil {
			return taskRef{}, errNoTask
		}
		dec[i] = string(b)
	}
	ep, err := jid.Parse(dec[0])
	if err != nil || ep.Localpart() == "" || ep.Resourcepart() != "" {
		return taskRef{}, errNoTask
	}
	if !xmppTaskIDOK(dec[1]) || dec[2] == "" || len(dec[2]) > maxToolNameLen {
		return taskRef{}, errNoTask
	}
	return taskRef{ep: ep, taskID: dec[1], tool: dec[2]}, nil
}

// xmppTaskIDOK checks the spec's identifier alphabet [A-Za-z0-9._~-].
func xmppTaskIDOK(s string) bool {
	if len(s) < minXMPPTaskID || len(s) > maxXMPPTaskID {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '~', c == '-':
		default:
			return false
		}
	}
	return true
}

// reachable reports whether the front may ask ep about a task: ep is an
// endpoint it currently lists, or on the same domain as one (an agent of a
// gateway the account uses, whose tool may since have gone). A forged id
// cannot make the front send IQs to arbitrary addresses.
func (f *Front) reachable(ep jid.JID) bool {
	if _, ok := f.cat.Get(ep.Bare().String()); ok {
		return true
	}
	dom := ep.Domainpart()
	for bare := range f.cat.Snapshot() {
		if j, err := jid.Parse(bare); err == nil && j.Domainpart() == dom {
			return true
		}
	}
	return false
}
