package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/oanbridge"
	"github.com/agentgw/agentgw/oanbridge/oandb"
)

func init() {
	register(command{name: "oan", summary: "pair or unpair an OpenAgentNetwork agent with its OAN account: oan pair|unpair", run: runOAN})
}

const oanSynopsis = `oan pair   --config C --code CODE [--force] AGENT_JID
       agentgw oan pair   --config C --code-env ENVVAR [--force] AGENT_JID
       agentgw oan unpair --config C AGENT_JID

pair redeems a pairing code (made in the OAN web app; 10 minutes, single use)
for the account's connector API key and writes it to the agent's
api_key_file, atomically and with mode 0600. The key is never printed or
logged. An existing key file is kept unless --force is given. A running
gateway picks the new key up at its next connection, and within seconds
when its old key was revoked.

unpair deletes the key file; the endpoint goes unavailable at the next
connection. It does not revoke the key on OAN: do that in the OAN web app
(or DELETE /api-keys/:id) if the key may have leaked.`

func runOAN(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, oanSynopsis, "missing subcommand: pair or unpair", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("oan "+sub, oanSynopsis, stdout)
	cfgPath := configFlag(fs)
	code := fs.String("code", "", "the pairing code (pair)")
	codeEnv := fs.String("code-env", "", "read the pairing code from this environment variable (pair)")
	force := fs.Bool("force", false, "replace an existing key file (pair)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "pair", "unpair":
	default:
		return usagef("unknown subcommand %q", sub)
	}
	if len(pos) != 1 {
		return usagef("oan %s takes exactly one AGENT_JID", sub)
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
	if agent == nil || agent.Backend != oanbridge.Bridge.Section {
		return exitError{code: 1, msg: fmt.Sprintf("%s is not an [agents.oan] agent in %s", ep, *cfgPath)}
	}
	oan := agent.Section.(*oanbridge.Config)
	keyFile := cfg.Path(oan.APIKeyFile)
	if sub == "unpair" {
		if err := os.Remove(keyFile); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return exitError{code: 1, msg: "the agent is not paired: " + keyFile + " does not exist"}
			}
			return exitError{code: 1, msg: "cannot remove the key file: " + err.Error()}
		}
		fmt.Fprintf(stdout, "unpaired %s: removed %s. Revoke the key on OAN too if it may have leaked.\n", ep, keyFile)
		return nil
	}
	c := *code
	if *codeEnv != "" {
		if c != "" {
			return usagef("give --code or --code-env, not both")
		}
		v, ok := os.LookupEnv(*codeEnv)
		if !ok || v == "" {
			return usagef("environment variable %s is not set", *codeEnv)
		}
		c = v
	}
	if c == "" {
		return usagef("oan pair needs --code or --code-env")
	}
	red := backendkit.NewRedactor(nil)
	red.Add(c)
	if !*force {
		if _, err := os.Lstat(keyFile); err == nil {
			return exitError{code: 1, msg: oanbridge.ErrKeyExists.Error()}
		}
	}
	key, user, err := oanbridge.Redeem(ctx, oan.BaseURL, c)
	if err != nil {
		return exitError{code: 1, msg: red.Scrub(err.Error())}
	}
	red.Add(key)
	if err := oanbridge.WriteKey(keyFile, key, *force); err != nil {
		return exitError{code: 1, msg: red.Scrub(err.Error())}
	}
	// The store learns the new key's fingerprint: a revoked or banned
	// status of the old key no longer applies.
	if db, err := openStores(ctx, cfg); err == nil {
		db.OAN.SetStatus(ctx, ep, oandb.StatusOK, oanbridge.KeyID(key))
		db.Close()
	}
	who := ""
	if user != "" {
		who = " (OAN account " + user + ")"
	}
	fmt.Fprintf(stdout, "paired %s%s; the API key was written to %s (mode 0600, key id %s)\n", ep, who, keyFile, oanbridge.KeyID(key))
	return nil
}
