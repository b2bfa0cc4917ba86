// Command refconnector runs the reference xAgent Connector Server of
// package connectortest as a process, for demos and benchmarks.
//
//	REFCONNECTOR_API_KEY=secret refconnector --listen 127.0.0.1:19090
//
// It prints "listening on http://ADDR" once ready (useful with port 0) and
// stops on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/connectortest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:19090", "address to listen on (loopback; port 0 picks a free one)")
	keyEnv := flag.String("api-key-env", "REFCONNECTOR_API_KEY", "environment variable holding the system API key (empty value: no key required)")
	tokenEnv := flag.String("form-token-env", "", "environment variable holding the token the token_form flow accepts (default: reference-token)")
	cardPath := flag.String("card", "", "Connector Card JSON to serve (default: the built-in reference card)")
	skillPath := flag.String("skill", "", "Skill markdown to serve (default: the built-in reference skill)")
	prefix := flag.String("path-prefix", "", "serve every endpoint below this path prefix")
	lease := flag.Duration("lease", time.Hour, "connector_id lease after the last data plane disconnects")
	verbose := flag.Bool("v", false, "log protocol events to stderr")
	flag.Parse()

	o := connectortest.Options{APIKey: os.Getenv(*keyEnv), PathPrefix: *prefix, LeaseGrace: *lease}
	if *tokenEnv != "" {
		o.FormToken = os.Getenv(*tokenEnv)
	}
	if *cardPath != "" {
		b, err := os.ReadFile(*cardPath)
		if err != nil {
			fail("cannot read the card: %v", err)
		}
		o.Card = b
	}
	if *skillPath != "" {
		b, err := os.ReadFile(*skillPath)
		if err != nil {
			fail("cannot read the skill: %v", err)
		}
		o.Skill = b
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	s, err := connectortest.Listen(*listen, o)
	if err != nil {
		fail("%v", err)
	}
	fmt.Printf("listening on %s\n", s.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Close()
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "refconnector: "+format+"\n", a...)
	os.Exit(1)
}
