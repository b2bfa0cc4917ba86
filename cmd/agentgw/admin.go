package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

func init() {
	register(command{name: "admin", summary: "register, activate, deactivate, inspect and remove endpoint manifests in the local store", run: runAdmin})
}

const adminSynopsis = `admin register        --config C [--activate] MANIFEST.json
       agentgw admin activate        --config C --hash HASH ENDPOINT_JID VERSION
       agentgw admin deactivate      --config C ENDPOINT_JID
       agentgw admin status          --config C ENDPOINT_JID
       agentgw admin remove-version  --config C ENDPOINT_JID VERSION
       agentgw admin remove-endpoint --config C ENDPOINT_JID
       agentgw admin self-registered --config C
       agentgw admin ban             --config C [--reason TEXT] ENDPOINT_JID
       agentgw admin unban           --config C ENDPOINT_JID

These work on the gateway's store directly; a running gateway sees the change
within one second. The same operations exist as admin IQs for the JIDs in
[xmpp] admins. Manifests are immutable per (jid, version): registering the
same content again is a no-op, different content under a version is refused.

self-registered lists the endpoints C2S accounts registered for themselves
(agentgw host; [xmpp] self_register_domains), with their active version, last
registration and ban. (Whether one is online only the running gateway knows:
it lists a self-registered endpoint in its directory only while it is.)
ban deactivates a self-registered endpoint and refuses its re-registration
and activation until unban; the ban is stored and survives restarts.
deactivate works on self-registered endpoints as on any other. A ban only
delists: the account can still answer IQs sent to it directly, so disable the
account on its XMPP server to stop it entirely.`

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, adminSynopsis, "missing subcommand", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("admin "+sub, adminSynopsis, stdout)
	cfgPath := configFlag(fs)
	activate := fs.Bool("activate", false, "register: also activate the registered version")
	hash := fs.String("hash", "", "activate: the version's sha-256 manifest hash (base64), as printed by register")
	reason := fs.String("reason", "", "ban: a note kept with the ban")
	asJSON := fs.Bool("json", false, "status, self-registered: print JSON")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	want := map[string]int{"register": 1, "activate": 2, "deactivate": 1, "status": 1, "remove-version": 2, "remove-endpoint": 1,
		"self-registered": 0, "ban": 1, "unban": 1}
	n, ok := want[sub]
	if !ok {
		return usagef("unknown subcommand %q", sub)
	}
	if len(pos) != n {
		return usagef("admin %s takes %d argument(s)", sub, n)
	}
	if sub == "activate" && *hash == "" {
		return usagef("activate needs --hash (the hash printed by register or status)")
	}
	var ep string
	if sub != "register" && sub != "self-registered" {
		if ep, err = parseBareJID(pos[0]); err != nil {
			return usagef("%v", err)
		}
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
	reg, err := directory.NewRegistry(ctx, db.Directory, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	reg.SetDomain(cfg.XMPP.ComponentDomain)
	// Retained tasks in the store pin their versions whether or not a
	// gateway is running; without this, removal would ignore them.
	reg.SetReferenceChecker(storeReferences{ctx: ctx, d: db.Tasks})
	switch sub {
	case "self-registered", "ban", "unban":
		if sub == "ban" && strings.EqualFold(ep[strings.LastIndexByte(ep, '@')+1:], cfg.XMPP.ComponentDomain) {
			return usagef("%s is a virtual endpoint below the component domain; ban applies to self-registered endpoints (use deactivate or remove-endpoint)", ep)
		}
		return adminSelfReg(ctx, sub, ep, *reason, *asJSON, reg, db.SelfReg, stdout)
	case "register":
		raw, err := os.ReadFile(pos[0])
		if err != nil {
			return err
		}
		m, err := reg.Register(ctx, raw)
		if err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "registered %s version %s sha-256 %s\n", m.Endpoint, m.Version, m.Hash)
		if *activate {
			if err := reg.Activate(ctx, m.Endpoint, m.Version, m.Hash); err != nil {
				return adminError(err)
			}
			fmt.Fprintf(stdout, "activated %s version %s\n", m.Endpoint, m.Version)
		}
	case "activate":
		if err := reg.Activate(ctx, ep, pos[1], *hash); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "activated %s version %s\n", ep, pos[1])
	case "deactivate":
		if err := reg.Deactivate(ctx, ep); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "deactivated %s (its manifests are kept)\n", ep)
	case "status":
		st, err := reg.Status(ctx, ep)
		if err != nil {
			return adminError(err)
		}
		active := st.Active
		if active == "" {
			active = "(none: deactivated)"
		}
		if *asJSON {
			type version struct {
				Version   string `json:"version"`
				Hash      string `json:"sha256"`
				Active    bool   `json:"active"`
				Removable bool   `json:"removable"`
			}
			out := struct {
				Endpoint string    `json:"endpoint"`
				Active   string    `json:"active_version"`
				Versions []version `json:"versions"`
			}{Endpoint: st.Endpoint, Active: st.Active, Versions: []version{}}
			for _, v := range st.Versions {
				out.Versions = append(out.Versions, version{v.Version, v.Hash, v.Active, v.Removable})
			}
			return printJSON(stdout, out)
		}
		fmt.Fprintf(stdout, "%s active version %s\n", st.Endpoint, active)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSHA-256\tACTIVE\tREMOVABLE")
		for _, v := range st.Versions {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%v\n", v.Version, v.Hash, v.Active, v.Removable)
		}
		return tw.Flush()
	case "remove-version":
		if err := reg.RemoveVersion(ctx, ep, pos[1]); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "removed %s version %s (a tombstone keeps its hash)\n", ep, pos[1])
	case "remove-endpoint":
		if err := reg.RemoveEndpoint(ctx, ep); err != nil {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "removed endpoint %s\n", ep)
	}
	return nil
}

// adminError explains registry errors to an operator.
func adminError(err error) error {
	var ve *directory.ValidationError
	switch {
	case errors.As(err, &ve):
		return exitError{code: 1, msg: ve.Error()}
	case errors.Is(err, directory.ErrConflict):
		return exitError{code: 1, msg: "this version is already registered with different content (versions are immutable; publish a new version)"}
	case errors.Is(err, directory.ErrHashMismatch):
		return exitError{code: 1, msg: "the hash does not match that version's registered manifest"}
	case errors.Is(err, directory.ErrNotFound):
		return exitError{code: 1, msg: "no such endpoint or version"}
	case errors.Is(err, directory.ErrActive):
		return exitError{code: 1, msg: "the version is active; activate another version or deactivate the endpoint first"}
	case errors.Is(err, directory.ErrReferenced):
		return exitError{code: 1, msg: "retained tasks still reference this version; it can be removed once their retention ends"}
	case errors.Is(err, directory.ErrForeignDomain):
		return exitError{code: 1, msg: strings.TrimPrefix(err.Error(), "directory: ") + ": the XMPP server routes only the component domain to this gateway, so nobody would answer for that endpoint"}
	case errors.Is(err, directory.ErrTooLarge):
		return exitError{code: 1, msg: err.Error()}
	}
	return err
}

// storeReferences is directory.ReferenceChecker over the tasks in the store.
type storeReferences struct {
	ctx context.Context
	d   taskdb.Driver
}

func (s storeReferences) VersionReferenced(endpoint, version string) (bool, error) {
	return s.d.VersionReferenced(s.ctx, endpoint, version)
}

// adminSelfReg lists, bans and unbans self-registered endpoints.
func adminSelfReg(ctx context.Context, sub, ep, reason string, asJSON bool, reg *directory.Registry, st selfregdb.Driver, stdout io.Writer) error {
	switch sub {
	case "ban":
		// Ban first: a registration racing the ban must find it.
		if err := st.Ban(ctx, ep, reason, time.Now()); err != nil {
			return err
		}
		if err := reg.Deactivate(ctx, ep); err != nil && !errors.Is(err, directory.ErrNotFound) {
			return adminError(err)
		}
		fmt.Fprintf(stdout, "banned %s: deactivated, and its self-registration is refused until unban\n", ep)
		return nil
	case "unban":
		ok, err := st.Unban(ctx, ep)
		if err != nil {
			return err
		}
		if !ok {
			return exitError{code: 1, msg: ep + " is not banned"}
		}
		fmt.Fprintf(stdout, "unbanned %s (it is listed again once it registers and activates)\n", ep)
		return nil
	}
	recs, err := st.Records(ctx)
	if err != nil {
		return err
	}
	bans, err := st.Bans(ctx)
	if err != nil {
		return err
	}
	banned := map[string]string{}
	for _, b := range bans {
		banned[b.Endpoint] = b.Reason
	}
	type entry struct {
		Endpoint       string `json:"endpoint"`
		ActiveVersion  string `json:"active_version"`
		LastRegistered string `json:"last_registered,omitempty"`
		Banned         bool   `json:"banned"`
		BanReason      string `json:"ban_reason,omitempty"`
	}
	entries := []entry{}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "ENDPOINT\tACTIVE\tLAST REGISTERED\tBANNED")
	}
	seen := map[string]bool{}
	row := func(ep, last string) {
		active := "(none)"
		e := entry{Endpoint: ep}
		if m, ok := reg.Active(ep); ok {
			active, e.ActiveVersion = m.Version, m.Version
		}
		if last != "-" {
			e.LastRegistered = last
		}
		if r, ok := banned[ep]; ok {
			e.Banned, e.BanReason = true, r
		}
		if asJSON {
			entries = append(entries, e)
			return
		}
		b := "no"
		if r, ok := banned[ep]; ok {
			b = "yes"
			if r != "" {
				b += ": " + r
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ep, active, last, b)
	}
	for _, r := range recs {
		seen[r.Endpoint] = true
		row(r.Endpoint, r.Last.UTC().Format(time.RFC3339))
	}
	for _, b := range bans {
		if !seen[b.Endpoint] {
			row(b.Endpoint, "-")
		}
	}
	if asJSON {
		return printJSON(stdout, entries)
	}
	return tw.Flush()
}
