package connectorbridge

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/ijson"
)

// Secrets are redacted by backendkit.Redactor: the system API key, the
// values of sensitive form fields in an auth command, and the gateway's
// other secrets.

// marshalNoEscape keeps "<" and "&" in results as the connector sent them.
var marshalNoEscape = ijson.MarshalNoEscape

// displayText makes connector-supplied prose safe for a terminal: secrets
// scrubbed, control characters dropped, at most max runes.
func displayText(r *backendkit.Redactor, s string, max int) string {
	s = r.Scrub(s)
	var b strings.Builder
	n := 0
	for _, c := range s {
		if n >= max {
			b.WriteString("…")
			break
		}
		if c == utf8.RuneError || (unicode.IsControl(c) && c != '\n') || c == '\u202e' || c == '\u202d' {
			continue
		}
		b.WriteRune(c)
		n++
	}
	return b.String()
}
