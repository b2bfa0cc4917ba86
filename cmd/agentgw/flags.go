package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

var errHelpShown = errors.New("help shown")

// newFlags makes a flag set whose usage shows the command's synopsis.
func newFlags(name, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: agentgw %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may stand before, between or after
// positional arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelpShown
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// subcommand returns the subcommand of a command that has them, or prints
// the synopsis for --help (errHelpShown) and for a missing subcommand (a
// usage error saying missing).
func subcommand(args []string, synopsis, missing string, stdout io.Writer) (string, error) {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprintf(stdout, "Usage: agentgw %s\n", synopsis)
		if len(args) == 0 {
			return "", usagef("%s", missing)
		}
		return "", errHelpShown
	}
	return args[0], nil
}
