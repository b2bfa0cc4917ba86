package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(command{name: "version", summary: "print build information", run: runVersion})
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", stdout)
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "agentgw (no build information)")
		return nil
	}
	version := info.Main.Version
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	fmt.Fprintf(stdout, "agentgw %s\n", version)
	fmt.Fprintf(stdout, "go       %s\n", info.GoVersion)
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH", "CGO_ENABLED":
			fmt.Fprintf(stdout, "%-8s %s\n", s.Key, s.Value)
		}
	}
	return nil
}
