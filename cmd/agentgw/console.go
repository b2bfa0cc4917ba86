package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/agentgw/agentgw/console"
	"github.com/agentgw/agentgw/gateway"
	"github.com/agentgw/agentgw/internal/config"
)

// startConsole serves the operator web console when [console] listen is
// set; the returned wait blocks until it stopped after ctx ended.
func startConsole(ctx context.Context, cfg *config.Config, gw *gateway.Gateway, log *slog.Logger) (wait func(), err error) {
	if !cfg.Console.Enabled() {
		return func() {}, nil
	}
	srv, err := newConsole(cfg, gw, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Console.Listen)
	if err != nil {
		return nil, fmt.Errorf("[console] listen: %w", err)
	}
	scheme := "http"
	if cfg.Console.TLS() {
		scheme = "https"
	}
	log.Info("console listening", "url", scheme+"://"+ln.Addr().String()+"/")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx, ln, cfg.Path(cfg.Console.TLSCert), cfg.Path(cfg.Console.TLSKey)); err != nil {
			log.Error("console stopped", "err", err)
		}
	}()
	return wg.Wait, nil
}

// newConsole wires the console to the gateway's parts: the admin commands'
// code, the directory, the task engine and the stores.
func newConsole(cfg *config.Config, gw *gateway.Gateway, log *slog.Logger) (*console.Server, error) {
	token, err := cfg.ConsoleToken()
	if err != nil {
		return nil, err
	}
	d := console.Deps{
		IsAdmin: gw.Policy.IsAdmin, Token: token, RouteResource: gateway.ConsoleResource,
		Directory: gw.Registry, Admin: gw.AdminCommands, Engine: gw.Engine, Tasks: gw.Store.Tasks,
		Grants: gw.Store.Grants, SelfReg: gw.Store.SelfReg, Sessions: gw.Store.ConsoleSessions, Health: gw.BackendState,
		Bridges: consoleBridges(gw), Cluster: consoleCluster(gw),
		Secure: cfg.Console.TLS(), SessionTTL: cfg.SessionTTL(),
		RequestsPerSecond: cfg.Console.RequestsPerSecond, RequestsBurst: cfg.Console.RequestsBurst, Log: log.With("part", "console"),
	}
	if len(cfg.XMPP.Admins) > 0 {
		d.TokenUser, _ = config.ParsePrincipal(cfg.XMPP.Admins[0])
	}
	if cfg.Console.LoginServer != "" {
		d.CheckPassword = console.XMPPLogin(cfg.Console.LoginServer, cfg.Path(cfg.Console.LoginCAFile))
	}
	srv, err := console.New(d)
	if err == nil {
		gw.TaskEvents.Watch(srv.TaskChanged)
	}
	return srv, err
}

// consoleBridges and consoleCluster adapt the gateway's lists to the
// console's rows.
func consoleBridges(gw *gateway.Gateway) func(context.Context) []console.BridgeRow {
	return func(ctx context.Context) []console.BridgeRow {
		var out []console.BridgeRow
		for _, b := range gw.BridgeList(ctx) {
			out = append(out, console.BridgeRow{Kind: b.Kind, Name: b.Name, Endpoint: b.Endpoint, State: b.State, Detail: b.Detail})
		}
		return out
	}
}

func consoleCluster(gw *gateway.Gateway) func(context.Context) (*console.ClusterView, error) {
	return func(ctx context.Context) (*console.ClusterView, error) {
		members, leases, ok, err := gw.ClusterMembers(ctx)
		if !ok {
			return nil, err
		}
		v := &console.ClusterView{}
		for _, m := range members {
			v.Members = append(v.Members, console.MemberRow{Instance: m.Name, Joined: m.Joined, Expires: m.Expires, Live: m.Live, Tasks: m.Unsettled})
		}
		for _, l := range leases {
			v.Leases = append(v.Leases, console.LeaseRow{Name: l.Name, Holder: l.Holder, Expires: l.Expires, Live: l.Live})
		}
		return v, err
	}
}
