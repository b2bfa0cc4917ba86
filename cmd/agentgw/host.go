package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/endpointhost"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/logging"
	"github.com/agentgw/agentgw/internal/procsec"
	"github.com/agentgw/agentgw/mcpbridge"
	"github.com/agentgw/agentgw/tasks"
)

func init() {
	register(command{name: "host", summary: "run one endpoint anywhere as an XMPP account, self-registered at a gateway", run: runHost})
}

const hostSynopsis = `host --jid BOT@DOMAIN [--password-env VAR | --password-file F] --gateway GATEWAY_DOMAIN
                    (--mcp-command "CMD ARG..." | --mcp-url URL | --config HOST.toml) [flags]

Runs one agent endpoint as an ordinary C2S client of the account BOT@DOMAIN,
from any machine that can reach its XMPP server: no component, no port to
open. The endpoint is the account's bare JID. It

  - generates its manifest from the MCP server's tools and self-registers it
    at GATEWAY_DOMAIN (the spec's Self Registration profile; the gateway must
    list DOMAIN in [xmpp] self_register_domains), re-registering a new
    version whenever the tools change;
  - answers its own disco, manifest, schema, vCard and task IQs with the
    gateway's durable task engine on a local SQLite file (--store): replay,
    recovery after kill -9 (interrupted tasks settle agentgw:interrupted),
    input, cancellation and deadlines;
  - reconnects with backoff, and approves the gateway's presence
    subscription: the gateway lists the endpoint only while it is online.

Callers address the full JID BOT@DOMAIN/RESOURCE (default resource "agent"):
an XMPP server answers IQs sent to a bare account JID itself. Who may see and
invoke it: principals of --local-domain (default DOMAIN), narrowed by
--visible-to / --invocable-by; nobody from other domains.

--config HOST.toml describes the backend like a gateway [[agents]] entry:
  name = "bot"            # optional manifest overrides: title, description, version
  visible_to = ["ops@example.com"]
  [mcp]
  command = ["node", "server.js", "stdio"]   # or url = "https://…/mcp"
  env = { LOG_LEVEL = "info" }               # headers_env / headers_file for url
  [tasks]                                    # optional, as in the gateway's config
  default_timeout_seconds = 600`

func runHost(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("host", hostSynopsis, stdout)
	jidFlag := fs.String("jid", os.Getenv("AGENTGW_JID"), "the endpoint's XMPP account, a bare JID (default $AGENTGW_JID)")
	passwordEnv := fs.String("password-env", "AGENTGW_PASSWORD", "environment variable holding the account password (removed from the environment before the backend starts)")
	passwordFile := fs.String("password-file", "", "file holding the account password (instead of --password-env)")
	server := fs.String("server", "", "HOST:PORT of the XMPP server (default: the JID's domain, port 5222)")
	resource := fs.String("resource", endpointhost.DefaultResource, "resource to bind; callers address JID/RESOURCE")
	gw := fs.String("gateway", "", "gateway domain to self-register at (required unless --unlisted)")
	unlisted := fs.Bool("unlisted", false, "do not self-register anywhere; callers must know the JID")
	mcpCommand := fs.String("mcp-command", "", `stdio MCP server command line, split on spaces (no shell quoting; use --config for arguments with spaces)`)
	mcpURL := fs.String("mcp-url", "", "streamable HTTP MCP server URL")
	cfgPath := fs.String("config", "", "host file describing the backend (see above)")
	storePath := fs.String("store", "agentgw-host.db", "local SQLite file for the endpoint's manifests and tasks")
	var localDomains, visibleTo, invocableBy stringList
	fs.Var(&localDomains, "local-domain", "domain whose principals may see and invoke the endpoint (repeatable; default the JID's domain)")
	fs.Var(&visibleTo, "visible-to", "restrict visibility to this bare JID or domain (repeatable)")
	fs.Var(&invocableBy, "invocable-by", "restrict invocation to this bare JID or domain (repeatable)")
	name := fs.String("name", "", "agent.name override (default: the MCP server's)")
	caFile := fs.String("ca-file", "", "PEM file of a CA to trust for the server's certificate")
	insecure := fs.Bool("insecure-skip-verify", false, "do not verify the server certificate (loopback testing only)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("host takes no arguments")
	}
	if *jidFlag == "" {
		return usagef("--jid is required (or set AGENTGW_JID)")
	}
	ep, err := parseBareJID(*jidFlag)
	if err != nil {
		return usagef("--jid: %v", err)
	}
	if (*gw == "") == !*unlisted {
		return usagef("give --gateway GATEWAY_DOMAIN (or --unlisted to run without a directory listing)")
	}
	n := 0
	for _, s := range []string{*mcpCommand, *mcpURL, *cfgPath} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return usagef("give exactly one of --mcp-command, --mcp-url or --config")
	}
	hf := &config.Host{}
	switch {
	case *cfgPath != "":
		if hf, err = config.LoadHost(*cfgPath, bridges); err != nil {
			return err
		}
		if hf.JID != "" && !strings.EqualFold(hf.JID, ep) {
			return fmt.Errorf("--config %s: jid %q differs from --jid %s", *cfgPath, hf.JID, ep)
		}
	case *mcpCommand != "":
		hf.Backend, hf.Section = mcpbridge.Bridge.Section, &mcpbridge.Config{Command: strings.Fields(*mcpCommand)}
	default:
		hf.Backend, hf.Section = mcpbridge.Bridge.Section, &mcpbridge.Config{URL: *mcpURL}
	}
	hf.JID = ep
	if *name != "" {
		hf.Name = *name
	}
	visibleTo = append(visibleTo, hf.VisibleTo...)
	invocableBy = append(invocableBy, hf.InvocableBy...)
	for _, l := range []struct {
		flag string
		list *stringList
	}{{"--local-domain", &localDomains}, {"--visible-to", &visibleTo}, {"--invocable-by", &invocableBy}} {
		norm, err := config.ParsePrincipals(*l.list)
		if err != nil {
			return usagef("%s %v", l.flag, err)
		}
		*l.list = norm
	}

	// Before anything starts: the MCP server must not find the password in
	// its environment or in ours, nor ptrace us.
	var secretVars []string
	if *passwordFile == "" {
		secretVars = config.TakeSecretEnv(*passwordEnv)
	}
	var password string
	if *passwordFile != "" {
		password, err = config.ReadSecret("", *passwordFile)
	} else {
		password, err = config.ReadSecret(*passwordEnv, "")
	}
	if err != nil {
		return fmt.Errorf("account password: %w", err)
	}
	_, scrubErr := procsec.ScrubEnviron(secretVars)
	dumpErr := procsec.NoDump()
	red := backendkit.NewRedactor(nil)
	red.Add(password)
	log, err := logging.New(stderr, *logFormat, *logLevel, red)
	if err != nil {
		return usagef("%v", err)
	}
	if scrubErr != nil || dumpErr != nil {
		log.Warn("process hardening incomplete; the MCP server may read the account password", "scrub_error", fmt.Sprint(scrubErr), "nodump_error", fmt.Sprint(dumpErr))
	}

	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: *insecure}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca-file %s holds no PEM certificate", *caFile)
		}
		tlsCfg.RootCAs = pool
	}
	bridge, ok := bridges.Lookup(hf.Backend)
	if !ok {
		return fmt.Errorf("no bridge for [%s]", hf.Backend)
	}
	agent := backendkit.NewAgent(&config.Config{Dir: hf.Dir}, hf.Agent)
	agent.Log = log.With("endpoint", ep)
	h, err := endpointhost.New(ctx, endpointhost.Options{
		JID: ep, Resource: *resource, Password: password, Server: *server, TLS: tlsCfg,
		Gateway: *gw, StorePath: *storePath,
		LocalDomains: localDomains, VisibleTo: visibleTo, InvocableBy: invocableBy,
		Tasks: hostTasks(hf.Tasks, hf.MaxRunning),
		Log:   log,
		NewBackend: endpointhost.BridgeBackend(ctx, bridge, agent, ep[strings.LastIndexByte(ep, '@')+1:],
			func() []string { return []string{password} }),
	})
	if err != nil {
		return err
	}
	defer h.Close()
	log.Info("agentgw host starting", "jid", ep, "resource", *resource, "gateway", *gw, "store", *storePath, "pid", os.Getpid())
	if err := h.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("agentgw host stopped")
	return nil
}

// hostTasks maps the host file's [tasks] onto the engine (zero keeps the
// engine's defaults).
func hostTasks(t config.Tasks, maxRunning int) tasks.Config {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	return tasks.Config{
		ReplayWindow: sec(t.ReplaySeconds), Retention: sec(t.RetentionSeconds),
		DefaultTimeout: sec(t.DefaultTimeoutSeconds), InputTimeout: sec(t.InputTimeoutSeconds),
		MaxActive: t.MaxActive, ProgressPerSecond: t.ProgressPerSecond,
		MaxActivePerPrincipal: t.MaxActivePerPrincipal, MaxActivePerDomain: t.MaxActivePerDomain,
		MaxRetainedBytes: t.RetainedBytesPerPrincipal, MaxRunningPerBackend: max(maxRunning, t.MaxRunningPerBackend),
		MaxDelegationDepth: t.MaxDelegationDepth,
	}
}
