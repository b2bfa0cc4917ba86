package config

import (
	"errors"
	"fmt"
)

// Host is the file `agentgw host --config` reads: the backend of the one
// endpoint the host runs, written like an [[agents]] entry (name, title,
// description, version, visible_to, invocable_by, max_running and an [mcp]
// table), plus an optional [tasks] table. jid may be left out; when given it
// must equal --jid.
type Host struct {
	Agent
	Tasks Tasks `toml:"tasks"`
	// Dir is the file's directory; relative paths resolve against it.
	Dir string `toml:"-"`
}

// LoadHost reads and validates a host file.
func LoadHost(path string) (*Host, error) {
	var h Host
	if err := decodeFile(path, &h); err != nil {
		return nil, err
	}
	h.Dir = dirOf(path)
	var errs []error
	switch {
	case h.Manifest != "":
		errs = append(errs, errors.New("manifest is not used by agentgw host: the manifest is generated from the backend's tools"))
	case h.Connector != nil:
		errs = append(errs, errors.New("[connector] backends are not supported by agentgw host; use [mcp]"))
	case h.MCP == nil:
		errs = append(errs, errors.New("an [mcp] table (command or url) is required"))
	case (len(h.MCP.Command) == 0) == (h.MCP.URL == ""):
		errs = append(errs, errors.New("[mcp] needs exactly one of command or url"))
	}
	if _, err := ParsePrincipals(h.VisibleTo); err != nil {
		errs = append(errs, fmt.Errorf("visible_to %w", err))
	}
	if _, err := ParsePrincipals(h.InvocableBy); err != nil {
		errs = append(errs, fmt.Errorf("invocable_by %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	return &h, nil
}
