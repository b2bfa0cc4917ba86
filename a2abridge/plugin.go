package a2abridge

import (
	"context"
	"net/url"

	"github.com/agentgw/agentgw/a2abridge/cardsig"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
)

// Bridge is the A2A bridge's line of the root's bridge table: an
// [agents.a2a] table.
var Bridge = backendkit.Bridge{
	Section: "a2a",
	Config:  func() backendkit.Section { return &Config{} },
	Build:   build,
}

// Config is the [agents.a2a] table: the URL of the agent's Agent Card. No
// credentials are sent to it (docs/a2a.md). CardKeyFile pins the key the
// card must be signed with: a JWKS or a PEM public key (ES256); a card
// whose signature does not verify is refused.
type Config struct {
	URL         string `toml:"url"`
	CardKeyFile string `toml:"card_key_file"`
}

// Validate implements backendkit.Section.
func (c *Config) Validate(_ *config.Config, _ *config.Agent) []string {
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return []string{"[agents.a2a] url must be an http or https URL of an Agent Card, without credentials"}
	}
	if c.CardKeyFile != "" {
		if _, err := cardsig.LoadVerifier(c.CardKeyFile); err != nil {
			return []string{"[agents.a2a] card_key_file: " + err.Error()}
		}
	}
	return nil
}

func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	c := a.Section.(*Config)
	var v *cardsig.Verifier
	if c.CardKeyFile != "" {
		var err error
		if v, err = cardsig.LoadVerifier(c.CardKeyFile); err != nil {
			return err
		}
	}
	b, err := New(Options{
		Endpoint: a.Endpoint, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
		CardURL: c.URL, CardVerifier: v, Publisher: h.Publisher(), Availability: h.Availability(), Logger: a.Log,
	})
	if err != nil {
		return err
	}
	return h.Add(a.Endpoint, b, b.Start)
}
