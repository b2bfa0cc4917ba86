package connectorbridge

import (
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/displaytext"
	"github.com/agentgw/agentgw/internal/ijson"
)

// Secrets are redacted by backendkit.Redactor: the system API key, the
// values of sensitive form fields in an auth command, and the gateway's
// other secrets.

// marshalNoEscape keeps "<" and "&" in results as the connector sent them.
var marshalNoEscape = ijson.MarshalNoEscape

// displayText makes connector-supplied prose safe for a terminal under the
// one display-text rule (internal/displaytext): secrets scrubbed, then
// control characters and bidi overrides replaced, at most max runes.
func displayText(r *backendkit.Redactor, s string, max int) string {
	return displaytext.Clean(s, max, r.Scrub)
}
