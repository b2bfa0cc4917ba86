package endpointhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/tasks"
)

// BridgeBackend is Options.NewBackend for agent a of bridge b, a line of
// the root's bridge table that `agentgw host` can run (Bridge.Hosted):
// the host provides b's Build with the host's publisher and availability,
// no store, no uploader and no cluster. domain is the account's domain,
// secrets the values the bridge must scrub.
func BridgeBackend(ctx context.Context, b backendkit.Bridge, a backendkit.Agent, domain string, secrets func() []string) func(backendkit.Publisher, backendkit.Availability) (Backend, error) {
	return func(pub backendkit.Publisher, av backendkit.Availability) (Backend, error) {
		h := &bridgeHost{pub: pub, av: av, log: a.Log, domain: domain, secrets: secrets, shared: map[string]any{}}
		if err := b.Build(ctx, h, a); err != nil {
			return nil, err
		}
		if h.backend == nil {
			return nil, fmt.Errorf("host: bridge %s added no backend", b.Section)
		}
		return h.backend, nil
	}
}

// bridgeHost is the endpoint host as a bridge's Build sees it.
type bridgeHost struct {
	pub     backendkit.Publisher
	av      backendkit.Availability
	log     *slog.Logger
	domain  string
	secrets func() []string
	shared  map[string]any
	backend *hostedBackend
}

func (h *bridgeHost) Publisher() backendkit.Publisher       { return h.pub }
func (h *bridgeHost) Availability() backendkit.Availability { return h.av }
func (h *bridgeHost) Logger() *slog.Logger                  { return h.log }
func (h *bridgeHost) ComponentDomain() string               { return h.domain }
func (h *bridgeHost) Secrets() []string                     { return h.secrets() }
func (h *bridgeHost) Redactor() *backendkit.Redactor        { return backendkit.NewRedactor(h.secrets) }
func (h *bridgeHost) Store(any) bool                        { return false }
func (h *bridgeHost) Leased() bool                          { return false }

func (h *bridgeHost) Uploader(string, int64) backendkit.FileUploader { return nil }

func (h *bridgeHost) Add(_ string, backend any, start func(context.Context) error) error {
	if backend == nil {
		return errors.New("host: a bridge part without a backend is not supported by agentgw host")
	}
	b, ok := backend.(tasks.Backend)
	if !ok {
		return fmt.Errorf("host: bridge backend %T is not a tasks.Backend", backend)
	}
	if h.backend != nil {
		return errors.New("host: the bridge added a second backend")
	}
	h.backend = &hostedBackend{Backend: b, start: start}
	return nil
}

func (h *bridgeHost) Lease(string, string, any, func() (backendkit.LeasedTerm, error)) error {
	return errors.New("host: no cluster")
}

func (h *bridgeHost) Hold(string, func() []string, func(context.Context) error) error {
	return errors.New("host: a shared resource (such as a listener) is not supported by agentgw host")
}

func (h *bridgeHost) Shared(key string, make func() (any, error)) (any, error) {
	if v, ok := h.shared[key]; ok {
		return v, nil
	}
	v, err := make()
	if err == nil {
		h.shared[key] = v
	}
	return v, err
}

// hostedBackend is a bridge's backend with the start it registered.
type hostedBackend struct {
	tasks.Backend
	start func(context.Context) error
}

func (x *hostedBackend) Start(ctx context.Context) error {
	if x.start == nil {
		<-ctx.Done()
		return nil
	}
	return x.start(ctx)
}

// Ready forwards the backend's readiness (backendkit.Readiness).
func (x *hostedBackend) Ready() bool {
	if r, ok := x.Backend.(backendkit.Readiness); ok {
		return r.Ready()
	}
	return true
}
