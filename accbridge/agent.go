package accbridge

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

// AgentOptions map one [agents.acc] endpoint.
type AgentOptions struct {
	Endpoint    string // bare JID
	Connector   string // enrolled connector name
	AgentID     string
	Name        string
	Title       string
	Description string
	Version     string
}

// Agent is one endpoint backed by an agent a connector declares. It
// implements tasks.Backend, backendkit.Readiness and backendkit.Conversant.
type Agent struct {
	s         *Server
	o         AgentOptions
	connector string
	agentID   string
	pub       *backendkit.Manifests
	avail     *backendkit.Presence

	mu       sync.Mutex
	declared *agentDecl
	degraded bool
	chat     backendkit.Chat
	chats    map[string]bool // turn keys in flight (de-duplication)
}

var (
	_ tasks.Backend         = (*Agent)(nil)
	_ backendkit.Readiness  = (*Agent)(nil)
	_ backendkit.Conversant = (*Agent)(nil)
)

// AddAgent maps an endpoint onto the server.
func (s *Server) AddAgent(o AgentOptions) *Agent {
	a := &Agent{s: s, o: o, connector: o.Connector, agentID: o.AgentID,
		pub: backendkit.NewManifests(s.o.Publisher), avail: backendkit.NewPresence(o.Endpoint, s.o.Availability),
		chats: map[string]bool{}}
	s.mu.Lock()
	s.agents[agentKey(o.Connector, o.AgentID)] = a
	s.mu.Unlock()
	a.avail.Set(false)
	return a
}

// Features: progress from run events, cancellation through cancel_run,
// input for approvals.
func (a *Agent) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true, Input: true}
}

// Ready is true once the listener is up: connectors dial in, so there is
// nothing to wait for before the engine dispatches (a run waits up to the
// accept timeout for its connector).
func (a *Agent) Ready() bool {
	if a.s.leased {
		// In cluster mode the listener runs on the lease holder, maybe
		// another member: there is nothing to wait for here either.
		return true
	}
	select {
	case <-a.s.ready:
		return true
	default:
		return false
	}
}

// Manifest is the last published manifest.
func (a *Agent) Manifest() []byte { return append([]byte(nil), a.pub.Last()...) }

// Declared returns the agent's declared tools, nil while undeclared.
func (a *Agent) Declared() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.declared == nil {
		return nil
	}
	return append([]string(nil), a.declared.Tools...)
}

// setDeclared records the agent's declaration (nil: not declared, or the
// connector is gone) and republishes when it changed.
func (a *Agent) setDeclared(d *agentDecl, connected bool) {
	a.mu.Lock()
	a.declared = d
	a.mu.Unlock()
	if d == nil {
		a.avail.Set(false)
		return
	}
	m, version := a.manifest(d)
	ctx, cancel := context.WithTimeout(context.Background(), a.s.o.AcceptTimeout)
	defer cancel()
	published, v, _, err := a.pub.Publish(ctx, version, m)
	if err != nil {
		a.s.log.Warn("acc: publishing the agent manifest failed", "endpoint", a.o.Endpoint, "error", err)
		return
	}
	if published {
		a.s.log.Info("acc: published agent version", "endpoint", a.o.Endpoint, "version", v, "tools", len(d.Tools))
	}
	a.avail.Set(connected)
	a.reportStatus()
}

func (a *Agent) setDegraded(on bool) {
	a.mu.Lock()
	a.degraded = on
	a.mu.Unlock()
	a.reportStatus()
}

func (a *Agent) reportStatus() {
	sr, ok := a.s.o.Availability.(backendkit.StatusReporter)
	if !ok {
		return
	}
	a.mu.Lock()
	deg := a.degraded
	a.mu.Unlock()
	status := ""
	if deg {
		status = "degraded: the connector missed 3 heartbeats"
	}
	sr.SetStatus(a.o.Endpoint, status)
}

func (s *Server) setDegraded(connector string, on bool) {
	s.mu.Lock()
	as := s.agentsOf(connector)
	s.mu.Unlock()
	for _, a := range as {
		a.setDegraded(on)
	}
}

// toolName is the endpoint's one tool (DESIGN.md).
const toolName = "run"

// manifest builds the endpoint manifest for a declaration: one tool,
// run, whose constraints.tools may name only the declared tools.
func (a *Agent) manifest(d *agentDecl) ([]byte, string) {
	tools := append([]string(nil), d.Tools...)
	sort.Strings(tools)
	toolItems := map[string]any{"type": "string"}
	if len(tools) > 0 {
		toolItems["enum"] = tools
	}
	toolsProp := map[string]any{"type": "array", "items": toolItems, "uniqueItems": true, "maxItems": len(tools)}
	strList := func(maxItems, maxLen int) map[string]any {
		return map[string]any{"type": "array", "maxItems": maxItems, "items": map[string]any{"type": "string", "maxLength": maxLen}}
	}
	input := map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"goal"},
		"properties": map[string]any{
			"goal": map[string]any{"type": "string", "minLength": 1, "maxLength": 8000, "description": "What the agent should achieve."},
			"context_bundle": map[string]any{
				"type": "object", "additionalProperties": false,
				"properties": map[string]any{
					"objective":           map[string]any{"type": "string", "maxLength": 8000},
					"acceptance_criteria": strList(50, 2000),
					"memory_keys":         strList(100, 256),
					"artifacts":           strList(100, 256),
				},
			},
			"constraints": map[string]any{
				"type": "object", "additionalProperties": false,
				"properties": map[string]any{
					"max_tokens":      map[string]any{"type": "integer", "minimum": 1, "maximum": 100000000},
					"timeout_seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": 604800},
					"tools":           toolsProp,
				},
			},
		},
	}
	name := a.o.Name
	if name == "" {
		name = strings.SplitN(a.o.Endpoint, "@", 2)[0]
	}
	desc := a.o.Description
	if desc == "" {
		desc = "An agent-control-center agent"
		if d.Runtime != "" {
			desc += " (" + clip(d.Runtime, 64)
			if d.Model != "" {
				desc += ", " + clip(d.Model, 128)
			}
			desc += ")"
		}
		desc += "."
	}
	in, _ := json.Marshal(input)
	doc := backendkit.ManifestDoc{ManifestSpecVersion: "0", Tools: []backendkit.ManifestTool{{
		Name: toolName, Title: "Run", InputSchema: in,
		Description: "Start a run on the agent with a goal, an optional context bundle and constraints. Progress follows the run's events; dangerous actions ask for approval.",
		Ext:         &backendkit.ToolExt{SupportsProgress: true, SupportsCancellation: true},
		Meta: map[string]any{"org.agentgw/acc": map[string]any{
			"agentId": d.AgentID, "runtime": clip(d.Runtime, 64), "model": clip(d.Model, 128),
			"tools": tools, "maxTurns": d.MaxTurns, "supports": d.Supports,
		}},
	}}}
	doc.Agent.JID = a.o.Endpoint
	doc.Agent.Name = clip(name, backendkit.MaxAgentName)
	doc.Agent.Description = clip(desc, backendkit.MaxAgentDescription)
	if a.o.Title != "" {
		doc.Agent.Title = clip(a.o.Title, backendkit.MaxAgentTitle)
	}
	prefix := a.o.Version
	if prefix == "" {
		prefix = "1"
	}
	raw, _ := backendkit.Stamp(&doc, prefix)
	return raw, doc.Agent.Version
}
