package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/logging"
	"github.com/agentgw/agentgw/internal/procsec"
)

func init() {
	register(command{name: "serve", summary: "run the gateway as an XEP-0114 component of the configured XMPP server", run: runServe})
}

// exitFatal is the exit status for errors a restart cannot fix (a wrong
// component secret, another session holding the domain). The systemd unit
// does not restart on it.
const exitFatal = 3

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve --config agentgw.toml", stdout)
	cfgPath := configFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve takes no arguments")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if stopProfile := startCPUProfile(stderr); stopProfile != nil {
		defer stopProfile()
	}
	if os.Getenv("GOGC") == "" {
		// The directory index is long-lived and the garbage of each
		// request short-lived: collecting at 50 % growth instead of 100 %
		// keeps a 10,000-endpoint gateway well under 100 MB RSS for a few
		// percent of CPU. GOGC overrides it.
		debug.SetGCPercent(50)
	}
	// Before anything is started: children must not find the secrets in
	// their environment or in ours (/proc/<pid>/environ), nor ptrace us.
	// The order matters: a non-dumpable process that is not root can no
	// longer open its own /proc/self/mem, which the scrub writes through.
	secretVars := config.TakeSecretEnv(cfg.SecretEnvNames()...)
	scrubbed, scrubErr := procsec.ScrubEnviron(secretVars)
	dumpErr := procsec.NoDump()
	redactor := backendkit.NewRedactor(nil)
	redactor.Add(gateway.Secrets(cfg)...)
	log, err := logging.New(stderr, cfg.Log.Format, cfg.Log.Level, redactor)
	if err != nil {
		return fmt.Errorf("[log]: %w", err)
	}
	if scrubErr != nil || dumpErr != nil {
		log.Warn("process hardening incomplete; MCP servers running as this user may read the gateway's secrets", "scrub_error", fmt.Sprint(scrubErr), "nodump_error", fmt.Sprint(dumpErr))
	} else {
		log.Info("process hardened: non-dumpable, secret variables removed from the environment", "secret_vars", len(secretVars), "scrubbed", scrubbed)
	}
	gw, err := gateway.New(ctx, cfg, log, &gateway.Options{Redactor: redactor})
	if err != nil {
		return err
	}
	defer gw.Close()
	log.Info("agentgw starting", "component_domain", cfg.XMPP.ComponentDomain, "server", cfg.XMPP.Server, "store", gw.Store.Where, "store_driver", gw.Store.Driver, "instance", cfg.Cluster.Instance, "agents", len(cfg.Agents), "pid", os.Getpid())
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	waitConsole, err := startConsole(ctx, cfg, gw, log)
	if err != nil {
		return err
	}
	err = gw.Run(ctx)
	stop()
	waitConsole()
	var fatal *component.FatalError
	if errors.As(err, &fatal) {
		return exitError{code: exitFatal, msg: fatal.Error()}
	}
	if err != nil {
		return err
	}
	log.Info("agentgw stopped")
	return nil
}

// startCPUProfile writes a CPU profile of the whole run to the file named by
// AGENTGW_CPUPROFILE, for benchmarks that measure `agentgw serve` as a
// process of its own (issue 34's cost model); it is written on a clean
// exit (SIGTERM). Unset, it does nothing.
func startCPUProfile(stderr io.Writer) func() {
	path := os.Getenv("AGENTGW_CPUPROFILE")
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "agentgw: cpu profile: %v\n", err)
		return nil
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(stderr, "agentgw: cpu profile: %v\n", err)
		f.Close()
		return nil
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
