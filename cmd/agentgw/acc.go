package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/agentgw/agentgw/accbridge"
	"github.com/agentgw/agentgw/accbridge/accdb"
)

func init() {
	register(command{name: "acc", summary: "agent-control-center connectors: acc init|enroll|list|revoke", run: runACC})
}

const accSynopsis = `acc init   --config C
       agentgw acc enroll --config C --name NAME --out DIR
       agentgw acc list   --config C
       agentgw acc revoke --config C NAME

The gateway is the agent-control-center server that connectors dial into
(WSS on [acc] listen, path /v1/connector, TLS 1.3 with a client certificate
from the gateway's connector CA and a JWT in Authorization: Bearer).

init    creates whichever of the connector CA, the server certificate and
        the JWT signing key ([acc] client_ca_file, cert_file, key_file,
        jwt_key_file) is missing; existing files are kept.
enroll  writes a connector's DIR/ca.crt, client.crt, client.key, token.jwt
        and connector.json ({"connector_id", "url"}), records the connector
        and prints its connector_id. The token is never printed; hand DIR to
        the connector's host over a safe channel.
list    shows every enrolled connector and whether it is revoked.
revoke  revokes a connector; a running gateway closes its live connection
        within a second and refuses it from then on.`

var connectorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func runACC(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, accSynopsis, "missing subcommand: init, enroll, list or revoke", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("acc "+sub, accSynopsis, stdout)
	cfgPath := configFlag(fs)
	name := fs.String("name", "", "enroll: the connector's name (letters, digits, . _ -), as [agents.acc] connector names it")
	out := fs.String("out", "", "enroll: directory to write the connector's files into")
	asJSON := fs.Bool("json", false, "list: print JSON")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	switch sub {
	case "init", "enroll", "list":
		if len(pos) != 0 {
			return usagef("acc %s takes no positional arguments", sub)
		}
	case "revoke":
		if len(pos) != 1 {
			return usagef("acc revoke takes exactly one NAME")
		}
	default:
		return usagef("unknown subcommand %q", sub)
	}
	if sub == "enroll" {
		if !connectorName.MatchString(*name) {
			return usagef("--name is required: 1 to 64 letters, digits, '.', '_' or '-'")
		}
		if *out == "" {
			return usagef("--out DIR is required")
		}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if cfg.ACC == nil {
		return errors.New("the config has no [acc] section; add one (see docs/acc-bridge.md)")
	}
	files := accbridge.FilesOf(cfg)
	if sub == "init" {
		wrote, err := accbridge.Init(files)
		if err != nil {
			return err
		}
		if len(wrote) == 0 {
			fmt.Fprintln(stdout, "acc: everything exists already; nothing written")
		}
		for _, p := range wrote {
			fmt.Fprintln(stdout, "wrote", p)
		}
		return nil
	}
	db, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	st := db.ACC
	switch sub {
	case "enroll":
		if _, ok, err := st.Connector(ctx, *name); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("a connector named %q is already enrolled (revoke it and enroll another name)", *name)
		}
		en, err := accbridge.Enroll(files, *name, *out)
		if err != nil {
			return err
		}
		if err := st.Enroll(ctx, accdb.Connector{Name: *name, ID: en.ConnectorID, CertSHA256: en.CertSHA256,
			CreatedAt: time.Now().UTC().Format(time.RFC3339)}); err != nil {
			return fmt.Errorf("recording the connector: %w", err)
		}
		fmt.Fprintln(stdout, en.ConnectorID)
	case "list":
		cs, err := st.Connectors(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			type conn struct {
				Name      string `json:"name"`
				ID        string `json:"connector_id"`
				Since     string `json:"since"`
				Revoked   bool   `json:"revoked"`
				RevokedAt string `json:"revoked_at,omitempty"`
			}
			list := []conn{}
			for _, c := range cs {
				list = append(list, conn{c.Name, c.ID, c.CreatedAt, c.Revoked(), c.RevokedAt})
			}
			return printJSON(stdout, list)
		}
		if len(cs) == 0 {
			fmt.Fprintln(stdout, "no connectors enrolled")
		}
		for _, c := range cs {
			state := "enrolled"
			if c.Revoked() {
				state = "revoked " + c.RevokedAt
			}
			fmt.Fprintf(stdout, "%s\t%s\t%s\tsince %s\n", c.Name, c.ID, state, c.CreatedAt)
		}
	case "revoke":
		ok, err := st.Revoke(ctx, pos[0], time.Now().UTC().Format(time.RFC3339))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no connector named %q is enrolled", pos[0])
		}
		fmt.Fprintf(stdout, "revoked %s\n", pos[0])
	}
	return nil
}
