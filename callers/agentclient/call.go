package agentclient

import (
	"context"
	"encoding/json"
	"fmt"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/internal/schema"
)

// ArgumentError means the arguments fail the tool's input schema, checked
// locally before anything is sent.
type ArgumentError struct{ Err error }

func (e *ArgumentError) Error() string {
	return "arguments do not match the tool's input schema: " + e.Err.Error()
}
func (e *ArgumentError) Unwrap() error { return e.Err }

// Pinned is everything a caller needs to invoke a tool with exact pins.
type Pinned struct {
	Endpoint jid.JID
	Manifest *Manifest
	Tool     *ManifestTool
	Input    *Schema
}

// Pin discovers the endpoint, pins its active manifest, and fetches the
// tool's input schema.
func (c *Client) Pin(ctx context.Context, ep jid.JID, tool string) (*Pinned, error) {
	info, err := c.Endpoint(ctx, ep)
	if err != nil {
		return nil, fmt.Errorf("endpoint information: %w", err)
	}
	if !info.Features[ns.Task] {
		return nil, fmt.Errorf("%s does not advertise %s: it cannot run tasks", ep, ns.Task)
	}
	m, err := c.GetManifest(ctx, ep, "")
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	t, ok := m.Tool(tool)
	if !ok {
		return nil, fmt.Errorf("%s version %s has no tool %q", ep, m.Version, tool)
	}
	in, err := c.GetSchema(ctx, ep, tool, m.Version, "input", m.Hash)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return &Pinned{Endpoint: ep, Manifest: m, Tool: t, Input: in}, nil
}

// ValidateArguments checks args against the pinned input schema. The
// target validates again; this only saves a round trip and gives a
// clearer message.
func (p *Pinned) ValidateArguments(args json.RawMessage) (json.RawMessage, error) {
	canon, v, err := ijson.Canonicalize(args, ijson.Limits{})
	if err != nil {
		return nil, &ArgumentError{Err: err}
	}
	s, err := schema.Compile(p.Input.JSON)
	if err != nil {
		return nil, fmt.Errorf("the tool's input schema cannot be used: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return nil, &ArgumentError{Err: err}
	}
	return canon, nil
}

// Call performs the whole client flow: discover, pin, fetch and check the
// schema, invoke (retrying with the same request-id), follow events with
// recovery, answer input, and return the terminal outcome.
func (c *Client) Call(ctx context.Context, ep jid.JID, tool string, args json.RawMessage, opts CallOptions) (*Outcome, error) {
	p, err := c.Pin(ctx, ep, tool)
	if err != nil {
		return nil, err
	}
	canon, err := p.ValidateArguments(args)
	if err != nil {
		return nil, err
	}
	acc, err := c.Invoke(ctx, ep, &InvokeRequest{
		RequestID: opts.RequestID, Tool: tool, Version: p.Manifest.Version,
		ManifestHash: p.Manifest.Hash, Arguments: canon, Deadline: opts.Deadline,
	})
	if err != nil {
		return nil, err
	}
	if opts.OnAccepted != nil {
		opts.OnAccepted(acc)
	}
	return c.Follow(ctx, ep, acc, opts)
}
