package a2abridge

import (
	"net/url"
	"strings"

	"github.com/agentgw/agentgw/backendkit"
)

var _ backendkit.Describer = (*Backend)(nil)

// BridgeDetails tells the console the A2A card: the card's name, its URL
// without query or fragment (where a token may sit), the protocol version,
// and whether its signature is required and was verified.
func (b *Backend) BridgeDetails() []backendkit.BridgeDetail {
	b.mu.Lock()
	card := b.card
	b.mu.Unlock()
	d := backendkit.BridgeDetail{Kind: "a2a card", State: "not fetched"}
	parts := []string{"card " + publicURL(b.o.CardURL)}
	if card != nil {
		d.Name, d.State = card.Name, "fetched"
		if card.ProtocolVersion != "" {
			parts = append(parts, "protocol "+card.ProtocolVersion)
		}
	}
	switch {
	case b.o.CardVerifier == nil:
		parts = append(parts, "signature not required")
	case card != nil:
		// A card is kept only after its signature verified.
		parts = append(parts, "signature verified")
	default:
		parts = append(parts, "signature required, no verified card yet")
	}
	d.Detail = strings.Join(parts, ", ")
	return []backendkit.BridgeDetail{d}
}

// publicURL is u without user info, query and fragment.
func publicURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unreadable URL)"
	}
	p.User, p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment = nil, "", false, "", ""
	return p.String()
}
