// Command refconnector runs the reference agent-control-center connector
// (accbridge/acctest) as its own process, for the end-to-end tests.
//
//	refconnector --dir ENROLL_DIR [--agents JSON] [--heartbeat 30s] [--url wss://…] [--once] [--one-run]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentgw/agentgw/accbridge/acctest"
)

func main() {
	dir := flag.String("dir", "", "enrollment directory written by `agentgw acc enroll`")
	agents := flag.String("agents", `[{"agent_id":"agent-1","runtime":"hermes","model":"test-model","tools":["terminal","browser"],"max_turns":60,"supports":["streaming","cancellation","handoff"]}]`, "agents to declare, as JSON")
	hb := flag.Duration("heartbeat", 30*time.Second, "heartbeat period")
	url := flag.String("url", "", "override the url of connector.json")
	once := flag.Bool("once", false, "exit when the connection ends instead of reconnecting")
	oneRun := flag.Bool("one-run", false, "one active run per agent: answer 4005 to a create_run for a busy agent")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "refconnector: --dir is required")
		os.Exit(2)
	}
	var as []acctest.Agent
	if err := json.Unmarshal([]byte(*agents), &as); err != nil {
		fmt.Fprintln(os.Stderr, "refconnector: --agents:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := acctest.Run(ctx, acctest.Options{Dir: *dir, URL: *url, Heartbeat: *hb, Agents: as, Log: os.Stdout, OneRunPerAgent: *oneRun}, !*once)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refconnector:", err)
		os.Exit(1)
	}
}
