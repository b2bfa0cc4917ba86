package xmppharness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ProsodyOptions configure LaunchProsody. Zero values take the defaults.
type ProsodyOptions struct {
	Domain          string // default example.test
	ComponentDomain string // default agents.<Domain>
	ComponentSecret string // random if empty
	Interface       string // default 127.0.0.1
	Dir             string // default a new temp dir
	// S2S listens on Interface:5269 and enables dialback, resolving peer
	// domains only through Hosts (no DNS query leaves the machine).
	S2S   bool
	Hosts map[string]string // domain -> IP, written to the lua-unbound hosts file
	// Debug logs at debug level instead of info.
	Debug bool
	// HTTPUpload adds the XEP-0363 service upload.<Domain>
	// (mod_http_file_share) on a plain-HTTP port of Interface. Prosody
	// lets every local host upload, the component included, when
	// http_file_share_access is unset; it is set here to the VirtualHost
	// and the component domain so the rule is explicit.
	HTTPUpload bool
	// UploadSizeLimit is http_file_share_size_limit; default 10 MiB.
	UploadSizeLimit int64
	// Modules are extra modules_enabled entries (for example "blocklist",
	// XEP-0191, for the messaging tests).
	Modules []string
	// DisabledModules are modules_disabled entries (for example
	// "offline": a message to an offline user then bounces with
	// service-unavailable instead of being stored).
	DisabledModules []string
	// WebSocket enables RFC 7395 XMPP over WebSocket (mod_websocket) on a
	// plain-HTTP port of Interface, for browser clients; the URL is
	// Server.WebSocketURL. Any page origin may connect. Not together with
	// HTTPUpload.
	WebSocket bool
}

// LaunchProsody writes a private config and starts Prosody, returning once
// its C2S and component ports (and S2S, if enabled) accept connections.
func LaunchProsody(ctx context.Context, o ProsodyOptions) (*Server, error) {
	if _, err := exec.LookPath("prosody"); err != nil {
		return nil, fmt.Errorf("%w: prosody", ErrNotInstalled)
	}
	if o.S2S {
		// Without lua-unbound Prosody falls back to its own DNS client, which
		// ignores the hosts file: federation would silently query real DNS.
		if m, _ := filepath.Glob("/usr/lib/*/lua/*/lunbound.so"); len(m) == 0 {
			return nil, fmt.Errorf("%w: lua-unbound", ErrNotInstalled)
		}
	}
	if err := serverDefaults(&o.Domain, &o.ComponentDomain, &o.ComponentSecret, &o.Interface); err != nil {
		return nil, err
	}
	if net.ParseIP(o.Interface) == nil {
		return nil, fmt.Errorf("xmppharness: Interface must be an IP address")
	}
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "agentgw-prosody-"); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	if err := mkdirs(certs, filepath.Join(dir, "data")); err != nil {
		return nil, err
	}
	crt, key, err := makeCert(ctx, certs, o.Domain, o.ComponentDomain)
	if err != nil {
		return nil, err
	}
	c2sPort, err := freePort(o.Interface)
	if err != nil {
		return nil, err
	}
	compPort, err := freePort(o.Interface)
	if err != nil {
		return nil, err
	}
	snippet, err := RenderSnippet(ProsodySnippet, SnippetData{
		ComponentDomain:    o.ComponentDomain,
		ComponentSecret:    o.ComponentSecret,
		ComponentPort:      compPort,
		ComponentInterface: o.Interface,
	})
	if err != nil {
		return nil, err
	}
	snippetPath := filepath.Join(dir, "agentgw-component.cfg.lua")
	if err := os.WriteFile(snippetPath, []byte(snippet), 0o600); err != nil {
		return nil, err
	}

	level := "info"
	if o.Debug {
		level = "debug"
	}
	logPath := filepath.Join(dir, "prosody.log")
	extraModules := ""
	if o.S2S {
		extraModules = `"dialback"; `
	}
	for _, m := range o.Modules {
		extraModules += fmt.Sprintf("%q; ", m)
	}
	httpAddr, uploadDomain, uploadComponent, httpLines := "", "", "", "http_ports = {}\n"
	wsURL := ""
	if o.WebSocket && o.HTTPUpload {
		return nil, fmt.Errorf("xmppharness: WebSocket and HTTPUpload together are not supported")
	}
	if o.WebSocket {
		port, err := freePort(o.Interface)
		if err != nil {
			return nil, err
		}
		httpAddr = net.JoinHostPort(o.Interface, strconv.Itoa(port))
		wsURL = "ws://" + httpAddr + "/xmpp-websocket"
		extraModules += `"websocket"; `
		// Requests name the IP address, not the VirtualHost: route them to
		// it. The page is served from another port, so another origin.
		httpLines = fmt.Sprintf(`http_ports = { %d }
http_interfaces = { %q }
http_default_host = %q
consider_websocket_secure = true
cross_domain_websocket = true
`, port, o.Interface, o.Domain)
	}
	if o.HTTPUpload {
		port, err := freePort(o.Interface)
		if err != nil {
			return nil, err
		}
		limit := o.UploadSizeLimit
		if limit <= 0 {
			limit = 10 << 20
		}
		httpAddr = net.JoinHostPort(o.Interface, strconv.Itoa(port))
		uploadDomain = "upload." + o.Domain
		// A plain-HTTP listener for the upload component (instead of the
		// default http_ports = {}); http_external_url makes the slot URLs
		// name an address the tests can reach.
		httpLines = fmt.Sprintf(`http_ports = { %d }
http_interfaces = { %q }
http_external_url = "http://%s/"
-- Requests name 127.0.0.1, not the upload host: route them to it.
http_default_host = %q
`, port, o.Interface, httpAddr, "upload."+o.Domain)
		uploadComponent = fmt.Sprintf(`
Component %q "http_file_share"
	http_file_share_size_limit = %d
	http_file_share_daily_quota = %d
	http_file_share_access = { %q, %q }
`, uploadDomain, limit, limit*100, o.Domain, o.ComponentDomain)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `-- Generated by xmppharness.
run_as_root = true -- without it Prosody hangs when started as root
pidfile = %q
data_path = %q
certificates = %q
log = { { levels = { min = %q }, to = "file", filename = %q } }
interfaces = { %q }
c2s_ports = { %d }
%shttps_ports = {}
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
c2s_stanza_size_limit = 4 * 1024 * 1024
s2s_stanza_size_limit = 4 * 1024 * 1024
modules_enabled = { "roster"; "saslauth"; "tls"; "disco"; "ping"; "register"; %s}
`, filepath.Join(dir, "prosody.pid"), filepath.Join(dir, "data"), certs, level, logPath,
		o.Interface, c2sPort, httpLines, extraModules)
	ports := []string{net.JoinHostPort(o.Interface, strconv.Itoa(c2sPort)),
		net.JoinHostPort(o.Interface, strconv.Itoa(compPort))}
	if httpAddr != "" {
		ports = append(ports, httpAddr)
	}
	s2sAddr := ""
	if o.S2S {
		hosts := filepath.Join(dir, "hosts")
		resolv := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(hosts, []byte(hostsFile(o.Hosts)), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
			return nil, err
		}
		s2sAddr = net.JoinHostPort(o.Interface, "5269")
		ports = append(ports, s2sAddr)
		fmt.Fprintf(&cfg, `s2s_ports = { 5269 }
s2s_require_encryption = false
s2s_secure_auth = false
-- Prosody ignores /etc/hosts; lua-unbound reads this hosts file instead.
unbound = { hoststxt = %q; resolvconf = %q }
`, hosts, resolv)
	} else {
		// No federation: stanzas to other domains bounce at once instead of
		// triggering DNS lookups.
		cfg.WriteString("s2s_ports = {}\n")
	}
	disabled := append([]string(nil), o.DisabledModules...)
	if !o.S2S {
		disabled = append(disabled, "s2s")
	}
	if len(disabled) > 0 {
		cfg.WriteString("modules_disabled = { ")
		for _, m := range disabled {
			fmt.Fprintf(&cfg, "%q; ", m)
		}
		cfg.WriteString("}\n")
	}
	fmt.Fprintf(&cfg, `
-- The operator snippet, rendered from %s.
Include %q

VirtualHost %q
	ssl = { key = %q, certificate = %q }
`, ProsodySnippet, snippetPath, o.Domain, key, crt)
	cfg.WriteString(uploadComponent)
	cfgPath := filepath.Join(dir, "prosody.cfg.lua")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}

	s := &Server{
		Kind:            KindProsody,
		Dir:             dir,
		ConfigPath:      cfgPath,
		Domain:          o.Domain,
		ComponentDomain: o.ComponentDomain,
		ComponentSecret: o.ComponentSecret,
		Interface:       o.Interface,
		C2SAddr:         ports[0],
		ComponentAddr:   ports[1],
		S2SAddr:         s2sAddr,
		UploadDomain:    uploadDomain,
		HTTPAddr:        httpAddr,
		WebSocketURL:    wsURL,
		CAFile:          crt,
		logPath:         logPath,
		ports:           ports,
	}
	s.start = func() (*exec.Cmd, error) {
		cmd, err := newCmd(dir, "prosody", "-F", "--config", cfgPath)
		if err != nil {
			return nil, err
		}
		return cmd, startCmd(cmd)
	}
	s.pidOf = func() int { return s.cmd.Process.Pid }
	s.register = func(ctx context.Context, user, password string) error {
		cmd := exec.CommandContext(ctx, "prosodyctl", "--config", cfgPath, "register", user, o.Domain, password)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("xmppharness: prosodyctl register %s@%s: %v: %s", user, o.Domain, err,
				strings.ReplaceAll(string(out), password, "[password]"))
		}
		return nil
	}
	if err := s.launch(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func hostsFile(hosts map[string]string) string {
	byIP := map[string][]string{}
	for name, ip := range hosts {
		byIP[ip] = append(byIP[ip], name)
	}
	ips := make([]string, 0, len(byIP))
	for ip := range byIP {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	var b strings.Builder
	for _, ip := range ips {
		names := byIP[ip]
		sort.Strings(names)
		fmt.Fprintf(&b, "%s %s\n", ip, strings.Join(names, " "))
	}
	return b.String()
}
