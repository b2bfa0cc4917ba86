package backendkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// DigestBytes is how much of the SHA-256 a manifest-version digest keeps:
// 8 bytes, 16 hex digits. A registered version is immutable, so two
// different manifests sharing a digest would make the second one
// unpublishable; 64 bits keeps that out of reach for any number of
// versions an endpoint will ever have.
const DigestBytes = 8

// VersionDigest is the digest a bridge puts in a derived manifest version:
// the SHA-256 of the parts, each after the first preceded by a NUL byte,
// cut to DigestBytes and hex-encoded. Bridges digest the manifest with its
// version empty, plus whatever changes the backend without showing in the
// manifest (a build stamp, a protocol version), so the same state always
// gives the same version and a different one never reuses it.
func VersionDigest(parts ...[]byte) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil)[:DigestBytes])
}

// Manifests publishes a bridge's generated manifests through a Publisher,
// skipping content byte-identical to the last one published, and
// remembers what is current.
type Manifests struct {
	pub Publisher

	mu            sync.Mutex
	version, hash string
	last          []byte
}

// NewManifests returns a publisher over pub; a nil pub builds manifests
// without publishing them (the version is then the bridge's own and the
// hash empty).
func NewManifests(pub Publisher) *Manifests { return &Manifests{pub: pub} }

// Publish publishes manifest, whose own version is version, unless it is
// the last one published. It reports whether it published and the
// registered version and hash.
func (m *Manifests) Publish(ctx context.Context, version string, manifest []byte) (published bool, v, hash string, err error) {
	m.mu.Lock()
	same := m.last != nil && bytes.Equal(manifest, m.last)
	v, hash = m.version, m.hash
	m.mu.Unlock()
	if same {
		return false, v, hash, nil
	}
	v, hash = version, ""
	if m.pub != nil {
		if v, hash, err = m.pub.Publish(ctx, manifest); err != nil {
			return false, "", "", err
		}
	}
	m.mu.Lock()
	m.version, m.hash, m.last = v, hash, manifest
	m.mu.Unlock()
	return true, v, hash, nil
}

// Current returns the version and hash last published ("" before the
// first).
func (m *Manifests) Current() (version, hash string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version, m.hash
}

// Last returns the manifest last published (nil before the first).
func (m *Manifests) Last() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Ready reports whether a manifest has been published: the readiness of a
// bridge that publishes only with a live session.
func (m *Manifests) Ready() bool {
	v, _ := m.Current()
	return v != ""
}
