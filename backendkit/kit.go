// Package backendkit is what every agent bridge shares: the bridge
// contract (Bridge, Host, Doctor) by which one line of the root's table
// plugs a bridge in, publishing the generated manifest, reporting
// availability to the endpoint's presence, the supervise loop with the
// project's one backoff, the manifest-version digest, the one secret
// redactor, and the readiness question the gateway asks every backend. A
// new backend is a small package on this kit; the gateway wires the kit's
// interfaces to the directory and presence.
package backendkit

import "context"

// Publisher registers a manifest in the directory and activates it,
// returning the registered version and hash. The gateway implements it.
// Publishing identical content again must be harmless.
type Publisher interface {
	Publish(ctx context.Context, manifestJSON []byte) (version, hash string, err error)
}

// Availability is told when an endpoint's backend goes up or down, so its
// presence (and the backend-up metric) can follow. The gateway implements
// it.
type Availability interface {
	SetAvailable(endpoint string, up bool)
}

// Readiness is what the gateway asks a backend at start: whether it is
// serving. A bridge is ready once it has published its manifest, which it
// does only with a live session. Backends that cannot tell need not
// implement it.
type Readiness interface {
	Ready() bool
}
