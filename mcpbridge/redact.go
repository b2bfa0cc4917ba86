package mcpbridge

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentgw/agentgw/backendkit"
)

// minEnvSecret is the shortest [agents.mcp] env value taken for a secret.
// Env values are not declared secret, so short ones ("1", "info",
// "/usr/bin") are left alone; header values always are secrets.
const minEnvSecret = 8

// safeText makes server-supplied text fit for a log line or a protocol
// string field: secrets redacted, control characters replaced, invalid UTF-8
// dropped, and at most max code points.
func safeText(r *backendkit.Redactor, s string, max int) string {
	return bound(cleanControl(r.Scrub(s)), max)
}

// cleanControl replaces control characters (other than tab and newline) and
// drops invalid UTF-8, so a log line cannot be forged or broken.
func cleanControl(s string) string {
	if !strings.ContainsFunc(s, func(c rune) bool { return c == utf8.RuneError || (unicode.IsControl(c) && c != '\t' && c != '\n') }) {
		return s
	}
	var b strings.Builder
	for _, c := range strings.ToValidUTF8(s, "") {
		if unicode.IsControl(c) && c != '\t' && c != '\n' {
			b.WriteRune('\uFFFD')
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
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
