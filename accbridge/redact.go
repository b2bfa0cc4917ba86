package accbridge

import (
	"regexp"

	"github.com/agentgw/agentgw/backendkit"
)

// pemKey matches a PEM private key block, raw or inside a JSON string
// (where its newlines are \n escapes, so no quote is crossed). The
// gateway cannot know a connector's own keys, so any such block in
// connector text is removed.
var pemKey = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[^"]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)

const redactedKey = "[redacted private key]"

// scrub removes known secrets (the redactor: gateway secrets and every
// connector's bearer token) and private key blocks from connector text.
func scrub(red *backendkit.Redactor, s string) string {
	return pemKey.ReplaceAllString(red.Scrub(s), redactedKey)
}

// scrubJSON is scrub for a JSON document.
func scrubJSON(red *backendkit.Redactor, doc []byte) ([]byte, error) {
	clean, _, err := red.ScrubJSON(doc)
	if err != nil {
		return nil, err
	}
	return pemKey.ReplaceAll(clean, []byte(redactedKey)), nil
}
