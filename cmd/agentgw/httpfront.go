package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/oauthrs"
)

// bearerFlags are the token flags of the HTTP fronts (`mcp --http`, `a2a`).
type bearerFlags struct {
	env, file *string
}

func addBearerFlags(fs *flag.FlagSet) bearerFlags {
	return bearerFlags{
		env:  fs.String("bearer-env", "", "environment variable holding the bearer token every HTTP request must carry"),
		file: fs.String("bearer-file", "", "file holding the bearer token; created with a fresh random token (mode 0600) if missing. Without this or --bearer-env, a fresh token is written to a private temporary file whose path is printed"),
	}
}

func (b bearerFlags) given() bool { return *b.env != "" || *b.file != "" }

// listen checks addr and the token flags, reads (or creates) the token and
// opens the listener. path is where the token is when the operator must be
// told (never the token itself); cleanup removes a temporary token file and
// closes the listener.
func (b bearerFlags) listen(addr string) (ln net.Listener, token, path string, cleanup func(), err error) {
	cleanup = func() {}
	if *b.env != "" && *b.file != "" {
		return nil, "", "", cleanup, usagef("give --bearer-env or --bearer-file, not both")
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", "", cleanup, usagef("--http %q is not host:port", addr)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !b.given() {
		return nil, "", "", cleanup, usagef("--http on a non-loopback address needs --bearer-env or --bearer-file")
	}
	var dirs []string
	cleanup = func() {
		if ln != nil {
			ln.Close()
		}
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	switch {
	case *b.env != "":
		if token, err = config.ReadSecret(*b.env, ""); err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--bearer-env: %w", err)
		}
	case *b.file != "":
		if token, err = bearerFromFile(*b.file); err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--bearer-file: %w", err)
		}
		path = *b.file
	default:
		dir, err := os.MkdirTemp("", "agentgw-http-")
		if err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--http: cannot create the token directory: %w", err)
		}
		dirs = append(dirs, dir)
		path = filepath.Join(dir, "bearer-token")
		if token, err = bearerFromFile(path); err != nil {
			return nil, "", "", cleanup, fmt.Errorf("--http: %w", err)
		}
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, "", "", cleanup, fmt.Errorf("--http: %w", err)
	}
	return ln, token, path, cleanup, nil
}

// oauthFlags make an HTTP front an OAuth 2.1 resource server serving many
// users, each as themselves (docs/oauth.md).
type oauthFlags struct {
	issuer, audience, jidClaim, scopes *string
	scopeFor                           *stringList
}

func addOAuthFlags(fs *flag.FlagSet) oauthFlags {
	return oauthFlags{
		issuer:   fs.String("issuer", "", "accept access tokens from this OAuth 2.1 / OpenID issuer (discovery and JWKS; https, or http on loopback) instead of one bearer token: each user acts as the JID their token names; the account must be in the gateway's [policy] trusted_fronts"),
		audience: fs.String("audience", "", "the audience (resource URL) tokens must name (default: the front's public URL)"),
		jidClaim: fs.String("jid-claim", "sub", "the token claim holding the caller's bare JID"),
		scopes:   fs.String("scopes", "", "space-separated scopes every token must carry, whatever the operation"),
		scopeFor: scopeForFlag(fs),
	}
}

func scopeForFlag(fs *flag.FlagSet) *stringList {
	var l stringList
	fs.Var(&l, "scope-for", "OP=SCOPE[,SCOPE...]: the scopes a token must also carry for one kind of operation, OP one of read (discovery, lists, cards, reading a task), invoke (tools/call, SendMessage), steer (cancel, task input and result, push configs); repeatable; a token without them gets 403 insufficient_scope (with --issuer)")
	return &l
}

// opScopes parses --scope-for.
func (o oauthFlags) opScopes() (map[oauthrs.Op][]string, error) {
	if len(*o.scopeFor) == 0 {
		return nil, nil
	}
	m := map[oauthrs.Op][]string{}
	for _, v := range *o.scopeFor {
		op, scopes, err := oauthrs.ParseScopeFor(v)
		if err != nil {
			return nil, usagef("--scope-for: %v", err)
		}
		for _, sc := range scopes {
			if !slices.Contains(m[op], sc) {
				m[op] = append(m[op], sc)
			}
		}
	}
	return m, nil
}

// check refuses the bearer flags beside --issuer.
func (o oauthFlags) check(b bearerFlags) error {
	if *o.issuer == "" {
		if *o.audience != "" || *o.scopes != "" || len(*o.scopeFor) > 0 {
			return usagef("--audience, --scopes and --scope-for need --issuer")
		}
		return nil
	}
	if _, err := o.opScopes(); err != nil {
		return err
	}
	if b.given() {
		return usagef("give --issuer or a bearer token (--bearer-env, --bearer-file), not both")
	}
	return nil
}

// gate discovers the issuer and returns the resource server's gate for
// the front at publicURL.
func (o oauthFlags) gate(ctx context.Context, publicURL string, log *slog.Logger) (*oauthrs.Gate, error) {
	aud := *o.audience
	if aud == "" {
		aud = publicURL
	}
	scopes := strings.Fields(*o.scopes)
	ops, err := o.opScopes()
	if err != nil {
		return nil, err
	}
	v, err := oauthrs.New(ctx, oauthrs.Config{Issuer: *o.issuer, Audience: aud, Scopes: scopes})
	if err != nil {
		return nil, fmt.Errorf("--issuer: %w", err)
	}
	return &oauthrs.Gate{Verifier: v, Resource: aud, Issuer: *o.issuer, Scopes: scopes, OpScopes: ops, JIDClaim: *o.jidClaim, Log: log}, nil
}
