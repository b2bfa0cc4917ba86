package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentgw/agentgw/mcpbridge"
	"github.com/agentgw/agentgw/mcpbridge/mcpoauth"
)

func init() {
	register(command{name: "oauth", summary: "log the gateway in to an MCP server that needs OAuth: oauth login", run: runOAuth})
}

const oauthSynopsis = `oauth login --config C [--listen 127.0.0.1:PORT] [--timeout 10m] AGENT_JID

login runs the OAuth authorization code grant with PKCE once for an
[agents.mcp] url agent whose [agents.mcp.oauth] grant is
"authorization_code": it finds the server's authorization server (from
the server's 401 and its metadata), prints the URL to open in a browser,
waits for the redirect on a loopback listener (http://LISTEN/callback;
register that redirect URI with the authorization server), and writes the
refresh token to the agent's token_file with mode 0600. A running gateway
picks the new login up at its next reconnect (within a minute). Tokens
are never printed.`

func runOAuth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, oauthSynopsis, "missing subcommand: login", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("oauth "+sub, oauthSynopsis, stdout)
	cfgPath := configFlag(fs)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address of the redirect listener (port 0: any free port)")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the browser step")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if sub != "login" {
		return usagef("unknown subcommand %q", sub)
	}
	if len(pos) != 1 {
		return usagef("oauth login takes exactly one AGENT_JID")
	}
	ep, err := parseBareJID(pos[0])
	if err != nil {
		return usagef("%v", err)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	agent := agentByJID(cfg, ep)
	m, _ := func() (*mcpbridge.Config, bool) {
		if agent == nil {
			return nil, false
		}
		m, ok := agent.Section.(*mcpbridge.Config)
		return m, ok
	}()
	if m == nil || m.OAuth == nil || m.URL == "" {
		return exitError{code: 1, msg: fmt.Sprintf("%s is not an [agents.mcp] url agent with [agents.mcp.oauth] in %s", ep, *cfgPath)}
	}
	if m.OAuth.Grant != mcpoauth.GrantAuthorizationCode {
		return exitError{code: 1, msg: fmt.Sprintf(`%s uses grant = %q, which needs no login (only "authorization_code" does)`, ep, m.OAuth.Grant)}
	}
	lctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	o := mcpoauth.LoginOptions{Options: mcpbridge.OAuthOptions(cfg, m), Listen: *listen, Out: stdout}
	if err := mcpoauth.Login(lctx, o); err != nil {
		return exitError{code: 1, msg: err.Error()}
	}
	fmt.Fprintf(stdout, "Logged in: the refresh token is in %s (mode 0600).\n", o.TokenFile)
	return nil
}
