package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"mellium.im/xmpp/jid"
)

func init() {
	register(command{name: "agents", summary: "list the agents the account can see (directory, or search with --search)", run: runAgents})
	register(command{name: "tools", summary: "show an agent's pinned manifest and tools", run: runTools})
}

func runAgents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agents", "agents [--gateway JID] [--search TEXT] [--json] --jid JID", stdout)
	cf := addCallerFlags(fs)
	search := fs.String("search", "", "search the directory (jabber:iq:search) for TEXT instead of listing")
	asJSON := fs.Bool("json", false, "print JSON")
	pageSize := fs.Int("page-size", 50, "RSM page size")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("agents takes no arguments")
	}
	s, err := cf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	gws, err := s.gateways(ctx)
	if err != nil {
		return err
	}
	type row struct {
		Gateway string `json:"gateway"`
		JID     string `json:"jid"`
		Name    string `json:"name"`
	}
	var rows []row
	for _, gw := range gws {
		if *search != "" {
			after := ""
			for {
				page, err := s.client.SearchPage(ctx, gw, *search, *pageSize, after)
				if err != nil {
					return fmt.Errorf("searching %s: %w", gw, err)
				}
				for _, it := range page.Items {
					rows = append(rows, row{gw.String(), it.JID, it.Name})
				}
				if len(page.Items) == 0 || page.Last == "" || (page.Count >= 0 && len(rows) >= page.Count) {
					break
				}
				after = page.Last
			}
			continue
		}
		items, err := s.client.AllItems(ctx, gw, "", *pageSize)
		if err != nil {
			return fmt.Errorf("listing %s: %w", gw, err)
		}
		for _, it := range items {
			rows = append(rows, row{gw.String(), it.JID, it.Name})
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no agents visible to this account")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tNAME\tGATEWAY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.JID, r.Name, r.Gateway)
	}
	return tw.Flush()
}

func runTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tools", "tools [--json] [--version V] --jid JID AGENT_JID", stdout)
	cf := addCallerFlags(fs)
	asJSON := fs.Bool("json", false, "print the pinned manifest JSON")
	version := fs.String("version", "", "an exact manifest version (default: the active one)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("tools takes exactly one AGENT_JID")
	}
	ep, err := jid.Parse(pos[0])
	if err != nil || ep.Localpart() == "" {
		return usagef("%q is not an agent JID", pos[0])
	}
	s, err := cf.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	info, err := s.client.Endpoint(ctx, ep)
	if err != nil {
		return fmt.Errorf("%s: %w", ep, err)
	}
	m, err := s.client.GetManifest(ctx, ep, *version)
	if err != nil {
		return fmt.Errorf("%s manifest: %w", ep, err)
	}
	if *asJSON {
		_, err := fmt.Fprintln(stdout, string(m.JSON))
		return err
	}
	title := info.ServerTitle
	if title == "" {
		title = info.ServerName
	}
	fmt.Fprintf(stdout, "%s — %s\n", ep, title)
	if info.Description != "" {
		fmt.Fprintf(stdout, "  %s\n", info.Description)
	}
	fmt.Fprintf(stdout, "  version %s  manifest sha-256 %s (verified)\n\n", m.Version, m.Hash)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tTITLE\tDESCRIPTION")
	for _, t := range m.Doc.Tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Title, oneLine(t.Description, 70))
	}
	return tw.Flush()
}

func oneLine(s string, max int) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\r' || r == '\t' {
			r = ' '
		}
		out = append(out, r)
		if len(out) >= max {
			return string(out) + "…"
		}
	}
	return string(out)
}
