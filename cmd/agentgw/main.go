// Command agentgw is the XMPP agent gateway: it publishes agents as XMPP
// addresses, backs them with MCP servers and xAgent connectors, runs every
// invocation as a durable task, and lets MCP hosts call XMPP agents.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands []command

func register(c command) { commands = append(commands, c) }

// usageError is a mistake in the command line; it prints help and exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		printUsage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue usageError
		var ex exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errHelpShown):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "agentgw %s: %s\nRun 'agentgw %s --help' for usage.\n", c.name, ue.msg, c.name)
			return 2
		case errors.As(err, &ex):
			if ex.msg != "" {
				fmt.Fprintf(stderr, "agentgw %s: %s\n", c.name, ex.msg)
			}
			return ex.code
		default:
			fmt.Fprintf(stderr, "agentgw %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "agentgw: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return 2
}

// exitError ends the process with a specific code.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func printUsage(w io.Writer) {
	fmt.Fprintln(w, `agentgw is an XMPP agent gateway (XEP-0114 component).

Usage: agentgw <command> [flags] [arguments]

Operator commands (take --config PATH):`)
	list := func(names ...string) {
		byName := map[string]command{}
		for _, c := range commands {
			byName[c.name] = c
		}
		for _, n := range names {
			if c, ok := byName[n]; ok {
				fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
			}
		}
	}
	list("serve", "admin", "trust", "connector", "doctor")
	fmt.Fprintln(w, "\nCaller commands (log in as an XMPP account: --jid, --password-env/--password-file, --server):")
	list("agents", "tools", "call", "task", "mcp")
	fmt.Fprintln(w, "\nOther:")
	var rest []string
	known := map[string]bool{"serve": true, "admin": true, "trust": true, "connector": true, "doctor": true,
		"agents": true, "tools": true, "call": true, "task": true, "mcp": true}
	for _, c := range commands {
		if !known[c.name] {
			rest = append(rest, c.name)
		}
	}
	sort.Strings(rest)
	list(rest...)
	fmt.Fprintln(w, "\nRun 'agentgw <command> --help' for a command's flags.")
}

// splitCommaList splits "a,b" into trimmed non-empty parts.
func splitCommaList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
