package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentgw/agentgw/backendkit"
)

// bridgeDoctor is doctor as a bridge's check sees it (backendkit.Doctor):
// its lines are about one agent.
type bridgeDoctor struct {
	d    *doctor
	what string
}

var _ backendkit.Doctor = (*bridgeDoctor)(nil)

func (b *bridgeDoctor) OK(format string, a ...any)   { b.d.ok(b.what, format, a...) }
func (b *bridgeDoctor) Fail(format string, a ...any) { b.d.fail(b.what, format, a...) }
func (b *bridgeDoctor) Redact(secrets ...string)     { b.d.red.Add(secrets...) }
func (b *bridgeDoctor) Scrub(s string) string        { return b.d.red.Scrub(s) }
func (b *bridgeDoctor) Logger() *slog.Logger         { return b.d.log }
func (b *bridgeDoctor) Timeout() time.Duration       { return b.d.timeout }
func (b *bridgeDoctor) StartTimeout() time.Duration  { return b.d.mcpTimeout }
func (b *bridgeDoctor) ConfigPath() string           { return b.d.cfgPath }

func (b *bridgeDoctor) Dial(ctx context.Context, hostPort, hint string) error {
	return b.d.dialCheck(ctx, hostPort, hint)
}

// Store hands out the drivers of the store doctor opened.
func (b *bridgeDoctor) Store(ptr any) bool {
	return backendkit.FillStore(ptr, b.d.bindings, b.d.accs)
}
