// Package dirdb defines the storage contract of the agent directory: the
// row it keeps and the narrow driver interface, one method per query, that
// store/sqlite implements and that a PostgreSQL driver can implement
// later. store/storetest is the conformance suite every driver passes.
//
// A driver stores immutable manifest versions with their canonical bytes
// and hash, the active-version pointer (at most one per endpoint), and
// permanent (endpoint, version, hash) tombstones. Every committed change
// moves the change generation, which other processes on the same store
// poll. The directory package owns every decision; a driver only stores,
// and each method is one transaction.
package dirdb

import (
	"context"
	"errors"
)

// Errors of driver operations. The directory package maps them to its own.
var (
	ErrNotFound     = errors.New("dirdb: no such endpoint or version")
	ErrConflict     = errors.New("dirdb: different content for an existing or tombstoned version")
	ErrHashMismatch = errors.New("dirdb: hash does not match the version")
	ErrActive       = errors.New("dirdb: version is active")
	ErrChanged      = errors.New("dirdb: endpoint changed concurrently")
)

// Version is one registered version. Canonical is set only where a method
// says so.
type Version struct {
	Endpoint  string
	Version   string
	Hash      string
	Active    bool
	Canonical []byte
}

// Driver is a directory store.
type Driver interface {
	// Register inserts a version. It reports inserted=false, err=nil when
	// the identical version is already registered, and ErrConflict when
	// the version exists or is tombstoned with a different hash.
	Register(ctx context.Context, endpoint, version, hash string, canonical []byte) (inserted bool, err error)
	// Activate makes version the endpoint's active version after checking
	// its hash (ErrNotFound, ErrHashMismatch). changed is false when it
	// already was active.
	Activate(ctx context.Context, endpoint, version, hash string) (changed bool, err error)
	// Deactivate clears the endpoint's active version. changed is false
	// when none was active; ErrNotFound when the endpoint has no versions.
	Deactivate(ctx context.Context, endpoint string) (changed bool, err error)
	// Versions lists an endpoint's versions in registration order, without
	// canonical bytes; none for an unknown endpoint.
	Versions(ctx context.Context, endpoint string) ([]Version, error)
	// RemoveVersion deletes an inactive version and tombstones it
	// (ErrNotFound, ErrActive).
	RemoveVersion(ctx context.Context, endpoint, version string) error
	// RemoveEndpoint deletes and tombstones every version of the endpoint,
	// active or not. expect is the set of versions the caller checked; if
	// the endpoint's versions differ, nothing is removed and ErrChanged is
	// returned (ErrNotFound when it has none).
	RemoveEndpoint(ctx context.Context, endpoint string, expect []string) error
	// Generation returns the store's change generation.
	Generation(ctx context.Context) (int64, error)
	// Load reads the generation and every version from one consistent
	// snapshot and returns the versions without canonical bytes. For each
	// version need accepts, it then calls content with the version's
	// canonical bytes, one at a time, each call with a fresh slice; an
	// error from content ends Load with that error.
	Load(ctx context.Context, need func(endpoint, version, hash string) bool, content func(v Version) error) (gen int64, out []Version, err error)
}

// Fetcher is implemented by drivers that read one version's canonical
// bytes by key. With a Fetcher the directory keeps only a compact index in
// memory and loads manifests on demand through a bounded cache, so a large
// directory does not hold every manifest's bytes for the process's
// lifetime; without one every manifest stays resident.
type Fetcher interface {
	// Canonical returns the canonical bytes of a registered version, in a
	// fresh slice the caller owns (ErrNotFound when it is not registered).
	Canonical(ctx context.Context, endpoint, version string) ([]byte, error)
}
