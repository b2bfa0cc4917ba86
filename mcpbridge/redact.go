package mcpbridge

import (
	"unicode/utf8"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/displaytext"
)

// minEnvSecret is the shortest [agents.mcp] env value taken for a secret.
// Env values are not declared secret, so short ones ("1", "info",
// "/usr/bin") are left alone; header values always are secrets.
const minEnvSecret = 8

// safeText makes server-supplied text fit for a log line or a protocol
// string field under the one display-text rule (internal/displaytext):
// secrets redacted, then control characters, bidi overrides and invalid
// UTF-8 replaced, at most max code points.
func safeText(r *backendkit.Redactor, s string, max int) string {
	return displaytext.Clean(s, max, r.Scrub)
}

// bound truncates s to at most max code points.
func bound(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}
