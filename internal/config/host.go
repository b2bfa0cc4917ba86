package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// Host is the file `agentgw host --config` reads: the backend of the one
// endpoint the host runs, written like an [[agents]] entry (name, title,
// description, version, visible_to, invocable_by, max_running and a bridge
// table such as [mcp]), plus an optional [tasks] table. jid may be left
// out; when given it must equal --jid.
type Host struct {
	Agent
	Tasks Tasks `toml:"tasks"`
	// Dir is the file's directory; relative paths resolve against it.
	Dir string `toml:"-"`
}

// HostSections are the bridge sections a host file may hold: those of the
// bridges `agentgw host` can run (Hosted), each with what its table needs
// for the "is required" message (such as "command or url").
type HostSections interface {
	Sections
	Hosted() (names, needs []string)
}

// LoadHost reads and validates a host file.
func LoadHost(path string, sections HostSections) (*Host, error) {
	var h Host
	var raw map[string]toml.Primitive
	err := decodeFile(path, &raw, func(md toml.MetaData) ([]string, error) {
		if p, ok := raw["tasks"]; ok {
			if err := md.PrimitiveDecode(p, &h.Tasks); err != nil {
				return nil, fmt.Errorf("tasks: %w", err)
			}
			delete(raw, "tasks")
		}
		return decodeAgent(md, raw, &h.Agent, sections, "")
	})
	if err != nil {
		return nil, err
	}
	h.Dir = dirOf(path)
	names, needs := sections.Hosted()
	hosted := func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	var errs []error
	switch {
	case h.Manifest != "":
		errs = append(errs, errors.New("manifest is not used by agentgw host: the manifest is generated from the backend's tools"))
	case h.Section != nil && !hosted(h.Backend):
		errs = append(errs, fmt.Errorf("[%s] backends are not supported by agentgw host; use %s", h.Backend, tables(names, " or ")))
	case h.Section == nil:
		var want []string
		for i, n := range names {
			want = append(want, fmt.Sprintf("an [%s] table (%s)", n, needs[i]))
		}
		errs = append(errs, fmt.Errorf("%s is required", strings.Join(want, " or ")))
	default:
		for _, p := range h.Section.Validate(&Config{Dir: h.Dir}, &h.Agent) {
			// The host file writes the bridge's table at the top.
			errs = append(errs, errors.New(strings.ReplaceAll(p, "[agents."+h.Backend+"]", "["+h.Backend+"]")))
		}
	}
	if len(h.extra) > 0 {
		errs = append(errs, fmt.Errorf("set exactly one backend: %s", tables(names, " or ")))
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

func tables(names []string, sep string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "[" + n + "]"
	}
	return strings.Join(out, sep)
}
