package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/internal/config"
)

// callerFlags are the C2S login flags shared by agents, tools, call, task
// and mcp.
type callerFlags struct {
	jid          string
	passwordEnv  string
	passwordFile string
	server       string
	gateways     stringList
	caFile       string
	insecure     bool
	timeout      time.Duration
	verbose      bool
}

func addCallerFlags(fs *flag.FlagSet) *callerFlags {
	f := &callerFlags{}
	fs.StringVar(&f.jid, "jid", os.Getenv("AGENTGW_JID"), "XMPP account to log in as (default $AGENTGW_JID)")
	fs.StringVar(&f.passwordEnv, "password-env", "AGENTGW_PASSWORD", "environment variable holding the account password")
	fs.StringVar(&f.passwordFile, "password-file", "", "file holding the account password (instead of --password-env)")
	fs.StringVar(&f.server, "server", "", "HOST:PORT of the XMPP server (default: the JID's domain, port 5222)")
	fs.Var(&f.gateways, "gateway", "gateway JID to use (repeatable; default: discovered from the server)")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM file of a CA to trust for the server's certificate (SSL_CERT_FILE works too)")
	fs.BoolVar(&f.insecure, "insecure-skip-verify", false, "do not verify the server certificate (loopback testing only)")
	fs.DurationVar(&f.timeout, "iq-timeout", 30*time.Second, "timeout for each IQ round trip")
	fs.BoolVar(&f.verbose, "v", false, "log protocol diagnostics to stderr")
	return f
}

// session is a logged-in caller.
type session struct {
	conn   *xmppclient.Client
	client *agentclient.Client
	flags  *callerFlags
}

func (f *callerFlags) connect(ctx context.Context, stderr io.Writer) (*session, error) {
	if f.jid == "" {
		return nil, usagef("--jid is required (or set AGENTGW_JID)")
	}
	password, err := f.password()
	if err != nil {
		return nil, err
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.insecure {
		tlsCfg.InsecureSkipVerify = true
	}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
		}
		tlsCfg.RootCAs = pool
	}
	log := f.logger(stderr)
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := xmppclient.Dial(dialCtx, xmppclient.Options{
		JID: f.jid, Password: password, Server: f.server, TLS: tlsCfg, IQTimeout: f.timeout, Presence: true,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot log in as %s: %w", f.jid, err)
	}
	c := agentclient.New(conn, log)
	c.IQTimeout = f.timeout
	return &session{conn: conn, client: c, flags: f}, nil
}

// logger writes diagnostics to stderr: warnings, or everything with -v.
func (f *callerFlags) logger(stderr io.Writer) *slog.Logger {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// connectFront is the common start of the caller fronts (`mcp`, `a2a`):
// the logged-in session, the --gateway JIDs (nil without the flag: the
// fronts' catalog then discovers gateways on every refresh) and the
// diagnostics logger.
func (f *callerFlags) connectFront(ctx context.Context, stderr io.Writer) (*session, []jid.JID, *slog.Logger, error) {
	s, err := f.connect(ctx, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	var gws []jid.JID
	if len(f.gateways) > 0 {
		if gws, err = s.gateways(ctx); err != nil {
			s.Close()
			return nil, nil, nil, err
		}
	}
	return s, gws, f.logger(stderr), nil
}

func (f *callerFlags) password() (string, error) {
	if f.passwordFile != "" {
		return config.ReadSecret("", f.passwordFile)
	}
	return config.ReadSecret(f.passwordEnv, "")
}

func (s *session) Close() { s.conn.Close() }

// gateways returns the --gateway JIDs, or discovers them on the account's
// server.
func (s *session) gateways(ctx context.Context) ([]jid.JID, error) {
	var out []jid.JID
	for _, g := range s.flags.gateways {
		j, err := jid.Parse(g)
		if err != nil {
			return nil, usagef("--gateway %q is not a JID", g)
		}
		out = append(out, j)
	}
	if len(out) > 0 {
		return out, nil
	}
	found, err := s.client.FindGateways(ctx, s.conn.JID().Domain())
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, errors.New("no agent gateway found on the server's disco#items; name one with --gateway")
	}
	return found, nil
}
