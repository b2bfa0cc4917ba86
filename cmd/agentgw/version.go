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
	fs := newFlags("version", "version [--json]", stdout)
	asJSON := fs.Bool("json", false, "print JSON: version, go and the build settings shown")
	if _, err := parseInterleaved(fs, args); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if *asJSON {
			return printJSON(stdout, map[string]any{"version": "unknown"})
		}
		fmt.Fprintln(stdout, "agentgw (no build information)")
		return nil
	}
	version := info.Main.Version
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	settings := map[string]string{}
	var keys []string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH", "CGO_ENABLED":
			settings[s.Key] = s.Value
			keys = append(keys, s.Key)
		}
	}
	if *asJSON {
		return printJSON(stdout, struct {
			Version  string            `json:"version"`
			Go       string            `json:"go"`
			Settings map[string]string `json:"settings"`
		}{version, info.GoVersion, settings})
	}
	fmt.Fprintf(stdout, "agentgw %s\n", version)
	fmt.Fprintf(stdout, "go       %s\n", info.GoVersion)
	for _, k := range keys {
		fmt.Fprintf(stdout, "%-8s %s\n", k, settings[k])
	}
	return nil
}
