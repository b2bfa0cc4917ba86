package accbridge

import (
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/displaytext"
)

// scrub removes known secrets (the redactor: gateway secrets and every
// connector's bearer token) and private key blocks from connector text
// (the gateway cannot know a connector's own keys, so any such block is
// removed), then applies the one display-text rule (internal/displaytext):
// control characters and bidi overrides replaced. Length is bounded where
// the text is used.
func scrub(red *backendkit.Redactor, s string) string {
	return displaytext.Clean(s, 0, red.Scrub, displaytext.ScrubPEM)
}

// scrubJSON is scrub's redaction for a JSON document (its strings keep
// their exact form: they are data, not display text).
func scrubJSON(red *backendkit.Redactor, doc []byte) ([]byte, error) {
	clean, _, err := red.ScrubJSON(doc)
	if err != nil {
		return nil, err
	}
	return displaytext.ScrubPEMBytes(clean), nil
}
