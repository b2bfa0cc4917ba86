package component

import (
	"errors"
	"sync"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/xep/xmltree"
)

var errDuplicateID = errors.New("component: an IQ with this id is already waiting for its answer")

// iqOutcome is what a waiting SendIQ receives: the answer or why none came.
type iqOutcome struct {
	el  *xmltree.Element
	err error
}

// pendingIQ is one outbound IQ waiting for its result or error.
type pendingIQ struct {
	to jid.JID
	ch chan iqOutcome // buffered 1: resolving never blocks the read loop
}

// pendingTable correlates IQ answers with the requests the gateway sent. It
// accepts new requests only while a stream is up; losing the stream fails
// every request at once, so no caller waits for an answer that cannot come.
type pendingTable struct {
	mu     sync.Mutex
	open   bool
	m      map[string]*pendingIQ
	domain jid.JID // our component domain: mellium blanks a "from" equal to it
	server jid.JID // the server domain, which answers for an empty "to"
}

func newPendingTable(domain, server jid.JID) *pendingTable {
	return &pendingTable{m: map[string]*pendingIQ{}, domain: domain, server: server}
}

// setOpen allows registrations (a stream is up).
func (t *pendingTable) setOpen() {
	t.mu.Lock()
	t.open = true
	t.mu.Unlock()
}

// register records a request with id sent to to.
func (t *pendingTable) register(id string, to jid.JID) (*pendingIQ, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open {
		return nil, ErrNotConnected
	}
	if _, dup := t.m[id]; dup {
		return nil, errDuplicateID
	}
	p := &pendingIQ{to: to, ch: make(chan iqOutcome, 1)}
	t.m[id] = p
	return p, nil
}

// live reports whether p still waits for its answer; the writer skips
// requests that have already failed.
func (t *pendingTable) live(id string, p *pendingIQ) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id] == p
}

// cancel forgets a request whose caller gave up.
func (t *pendingTable) cancel(id string, p *pendingIQ) {
	t.mu.Lock()
	if t.m[id] == p {
		delete(t.m, id)
	}
	t.mu.Unlock()
}

// resolve delivers an IQ result or error. It returns false when no request
// with this id waits for an answer from this address.
func (t *pendingTable) resolve(id string, from jid.JID, el *xmltree.Element) bool {
	return t.finish(id, from, iqOutcome{el: el})
}

// fail ends the wait of the request with id, answered by from, with err.
func (t *pendingTable) fail(id string, from jid.JID, err error) bool {
	return t.finish(id, from, iqOutcome{err: err})
}

func (t *pendingTable) finish(id string, from jid.JID, out iqOutcome) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.m[id]
	if p == nil || !t.answers(p.to, from) {
		return false
	}
	delete(t.m, id)
	p.ch <- out
	return true
}

// answers reports whether from may answer a request sent to to (RFC 6120
// §8.1.2.1): the addressee itself, its bare JID, or the server for a
// request without "to".
func (t *pendingTable) answers(to, from jid.JID) bool {
	if from.Equal(jid.JID{}) {
		from = t.domain
	}
	if to.Equal(jid.JID{}) {
		return from.Equal(t.server) || from.Equal(t.domain)
	}
	return from.Equal(to) || from.Equal(to.Bare())
}

// failAll closes the table to new requests and fails every waiting one.
func (t *pendingTable) failAll(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open = false
	for id, p := range t.m {
		p.ch <- iqOutcome{err: err}
		delete(t.m, id)
	}
}

func (t *pendingTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
