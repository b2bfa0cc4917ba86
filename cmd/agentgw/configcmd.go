package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/agentgw/agentgw/internal/config"
)

func init() {
	register(command{name: "config", summary: "describe the config file: config schema", run: runConfig})
}

const configSynopsis = `config schema

schema  prints a JSON Schema (2020-12) of agentgw.toml: every table and key
        the loader reads, with each bridge's [agents.<bridge>] section, as
        the code defines them (editors that read JSON Schema for TOML, such
        as Taplo or Even Better TOML, complete and check keys with it).
        Unknown keys are errors, as in the loader. Ranges and cross-key
        rules are not in the schema: 'agentgw doctor' checks those.`

func runConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, err := subcommand(args, configSynopsis, "missing subcommand: schema", stdout)
	if err != nil {
		return err
	}
	fs := newFlags("config "+sub, configSynopsis, stdout)
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if sub != "schema" {
		return usagef("unknown subcommand %q", sub)
	}
	if len(pos) != 0 {
		return usagef("config schema takes no arguments")
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(config.Schema(bridges))
}
