package config

import (
	"net"
	"path/filepath"
	"strings"
	"time"
)

// ACC is the agent-control-center listener (accbridge): connectors dial
// in over WSS with a client certificate from the gateway's connector CA
// and a JWT in Authorization: Bearer. The four file keys are DESIGN.md's
// contract; the rest are additions with the seed's values as defaults.
type ACC struct {
	Listen       string `toml:"listen"`
	CertFile     string `toml:"cert_file"`
	KeyFile      string `toml:"key_file"`
	ClientCAFile string `toml:"client_ca_file"`
	JWTKeyFile   string `toml:"jwt_key_file"`
	// ClientCAKeyFile is the connector CA's private key, used only by
	// `agentgw acc init|enroll`. Default: client_ca_file with .key.
	ClientCAKeyFile string `toml:"client_ca_key_file"`
	// URL is the wss:// URL enroll writes into connector.json. Default
	// wss://<listen>/v1/connector.
	URL string `toml:"url"`
	// Hostnames are the server certificate's names (DNS or IP) made by
	// init. Default: the listen host and localhost.
	Hostnames []string `toml:"hostnames"`
	// EnrollValidDays is the lifetime of a client certificate and token
	// written by enroll. Default 365.
	EnrollValidDays int `toml:"enroll_valid_days"`
	// HeartbeatSeconds is the expected heartbeat period (seed: 30).
	HeartbeatSeconds int `toml:"heartbeat_seconds"`
	// ReconnectGraceSeconds is how long the runs of a connector whose
	// socket closed wait for it to come back. Default 60.
	ReconnectGraceSeconds int `toml:"reconnect_grace_seconds"`
	// RegisterTimeoutSeconds (seed: 10), AcceptTimeoutSeconds (create_run
	// accept, seed: 30), CancelTimeoutSeconds (seed: 15), EventTimeoutSeconds
	// (stream_event delivery, seed: 60), BusyRetrySeconds (4005, seed: 60).
	RegisterTimeoutSeconds int `toml:"register_timeout_seconds"`
	AcceptTimeoutSeconds   int `toml:"accept_timeout_seconds"`
	CancelTimeoutSeconds   int `toml:"cancel_timeout_seconds"`
	EventTimeoutSeconds    int `toml:"event_timeout_seconds"`
	BusyRetrySeconds       int `toml:"busy_retry_seconds"`
	// ApprovalTimeoutSeconds is how long an approval waits (notes: 300).
	ApprovalTimeoutSeconds int `toml:"approval_timeout_seconds"`
	// HighRiskApprovers, when set, are the only principals (bare JIDs)
	// who may approve a high or critical risk action; any other caller's
	// run has such approvals denied.
	HighRiskApprovers []string `toml:"high_risk_approvers"`
	// ForwardToolOutput lets tool_result output (and tool_call commands)
	// reach the caller's progress messages. Default false.
	ForwardToolOutput bool `toml:"forward_tool_output"`
	// MaxFrameBytes bounds one WebSocket frame. Default 1048576.
	MaxFrameBytes int `toml:"max_frame_bytes"`
	// MaxAgents bounds the agents one connector may declare. Default 1000.
	MaxAgents int `toml:"max_agents"`
}

func (a *ACC) applyDefaults() {
	if a.Listen == "" {
		a.Listen = "127.0.0.1:9443"
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&a.CertFile, "acc/server.crt")
	def(&a.KeyFile, "acc/server.key")
	def(&a.ClientCAFile, "acc/ca.crt")
	def(&a.JWTKeyFile, "acc/jwt.key")
	def(&a.ClientCAKeyFile, strings.TrimSuffix(a.ClientCAFile, filepath.Ext(a.ClientCAFile))+".key")
	def(&a.URL, "wss://"+a.Listen+"/v1/connector")
	if len(a.Hostnames) == 0 {
		if h, _, err := net.SplitHostPort(a.Listen); err == nil && h != "" {
			a.Hostnames = append(a.Hostnames, h)
		}
		a.Hostnames = append(a.Hostnames, "localhost")
	}
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defInt(&a.EnrollValidDays, 365)
	defInt(&a.HeartbeatSeconds, 30)
	defInt(&a.ReconnectGraceSeconds, 60)
	defInt(&a.RegisterTimeoutSeconds, 10)
	defInt(&a.AcceptTimeoutSeconds, 30)
	defInt(&a.CancelTimeoutSeconds, 15)
	defInt(&a.EventTimeoutSeconds, 60)
	defInt(&a.BusyRetrySeconds, 60)
	defInt(&a.ApprovalTimeoutSeconds, 300)
	defInt(&a.MaxFrameBytes, 1<<20)
	defInt(&a.MaxAgents, 1000)
}

// Seconds turns a seconds key into a duration.
func Seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// validateACC checks [acc] (the [agents.acc] tables are accbridge's).
func (c *Config) validateACC(add func(string, ...any)) {
	if c.ACC == nil {
		return
	}
	x := c.ACC
	if _, _, err := net.SplitHostPort(x.Listen); err != nil {
		add("[acc] listen %q is not host:port", x.Listen)
	}
	if !strings.HasPrefix(x.URL, "wss://") {
		add("[acc] url must be a wss:// URL")
	}
	for _, p := range []struct {
		k string
		v int
	}{{"heartbeat_seconds", x.HeartbeatSeconds}, {"reconnect_grace_seconds", x.ReconnectGraceSeconds},
		{"register_timeout_seconds", x.RegisterTimeoutSeconds}, {"accept_timeout_seconds", x.AcceptTimeoutSeconds},
		{"cancel_timeout_seconds", x.CancelTimeoutSeconds}, {"event_timeout_seconds", x.EventTimeoutSeconds},
		{"busy_retry_seconds", x.BusyRetrySeconds}, {"approval_timeout_seconds", x.ApprovalTimeoutSeconds},
		{"enroll_valid_days", x.EnrollValidDays}, {"max_agents", x.MaxAgents}} {
		if p.v < 0 {
			add("[acc] %s must be positive", p.k)
		}
	}
	if x.MaxFrameBytes < 4096 || x.MaxFrameBytes > 16<<20 {
		add("[acc] max_frame_bytes must be between 4096 and 16777216")
	}
	if _, err := ParsePrincipals(x.HighRiskApprovers); err != nil {
		add("[acc] high_risk_approvers: %v", err)
	}
}
