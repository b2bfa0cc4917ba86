package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/agentgw/agentgw/federation"
)

func init() {
	register(command{name: "trust", summary: "grant, revoke or list federation trust for remote domains and JIDs", run: runTrust})
}

const trustSynopsis = `trust grant  --config C (--visibility | --invocation)... [--endpoint JID] PRINCIPAL
       agentgw trust revoke --config C [--visibility] [--invocation] [--endpoint JID] PRINCIPAL
       agentgw trust list   --config C

PRINCIPAL is a remote domain (partner.example) or bare JID (bot@partner.example).
Remote principals see and invoke nothing until granted. Visibility (discovery,
manifests, schemas, search, vCards, presence) and invocation are granted
separately. A running gateway applies changes within one second.`

func runTrust(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, trustSynopsis, "missing subcommand: grant, revoke or list", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("trust "+sub, trustSynopsis, stdout)
	cfgPath := configFlag(fs)
	vis := fs.Bool("visibility", false, "the visibility scope (discovery and metadata)")
	inv := fs.Bool("invocation", false, "the invocation scope (invoke)")
	endpoint := fs.String("endpoint", "", "limit the grant to one endpoint JID (default: every endpoint)")
	asJSON := fs.Bool("json", false, "list: print JSON")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	var scope federation.Scope
	if *vis {
		scope |= federation.ScopeVisibility
	}
	if *inv {
		scope |= federation.ScopeInvocation
	}
	ep := ""
	if *endpoint != "" {
		if ep, err = parseBareJID(*endpoint); err != nil {
			return usagef("--endpoint: %v", err)
		}
	}
	switch sub {
	case "grant", "revoke":
		if len(pos) != 1 {
			return usagef("%s takes exactly one PRINCIPAL", sub)
		}
	case "list":
		if len(pos) != 0 {
			return usagef("list takes no arguments")
		}
	default:
		return usagef("unknown subcommand %q: use grant, revoke or list", sub)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	db, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	st := db.Grants
	switch sub {
	case "grant":
		if scope == 0 {
			return usagef("grant needs --visibility, --invocation or both")
		}
		p, err := parsePrincipal(pos[0])
		if err != nil {
			return usagef("%v", err)
		}
		policy := federation.New(cfg.XMPP.LocalDomains, nil, nil)
		if policy.IsLocal(p) {
			fmt.Fprintf(stderr, "note: %s is in local_domains; local principals are governed by the config, not by grants\n", p)
		}
		if err := st.Grant(ctx, federation.Grant{Principal: p, Endpoint: ep, Scope: scope}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "granted %s to %s on %s\n", federation.ScopeString(scope), p, endpointLabel(ep))
	case "revoke":
		if scope == 0 {
			scope = federation.ScopeVisibility | federation.ScopeInvocation
		}
		p, err := parsePrincipal(pos[0])
		if err != nil {
			return usagef("%v", err)
		}
		removed, err := st.Revoke(ctx, p, ep, scope)
		if err != nil {
			return err
		}
		if !removed {
			return exitError{code: 1, msg: fmt.Sprintf("%s held no %s grant on %s", p, federation.ScopeString(scope), endpointLabel(ep))}
		}
		fmt.Fprintf(stdout, "revoked %s from %s on %s\n", federation.ScopeString(scope), p, endpointLabel(ep))
	case "list":
		gs, err := st.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			type grant struct {
				Principal string   `json:"principal"`
				Endpoint  string   `json:"endpoint,omitempty"`
				Scope     []string `json:"scope"`
				Since     string   `json:"since"`
			}
			out := []grant{}
			for _, g := range gs {
				var scope []string
				if g.Scope&federation.ScopeVisibility != 0 {
					scope = append(scope, "visibility")
				}
				if g.Scope&federation.ScopeInvocation != 0 {
					scope = append(scope, "invocation")
				}
				out = append(out, grant{g.Principal, g.Endpoint, scope, g.Created.UTC().Format(time.RFC3339)})
			}
			return printJSON(stdout, out)
		}
		if len(gs) == 0 {
			fmt.Fprintln(stdout, "no grants: remote domains see and invoke nothing")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PRINCIPAL\tENDPOINT\tSCOPE\tSINCE")
		for _, g := range gs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Principal, endpointLabel(g.Endpoint), federation.ScopeString(g.Scope), g.Created.Format("2006-01-02 15:04:05Z07:00"))
		}
		return tw.Flush()
	}
	return nil
}

func endpointLabel(ep string) string {
	if ep == "" {
		return "every endpoint"
	}
	return ep
}
