package a2abridge

import (
	"context"
	"net/url"

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
// credentials are sent to it (docs/a2a.md).
type Config struct {
	URL string `toml:"url"`
}

// Validate implements backendkit.Section.
func (c *Config) Validate(_ *config.Config, _ *config.Agent) []string {
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return []string{"[agents.a2a] url must be an http or https URL of an Agent Card, without credentials"}
	}
	return nil
}

func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	b, err := New(Options{
		Endpoint: a.Endpoint, Name: a.Name, Title: a.Title, Description: a.Description, Version: a.Version,
		CardURL: a.Section.(*Config).URL, Publisher: h.Publisher(), Availability: h.Availability(), Logger: a.Log,
	})
	if err != nil {
		return err
	}
	return h.Add(a.Endpoint, b, b.Start)
}
