package mcpbridge

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/mcpbridge/mcpoauth"
	"github.com/agentgw/agentgw/tasks"
)

// oauthSecrets adds the token source's client secret and tokens to the
// values the backend redacts.
func oauthSecrets(o Options) func() []string {
	if o.OAuth == nil {
		return o.Secrets
	}
	return func() []string {
		var s []string
		if o.Secrets != nil {
			s = o.Secrets()
		}
		return append(s, o.OAuth.Secrets()...)
	}
}

// oauthReady gets an access token before a connect, so a server that
// needs a login the gateway lost is not dialled at all, and the reason
// is the connect's error.
func (b *Backend) oauthReady(ctx context.Context) error {
	if b.o.OAuth == nil {
		return nil
	}
	_, err := b.o.OAuth.Token(ctx)
	return err
}

// oauthLost is called once when the authorization server refuses the
// refresh token (or there is none): the one log line of the lost login.
// The live session ends and the endpoint becomes unavailable; the
// supervisor keeps trying quietly, and the Source reads the token file
// again each time, so a new `agentgw oauth login` brings it back.
func (b *Backend) oauthLost(reason string) {
	b.log.Error("MCP server needs a new OAuth login; the endpoint is unavailable until then",
		slog.String("reason", reason),
		slog.String("fix", "run: agentgw oauth login --config CONFIG "+b.jid))
	select {
	case b.authLost <- struct{}{}:
	default:
	}
}

// oauthFailure is the failure of a call that failed because the login
// was lost: the endpoint is unavailable, not the call wrong.
func (b *Backend) oauthFailure() (tasks.Failure, bool) {
	if b.o.OAuth == nil || !b.o.OAuth.LoginRequired() {
		return tasks.Failure{}, false
	}
	return tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server needs a new OAuth login by the gateway's operator.", Retryable: true}, true
}

// withOAuth puts the access token on every request to the server and,
// when the server answers 401, gets a new token and sends the request
// once more.
func (b *Backend) withOAuth(rt http.RoundTripper) http.RoundTripper {
	if b.o.OAuth == nil {
		return rt
	}
	return &mcpoauth.Transport{Base: rt, Source: b.o.OAuth}
}
