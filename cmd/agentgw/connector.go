package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge"
	"github.com/agentgw/agentgw/internal/logging"
)

func init() {
	register(command{name: "connector", summary: "authenticate or log out an xAgent connector agent: connector auth|logout|flows", run: runConnector})
}

const connectorSynopsis = `connector flows  --config C AGENT_JID
       agentgw connector auth   --config C [--flow ID] [--field k=v]... [--field-env k=ENVVAR]... AGENT_JID
       agentgw connector logout --config C AGENT_JID

auth runs one of the connector's auth flows (a form, or a QR login that is
printed in the terminal and polled until scanned). Secret form fields are
never echoed or logged: pass them with --field-env so they stay out of the
shell history. The running gateway notices the new channel binding within a
second and publishes the connector's tools.`

func runConnector(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, connectorSynopsis, "missing subcommand: flows, auth or logout", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("connector "+sub, connectorSynopsis, stdout)
	cfgPath := configFlag(fs)
	flow := fs.String("flow", "", "auth flow id (default: the only flow, or the first form flow)")
	var fields, fieldEnvs stringList
	fs.Var(&fields, "field", "form field k=v (repeatable)")
	fs.Var(&fieldEnvs, "field-env", "form field k=ENVVAR, value read from the environment (repeatable)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "flows", "auth", "logout":
	default:
		return usagef("unknown subcommand %q", sub)
	}
	if len(pos) != 1 {
		return usagef("connector %s takes exactly one AGENT_JID", sub)
	}
	ep, err := parseBareJID(pos[0])
	if err != nil {
		return usagef("%v", err)
	}
	values := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return usagef("--field %q is not k=v", f)
		}
		values[k] = v
	}
	secrets := []string{}
	for _, f := range fieldEnvs {
		k, env, ok := strings.Cut(f, "=")
		if !ok || k == "" || env == "" {
			return usagef("--field-env needs k=ENVVAR")
		}
		v, ok := os.LookupEnv(env)
		if !ok {
			return usagef("environment variable %s (for field %s) is not set", env, k)
		}
		values[k] = v
		secrets = append(secrets, v)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	agent := agentByJID(cfg, ep)
	if agent == nil || agent.Backend != connectorbridge.Bridge.Section {
		return exitError{code: 1, msg: fmt.Sprintf("%s is not an [agents.connector] agent in %s", ep, *cfgPath)}
	}
	red := backendkit.NewRedactor(nil)
	red.Add(secrets...)
	for _, v := range values {
		red.Add(v)
	}
	log, _ := logging.New(stderr, "text", "warn", red)
	o, err := connectorbridge.AgentOptions(cfg, *agent)
	if err != nil {
		return err
	}
	red.Add(o.APIKey)
	db, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	o.Endpoint, o.Bindings, o.Logger = ep, db.Bindings, log
	o.Secrets = func() []string { return append([]string{o.APIKey}, secrets...) }
	o.ShowQR = printQR
	c, err := connectorbridge.NewClient(o)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Open(ctx); err != nil {
		return fmt.Errorf("cannot reach the connector: %s", red.Scrub(err.Error()))
	}
	switch sub {
	case "flows":
		for _, f := range c.Flows() {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", f.ID, f.Type, f.Title)
			for _, fld := range f.Fields {
				fmt.Fprintf(stdout, "  field %+v\n", fld)
			}
		}
		return nil
	case "auth":
		if err := c.Auth(ctx, *flow, values, stdout); err != nil {
			return exitError{code: 1, msg: red.Scrub(err.Error())}
		}
		return nil
	case "logout":
		if err := c.Logout(ctx, stdout); err != nil {
			return exitError{code: 1, msg: red.Scrub(err.Error())}
		}
		return nil
	}
	return nil
}
