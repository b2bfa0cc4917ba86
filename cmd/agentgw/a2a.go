package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/agentgw/agentgw/a2abridge/cardsig"
	"github.com/agentgw/agentgw/callers/a2afront"
	"github.com/agentgw/agentgw/store/sqlite"
)

func init() {
	register(command{name: "a2a", summary: "serve the account's XMPP agents as A2A agents over HTTP (A2A 1.0 and 0.3; JSON-RPC and HTTP+JSON)", run: runA2A})
}

func runA2A(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("a2a", "a2a --jid JID --http 127.0.0.1:PORT [--bearer-env VAR | --bearer-file PATH | --issuer URL [--audience URL] [--jid-claim NAME] [--scopes S...] [--scope-for OP=S,...]...] [--gateway JID]... [--public-url URL]\n\n"+
		"Each agent the account can see gets an Agent Card at /agents/{jid}/.well-known/agent-card.json and a\n"+
		"JSON-RPC interface at /agents/{jid} and an HTTP+JSON one under /agents/{jid}/rest (A2A 1.0 with the header\n"+
		"A2A-Version: 1.0, 0.3 without); GET /agents lists the cards. Every request needs the bearer token, or with --issuer an access token\n"+
		"of that issuer: each user then acts as the JID their token names.", stdout)
	cf := addCallerFlags(fs)
	httpAddr := fs.String("http", "", "serve HTTP on ADDR (host:port); required")
	bf := addBearerFlags(fs)
	of := addOAuthFlags(fs)
	publicURL := fs.String("public-url", "", "URL prefix the cards advertise (default http://ADDR)")
	refresh := fs.Duration("refresh", 30*time.Second, "how long a discovered agent list is reused")
	pageSize := fs.Int("page-size", 50, "RSM page size for directory listings")
	cancelWait := fs.Duration("cancel-wait", 15*time.Second, "how long tasks/cancel waits for the XMPP task to settle")
	maxBody := fs.Int64("max-request-bytes", 1<<20, "largest JSON-RPC request body accepted")
	pushOn := fs.Bool("push", false, "offer push notifications (without --push-outbox the outbox is in memory: a restart loses it)")
	pushOutbox := fs.String("push-outbox", "", "SQLite file of push configs and undelivered notifications, kept across restarts (implies --push)")
	pushPrivate := fs.Bool("push-allow-private", false, "allow push targets on loopback, private (RFC 1918, fc00::/7) and 100.64/10 addresses (link-local stays refused)")
	pushAttempts := fs.Int("push-max-attempts", 12, "attempts of one push notification before it is given up (logged)")
	pushAge := fs.Duration("push-max-age", 24*time.Hour, "age past which an undelivered push notification is given up (logged)")
	pushAllow := fs.String("push-allow", "", "comma-separated address prefixes push targets may resolve to although not public (e.g. 127.0.0.1/32); default none")
	pushTimeout := fs.Duration("push-timeout", 10*time.Second, "bound of one push delivery attempt")
	cardKey := fs.String("card-key-file", "", "PEM ECDSA P-256 private key the agent cards are signed with (ES256); default: a key generated at start")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("a2a takes no arguments")
	}
	if *httpAddr == "" {
		return usagef("a2a needs --http ADDR")
	}
	if *maxBody <= 0 || *refresh <= 0 || *cancelWait <= 0 {
		return usagef("--max-request-bytes, --refresh and --cancel-wait must be positive")
	}
	if err := of.check(bf); err != nil {
		return err
	}
	var (
		ln                 net.Listener
		bearer, bearerPath string
	)
	if *of.issuer != "" {
		if ln, err = net.Listen("tcp", *httpAddr); err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		defer ln.Close()
	} else {
		var cleanup func()
		ln, bearer, bearerPath, cleanup, err = bf.listen(*httpAddr)
		defer cleanup()
		if err != nil {
			return err
		}
	}
	base := *publicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}

	var allow []netip.Prefix
	for _, p := range strings.Split(*pushAllow, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pre, err := netip.ParsePrefix(p)
		if err != nil {
			return usagef("--push-allow: %q is not an address prefix", p)
		}
		allow = append(allow, pre)
	}
	if *pushTimeout <= 0 || *pushAttempts <= 0 || *pushAge <= 0 {
		return usagef("--push-timeout, --push-max-attempts and --push-max-age must be positive")
	}
	if *of.issuer != "" && (*pushOn || *pushOutbox != "") {
		// The push store also indexes the tasks ListTasks answers from; one
		// file shared by every user's front would mix their tasks.
		return usagef("--push and --push-outbox are not available with --issuer yet (one push store per user is not built)")
	}
	var pushStore *sqlite.A2AFront
	if *pushOn || *pushOutbox != "" {
		pushStore, err = sqlite.OpenA2AFront(ctx, *pushOutbox)
		if err != nil {
			return err
		}
		defer pushStore.Close()
	}
	key, err := cardsig.LoadOrGenerate(*cardKey)
	if err != nil {
		return err
	}
	signer, err := cardsig.NewSigner(key, base+"/jwks.json")
	if err != nil {
		return err
	}

	s, gws, log, err := cf.connectFront(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	opts := a2afront.Options{
		BaseURL: base, Gateways: gws, Refresh: *refresh, DirectoryPageSize: *pageSize,
		CancelWait: *cancelWait, MaxRequestBytes: *maxBody, Version: buildVersion(), Logger: log,
		CardSigner: signer,
		Push: a2afront.PushOptions{Enabled: pushStore != nil, Store: pushStore, Allow: allow, AllowPrivate: *pushPrivate,
			Timeout: *pushTimeout, MaxAttempts: *pushAttempts, MaxAge: *pushAge},
	}
	var users *a2afront.Users
	if *of.issuer != "" {
		gate, err := of.gate(ctx, base, log)
		if err != nil {
			return err
		}
		if users, err = a2afront.NewUsers(s.client, opts, a2afront.UsersOptions{Gate: gate}); err != nil {
			return err
		}
	}
	var f *a2afront.Front // the front of the account itself (no --issuer)
	if users == nil {
		if f, err = a2afront.New(s.client, opts); err != nil {
			return err
		}
	}
	// A lost XMPP stream ends the server: a supervisor restarts it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	if bearerPath != "" {
		fmt.Fprintf(stderr, "agentgw a2a: bearer token in %s (send \"Authorization: Bearer <token>\")\n", bearerPath)
	}
	keySource := "a key generated at start"
	if *cardKey != "" {
		keySource = "the key in --card-key-file"
	}
	fmt.Fprintf(stderr, "agentgw a2a: cards signed (ES256, kid %s) with %s; public key at %s/jwks.json\n", signer.KeyID(), keySource, base)
	if users != nil {
		fmt.Fprintf(stderr, "agentgw a2a: serving A2A on %s/agents for the users of %s, through %s\n", base, *of.issuer, s.conn.JID().Bare())
		err = users.Serve(ctx, ln)
	} else {
		fmt.Fprintf(stderr, "agentgw a2a: serving A2A on %s/agents as %s\n", base, s.conn.JID().Bare())
		err = f.Serve(ctx, ln, bearer)
	}
	select {
	case <-s.conn.Done():
		return fmt.Errorf("the XMPP connection ended: %v", s.conn.Err())
	default:
	}
	return err
}
