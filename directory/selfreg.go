package directory

import (
	"context"
	"errors"
	"slices"
	"strings"
)

// ErrNotOwner: a self-registered manifest's agent.jid is not the
// registering account's own bare JID (the spec's proof of control).
var ErrNotOwner = errors.New("directory: agent.jid is not the registering account")

// RegisterOwn is Register for the Self Registration profile: owner is the
// authenticated bare JID of the C2S account that sent the manifest, and the
// manifest must describe exactly that JID (ErrNotOwner otherwise). The
// component-domain restriction of SetDomain does not apply, since a C2S
// account lives on its own server's domain; which domains may self-register
// at all is the caller's policy. Versions, idempotency, conflicts and
// tombstones are those of Register.
func (r *Registry) RegisterOwn(ctx context.Context, owner string, raw []byte) (*Manifest, error) {
	m, err := ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	own, err := NormalizeEndpoint(owner)
	if err != nil || m.Endpoint != own {
		return nil, ErrNotOwner
	}
	err = r.write(ctx, m, func() (bool, error) {
		return r.store.Register(ctx, m.Endpoint, m.Version, m.Hash, m.Canonical)
	})
	if err != nil {
		return nil, err
	}
	if have, ok := r.Manifest(m.Endpoint, m.Version); ok && have.Hash == m.Hash {
		return have, nil
	}
	return m, nil
}

// Endpoints returns every endpoint with a registered version, active or
// not, in octetwise order, with its active version ("" when deactivated).
func (r *Registry) Endpoints() []EndpointVersion {
	s := r.snap.Load()
	out := make([]EndpointVersion, 0, len(s.endpoints))
	for ep, e := range s.endpoints {
		ev := EndpointVersion{Endpoint: ep}
		if e.active != nil {
			ev.Active = e.active.version
		}
		out = append(out, ev)
	}
	slices.SortFunc(out, func(a, b EndpointVersion) int { return strings.Compare(a.Endpoint, b.Endpoint) })
	return out
}

// EndpointVersion is one endpoint and its active version.
type EndpointVersion struct {
	Endpoint string
	Active   string
}
