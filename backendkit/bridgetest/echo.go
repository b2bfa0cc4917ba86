// Package bridgetest is a trivial bridge for tests: it shows that a bridge
// is one folder and one line of the root's table. Its [agents.echo] table
// has one key, greeting; its backend publishes a manifest with one tool,
// "echo", that returns the greeting and the text it is given; its doctor
// check reports the greeting.
package bridgetest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/tasks"
)

// Echo is the bridge's line for a table copy: append(gateway.Bridges[:len:len], bridgetest.Echo).
var Echo = backendkit.Bridge{
	Section: "echo",
	Config:  func() backendkit.Section { return &Config{} },
	Build:   build,
	Doctor: func(_ context.Context, d backendkit.Doctor, a backendkit.Agent) {
		d.OK("echo bridge says %q", a.Section.(*Config).Greeting)
	},
}

// Config is the [agents.echo] table.
type Config struct {
	Greeting string `toml:"greeting"`
}

// Validate implements backendkit.Section.
func (c *Config) Validate(*config.Config, *config.Agent) []string {
	if c.Greeting == "" {
		return []string{"[agents.echo] greeting is required"}
	}
	return nil
}

func build(_ context.Context, h backendkit.Host, a backendkit.Agent) error {
	b := &Backend{greeting: a.Section.(*Config).Greeting, endpoint: a.Endpoint,
		manifests: backendkit.NewManifests(h.Publisher()), av: h.Availability()}
	return h.Add(a.Endpoint, b, b.Start)
}

// Backend is the echo agent.
type Backend struct {
	greeting, endpoint string
	manifests          *backendkit.Manifests
	av                 backendkit.Availability
}

var (
	_ tasks.Backend        = (*Backend)(nil)
	_ backendkit.Readiness = (*Backend)(nil)
)

// Start publishes the manifest, reports the agent up and waits for ctx.
func (b *Backend) Start(ctx context.Context) error {
	m := fmt.Sprintf(`{"manifestSpecVersion":"0","agent":{"jid":%q,"name":"echo","version":"1.0.0"},
"tools":[{"name":"echo","description":"Says the greeting and the text.",
"inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}}]}`, b.endpoint)
	if _, _, _, err := b.manifests.Publish(ctx, "1.0.0", []byte(m)); err != nil {
		return err
	}
	b.av.SetAvailable(b.endpoint, true)
	<-ctx.Done()
	return nil
}

// Ready implements backendkit.Readiness.
func (b *Backend) Ready() bool { return b.manifests.Ready() }

// Features implements tasks.Backend.
func (b *Backend) Features() tasks.Features { return tasks.Features{} }

// Execute implements tasks.Backend.
func (b *Backend) Execute(_ context.Context, call tasks.Call, run tasks.Run) {
	var in struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(call.Arguments, &in)
	text, _ := json.Marshal(b.greeting + ", " + in.Text)
	run.Complete(tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(text) + `}]`)})
}
