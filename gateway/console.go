package gateway

import (
	"strings"

	"github.com/agentgw/agentgw/backendkit"
)

// ConsoleResource is the resource of the route of tasks the operator web
// console runs (console.Deps.RouteResource): the console follows them
// in the store, so their events are not sent over XMPP to the operator's
// account.
const ConsoleResource = "agentgw-console"

func consoleRoute(route string) bool {
	_, res, ok := strings.Cut(route, "/")
	return ok && res == ConsoleResource
}

// BackendState tells the console an endpoint's backend: "ready",
// "starting" (a backend that reports readiness and is not ready yet) or
// "none" (no backend in this gateway).
func (g *Gateway) BackendState(endpoint string) string {
	b, ok := g.backend(endpoint)
	if !ok {
		return "none"
	}
	if rb, ok := b.(backendkit.Readiness); ok && !rb.Ready() {
		return "starting"
	}
	return "ready"
}
