package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/callers/mcpfront"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
)

func init() {
	register(command{name: "mcp", summary: "serve the account's XMPP agents as MCP tools (stdio, or streamable HTTP with --http)", run: runMCP})
}

// stdioTransport is replaceable in tests.
var stdioTransport = func() mcp.Transport { return &mcp.StdioTransport{} }

func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", "mcp --jid JID [--gateway JID]... [--http 127.0.0.1:PORT [--bearer-env VAR | --bearer-file PATH | --issuer URL [--audience URL] [--jid-claim NAME] [--scopes S...] [--scope-for OP=S,...]... [--public-url URL]]] [--refresh 30s] [--tool-names mcp|strict]", stdout)
	cf := addCallerFlags(fs)
	httpAddr := fs.String("http", "", "serve streamable HTTP on ADDR (host:port) instead of stdio")
	bf := addBearerFlags(fs)
	of := addOAuthFlags(fs)
	publicURL := fs.String("public-url", "", "the front's public URL, the audience and the resource of its OAuth metadata (default http://ADDR/)")
	sessionTimeout := fs.Duration("session-timeout", mcpfront.DefaultSessionTimeout, "close an HTTP MCP session idle this long")
	refresh := fs.Duration("refresh", 30*time.Second, "rediscovery poll interval, the fallback to the catalog changes gateways push (0 disables polling)")
	names := fs.String("tool-names", "mcp", `tool-name style: "mcp" (localpart.tool, [A-Za-z0-9_.-], ≤128) or "strict" (localpart_tool, [A-Za-z0-9_-], ≤64)`)
	pageSize := fs.Int("page-size", 50, "RSM page size for directory listings")
	listPage := fs.Int("list-page-size", 0, "tools/list page size (default 1000)")
	cancelWait := fs.Duration("cancel-wait", 15*time.Second, "how long to wait for a cancelled XMPP task to settle")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("mcp takes no arguments")
	}
	var style mcpfront.NameStyle
	switch *names {
	case "mcp":
		style = mcpfront.NamesMCP
	case "strict":
		style = mcpfront.NamesStrict
	default:
		return usagef("--tool-names must be mcp or strict")
	}
	if *listPage < 0 {
		return usagef("--list-page-size must not be negative")
	}
	if *refresh <= 0 {
		*refresh = -1
	}
	if *httpAddr == "" {
		switch {
		case *bf.env != "":
			return usagef("--bearer-env needs --http")
		case *bf.file != "":
			return usagef("--bearer-file needs --http")
		}
	}
	if err := of.check(bf); err != nil {
		return err
	}
	if *of.issuer != "" && *httpAddr == "" {
		return usagef("--issuer needs --http")
	}
	if *sessionTimeout <= 0 {
		return usagef("--session-timeout must be positive")
	}
	var (
		ln         net.Listener
		bearer     string
		bearerPath string // where the token is, to tell the operator
	)
	switch {
	case *of.issuer != "":
		if ln, err = net.Listen("tcp", *httpAddr); err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		defer ln.Close()
	case *httpAddr != "":
		var cleanup func()
		ln, bearer, bearerPath, cleanup, err = bf.listen(*httpAddr)
		defer cleanup()
		if err != nil {
			return err
		}
	}

	s, gws, log, err := cf.connectFront(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	opts := mcpfront.Options{
		Gateways: gws, Refresh: *refresh, DirectoryPageSize: *pageSize, ListPageSize: *listPage,
		Names: style, CancelWait: *cancelWait, Logger: log,
		Implementation: &mcp.Implementation{Name: "agentgw", Title: "XMPP agents (agentgw)", Version: buildVersion()},
	}
	var users *mcpfront.Users
	if *of.issuer != "" {
		pub := *publicURL
		if pub == "" {
			pub = "http://" + ln.Addr().String() + "/"
		}
		gate, err := of.gate(ctx, pub, log)
		if err != nil {
			return err
		}
		users = mcpfront.NewUsers(s.client, opts, mcpfront.UsersOptions{Gate: gate, SessionTimeout: *sessionTimeout})
	}
	var f *mcpfront.Front // the front of the account itself (no --issuer)
	if users == nil {
		f = mcpfront.New(s.client, opts)
	}

	// A lost XMPP stream ends the server: the host restarts it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan struct{})
	go func() {
		select {
		case <-s.conn.Done():
			close(lost)
			cancel()
		case <-ctx.Done():
		}
	}()

	switch {
	case users != nil:
		fmt.Fprintf(stderr, "agentgw mcp: serving MCP (streamable HTTP) on http://%s/ for the users of %s, through %s\n", ln.Addr(), *of.issuer, s.conn.JID().Bare())
		err = users.RunHTTP(ctx, ln)
	case ln != nil:
		if bearerPath != "" {
			// The path, never the token: stderr ends up in logs.
			fmt.Fprintf(stderr, "agentgw mcp: bearer token in %s (send \"Authorization: Bearer <token>\")\n", bearerPath)
		}
		fmt.Fprintf(stderr, "agentgw mcp: serving MCP (streamable HTTP) on http://%s/ as %s\n", ln.Addr(), s.conn.JID().Bare())
		err = f.RunHTTP(ctx, ln, mcpfront.HTTPOptions{Bearer: bearer, SessionTimeout: *sessionTimeout})
	default:
		err = f.Run(ctx, stdioTransport())
	}
	select {
	case <-lost:
		return fmt.Errorf("the XMPP connection ended: %v", s.conn.Err())
	default:
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// bearerFromFile reads the bearer token from path, or creates the file
// (mode 0600, never overwriting) with a fresh random token when it does not
// exist. A token file others can read is refused, as ssh refuses such keys.
func bearerFromFile(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		token := ids.New("agw-mcp-")
		_, werr := f.WriteString(token + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return "", fmt.Errorf("cannot write %s: %w", path, werr)
		}
		return token, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("cannot create %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is accessible by other users (mode %#o); chmod 600 it", path, fi.Mode().Perm())
	}
	return config.ReadSecret("", path)
}
