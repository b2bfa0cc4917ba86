package backendkit

import "sync"

// Presence reports one endpoint's availability, telling Availability only
// of changes. A nil Availability is allowed and hears nothing.
type Presence struct {
	endpoint string
	to       Availability

	mu   sync.Mutex
	last *bool
}

// NewPresence returns the reporter for endpoint.
func NewPresence(endpoint string, to Availability) *Presence {
	return &Presence{endpoint: endpoint, to: to}
}

// Set reports up, unless it was the last report.
func (p *Presence) Set(up bool) {
	p.mu.Lock()
	same := p.last != nil && *p.last == up
	if !same {
		p.last = &up
	}
	p.mu.Unlock()
	if same || p.to == nil {
		return
	}
	p.to.SetAvailable(p.endpoint, up)
}

// StatusReporter is optionally implemented by an Availability that can
// show a short status text in an available endpoint's presence (for a
// backend that is up but degraded); "" clears it. Bridges check for it
// with a type assertion.
type StatusReporter interface {
	SetStatus(endpoint, status string)
}
