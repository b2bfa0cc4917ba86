// Package sessiondb is the store interface of the operator console's
// logins (docs/console.md). Kept in the store, a login is shared by the
// members of a cluster (a balancer may send each request to another
// member) and outlives a restart. A session is stored by the SHA-256 of
// its ID, never the ID itself: the cookie's value cannot be read back from
// the store.
//
// Drivers: store/sqlite, store/pg, and Memory here (a console without a
// store). Conformance: store/storetest.
package sessiondb

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Session is one login.
type Session struct {
	// IDHash is the SHA-256 of the session ID, hex (64 characters).
	IDHash  string
	User    string // the operator's bare JID
	ByToken bool
	Expires time.Time
	// Note is the outcome of the operator's last action, shown once.
	Note   string
	NoteOK bool
}

// Driver is the session store. Every method is safe for concurrent use and
// atomic on its own.
type Driver interface {
	// Create stores s (a new IDHash).
	Create(ctx context.Context, s Session) error
	// Get returns the session unless it is absent or expired at now (nil,
	// nil then).
	Get(ctx context.Context, idHash string, now time.Time) (*Session, error)
	// Delete ends a session (absent is no error).
	Delete(ctx context.Context, idHash string) error
	// SetNote replaces the session's note.
	SetNote(ctx context.Context, idHash, note string, ok bool) error
	// TakeNote returns the note and clears it, once.
	TakeNote(ctx context.Context, idHash string) (note string, ok bool, err error)
	// Purge deletes the sessions expired at now and, beyond max sessions,
	// the ones that expire first; it returns how many went.
	Purge(ctx context.Context, now time.Time, max int) (int64, error)
}

// Memory is a Driver in memory: logins last one process.
type Memory struct {
	mu sync.Mutex
	m  map[string]Session
}

var _ Driver = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{m: map[string]Session{}} }

// ErrExists refuses a second session with one ID hash.
var ErrExists = errors.New("sessiondb: a session with this ID exists")

func (d *Memory) Create(_ context.Context, s Session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.m[s.IDHash]; ok {
		return ErrExists
	}
	d.m[s.IDHash] = s
	return nil
}

func (d *Memory) Get(_ context.Context, idHash string, now time.Time) (*Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.m[idHash]
	if !ok || !now.Before(s.Expires) {
		return nil, nil
	}
	return &s, nil
}

func (d *Memory) Delete(_ context.Context, idHash string) error {
	d.mu.Lock()
	delete(d.m, idHash)
	d.mu.Unlock()
	return nil
}

func (d *Memory) SetNote(_ context.Context, idHash, note string, ok bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, found := d.m[idHash]; found {
		s.Note, s.NoteOK = note, ok
		d.m[idHash] = s
	}
	return nil
}

func (d *Memory) TakeNote(_ context.Context, idHash string) (string, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, found := d.m[idHash]
	if !found {
		return "", false, nil
	}
	n, ok := s.Note, s.NoteOK
	s.Note, s.NoteOK = "", false
	d.m[idHash] = s
	return n, ok, nil
}

func (d *Memory) Purge(_ context.Context, now time.Time, max int) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var n int64
	for k, s := range d.m {
		if !now.Before(s.Expires) {
			delete(d.m, k)
			n++
		}
	}
	for len(d.m) > max {
		var first string
		for k, s := range d.m {
			if first == "" || s.Expires.Before(d.m[first].Expires) {
				first = k
			}
		}
		delete(d.m, first)
		n++
	}
	return n, nil
}
