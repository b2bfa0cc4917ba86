// Package selfregdb is the store interface of the Self Registration
// profile's own durable state: which endpoints registered themselves (a C2S
// account for its own bare JID) and which the operator banned. The
// manifests themselves live in the directory store (dirdb) like every
// other endpoint's.
//
// Drivers: store/sqlite, store/pg. Conformance: store/storetest.
package selfregdb

import (
	"context"
	"time"
)

// Record is one self-registered endpoint.
type Record struct {
	Endpoint string    // normalized bare JID
	First    time.Time // first successful self-registration
	Last     time.Time // latest successful self-registration
}

// Ban is one banned endpoint. A ban outlives restarts and refuses every
// later self-registration and activation of that JID until it is lifted.
type Ban struct {
	Endpoint string
	Reason   string // operator's note; "" when none
	At       time.Time
}

// Driver is the self-registration store. Every method is safe for
// concurrent use and atomic on its own.
type Driver interface {
	// Record notes a successful self-registration of endpoint at t.
	Record(ctx context.Context, endpoint string, t time.Time) error
	// Records lists the self-registered endpoints in octetwise order.
	Records(ctx context.Context) ([]Record, error)
	// Ban bans endpoint; banning it again keeps the first ban's time and
	// replaces the reason.
	Ban(ctx context.Context, endpoint, reason string, t time.Time) error
	// Unban lifts a ban and reports whether there was one.
	Unban(ctx context.Context, endpoint string) (bool, error)
	// Banned reports whether endpoint is banned.
	Banned(ctx context.Context, endpoint string) (bool, error)
	// Bans lists the bans in octetwise order of endpoint.
	Bans(ctx context.Context) ([]Ban, error)
}
