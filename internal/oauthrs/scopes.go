package oauthrs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Op is a class of front operations that may need scopes of its own
// (Gate.OpScopes), beside the scopes every request needs (Gate.Scopes).
type Op string

// The operations. Which request is which is the fronts' mapping
// (mcpfront, a2afront); docs/oauth.md lists it.
const (
	// OpRead reads: discovery, listings, cards, a task's state.
	OpRead Op = "read"
	// OpInvoke starts work: a tool call, an A2A message.
	OpInvoke Op = "invoke"
	// OpSteer changes a running task: cancel, input, result, push configs.
	OpSteer Op = "steer"
)

// Ops are the operations, in the order the usage text names them.
var Ops = []Op{OpRead, OpInvoke, OpSteer}

// maxScopeLen bounds one scope in a flag (scope-token of RFC 6749 3.3).
const maxScopeLen = 256

// ParseScopeFor parses an "OP=SCOPE[,SCOPE…]" setting (the fronts'
// --scope-for). The error names the allowed operations; it quotes the
// operator's own input only.
func ParseScopeFor(s string) (Op, []string, error) {
	op, list, ok := strings.Cut(s, "=")
	if !ok {
		return "", nil, fmt.Errorf("want OP=SCOPE[,SCOPE…] with OP one of %s", opNames())
	}
	o := Op(strings.TrimSpace(op))
	if !slices.Contains(Ops, o) {
		return "", nil, fmt.Errorf("unknown operation %q: OP is one of %s", op, opNames())
	}
	var scopes []string
	for _, sc := range strings.Split(list, ",") {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		if len(sc) > maxScopeLen || !validScope(sc) {
			return "", nil, fmt.Errorf("%s: scope %q is not a valid scope token (RFC 6749 3.3)", o, sc)
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(scopes) == 0 {
		return "", nil, fmt.Errorf("%s: no scope given", o)
	}
	return o, scopes, nil
}

func opNames() string {
	names := make([]string, len(Ops))
	for i, o := range Ops {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// validScope is RFC 6749's scope-token: %x21 / %x23-5B / %x5D-7E.
func validScope(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Required returns the scopes a request doing ops needs: the gate's
// Scopes and every op's own, in that order, without repeats. A request
// doing several operations (a JSON-RPC batch) needs all of theirs.
func (g *Gate) Required(ops ...Op) []string {
	out := slices.Clone(g.Scopes)
	for _, o := range ops {
		for _, s := range g.OpScopes[o] {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// AllScopes are every configured scope: the metadata's scopes_supported.
func (g *Gate) AllScopes() []string {
	return g.Required(Ops...)
}

// HasOpScopes reports whether any operation needs a scope of its own
// (so a front need not classify its requests otherwise).
func (g *Gate) HasOpScopes() bool {
	for _, s := range g.OpScopes {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

type scopesKey struct{}

// ScopesOf returns the scopes of the token a Gate let the request through
// with.
func ScopesOf(ctx context.Context) []string {
	s, _ := ctx.Value(scopesKey{}).([]string)
	return s
}

// Allow checks that the request's token (let through by Wrap) carries the
// scopes of ops. If not, it answers 403 with the insufficient_scope
// challenge naming every scope the operation needs (MCP 2026-07-28
// authorization, "Scope Challenge Handling"; RFC 6750 3.1), logs the
// refusal (operation and missing scopes, never the token) and returns
// false.
func (g *Gate) Allow(w http.ResponseWriter, r *http.Request, ops ...Op) bool {
	need := g.Required(ops...)
	have := ScopesOf(r.Context())
	var missing []string
	for _, s := range need {
		if !slices.Contains(have, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return true
	}
	log := g.Log
	if log == nil {
		log = slog.Default()
	}
	p, _ := PrincipalOf(r.Context())
	names := make([]string, len(ops))
	for i, o := range ops {
		names[i] = string(o)
	}
	log.Warn("refused an HTTP request: the access token lacks the operation's scope", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "principal", p.String(), "op", strings.Join(names, ","), "missing", strings.Join(missing, " "))
	w.Header().Set("WWW-Authenticate", InsufficientScope(g.MetadataURL(), need))
	http.Error(w, "insufficient scope", http.StatusForbidden)
	return false
}

// InsufficientScope is the 403 challenge: the scopes the operation needs
// and where the resource's metadata is.
func InsufficientScope(resourceMetadata string, scopes []string) string {
	return `Bearer error="insufficient_scope", scope="` + strings.Join(scopes, " ") + `", resource_metadata="` + resourceMetadata + `"`
}
