package gateway

import (
	"context"

	"github.com/agentgw/agentgw/tasks"
)

// observedAdhoc is the engine as the ad-hoc commands see it: admissions go
// through observedEngine, so command tasks count in the admission and
// duration metrics like invokes.
type observedAdhoc struct {
	*tasks.Engine
	obs observedEngine
}

func (o observedAdhoc) Admit(ctx context.Context, inv tasks.Invocation) (tasks.Accepted, error) {
	return o.obs.Admit(ctx, inv)
}

// teeNotifier hands every committed event to both notifiers (the XMPP
// events and the ad-hoc commands' progress cache).
type teeNotifier struct{ a, b tasks.Notifier }

func (t teeNotifier) Notify(ev tasks.Event) {
	t.a.Notify(ev)
	t.b.Notify(ev)
}
