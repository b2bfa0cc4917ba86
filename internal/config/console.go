package config

import (
	"errors"
	"net"
	"strings"
	"time"
)

// Console is the operator web console (docs/console.md), served by
// `agentgw serve`; off unless Listen is set.
type Console struct {
	// Listen is the console's host:port, e.g. "127.0.0.1:8090". A
	// non-loopback address needs TLSCert and TLSKey.
	Listen string `toml:"listen"`
	// TokenEnv or TokenFile name where the automation token is read from
	// (a secret: at least 32 bytes, never logged or shown in a page).
	// Without one, login by token is off.
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
	// LoginServer is the XMPP server's C2S address (host:port) the console
	// checks an operator's password against with a real SASL login; only
	// accounts in [xmpp] admins may log in. Empty: login by XMPP account
	// is off.
	LoginServer string `toml:"login_server"`
	// LoginCAFile is a PEM bundle trusted, besides the system roots, for
	// the login server's certificate.
	LoginCAFile string `toml:"login_ca_file"`
	// TLSCert and TLSKey serve the console over HTTPS (session cookies are
	// then Secure).
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// SessionSeconds is how long a login lasts. Default 28800 (8 h).
	SessionSeconds int `toml:"session_seconds"`
	// RequestsPerSecond and Burst rate-limit each client address's
	// requests; logins are limited to 5 a minute per address. Defaults 20
	// and 60.
	RequestsPerSecond float64 `toml:"requests_per_second"`
	RequestsBurst     int     `toml:"requests_burst"`
}

func (c *Console) applyDefaults() {
	if c.SessionSeconds == 0 {
		c.SessionSeconds = 28800
	}
	if c.RequestsPerSecond == 0 {
		c.RequestsPerSecond = 20
	}
	if c.RequestsBurst == 0 {
		c.RequestsBurst = 60
	}
}

// SessionTTL is [console] session_seconds as a duration.
func (c *Config) SessionTTL() time.Duration {
	return time.Duration(c.Console.SessionSeconds) * time.Second
}

// Enabled reports whether the console is to be served.
func (c Console) Enabled() bool { return c.Listen != "" }

// TLS reports whether the console is served over HTTPS.
func (c Console) TLS() bool { return c.TLSCert != "" }

// ConsoleToken reads the console's automation token; "" when none is
// configured.
func (c *Config) ConsoleToken() (string, error) {
	if c.Console.TokenEnv == "" && c.Console.TokenFile == "" {
		return "", nil
	}
	tok, err := ReadSecret(c.Console.TokenEnv, c.Path(c.Console.TokenFile))
	if err != nil {
		return "", errors.New("[console] token: " + err.Error())
	}
	if len(tok) < 32 {
		return "", errors.New("[console] token must be at least 32 bytes")
	}
	return tok, nil
}

func (c Console) validate() []error {
	if c.Listen == "" {
		if c.TokenEnv != "" || c.TokenFile != "" || c.LoginServer != "" || c.TLSCert != "" {
			return []error{errors.New("[console] is configured but listen is empty (the console is off)")}
		}
		return nil
	}
	var errs []error
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, errors.New(`[console] listen must be host:port, e.g. "127.0.0.1:8090"`))
	}
	if c.TokenEnv != "" && c.TokenFile != "" {
		errs = append(errs, errors.New("[console] token_env and token_file are exclusive"))
	}
	auth := c.TokenEnv != "" || c.TokenFile != "" || c.LoginServer != ""
	if !auth {
		errs = append(errs, errors.New("[console] needs token_env, token_file or login_server: nobody could log in"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("[console] tls_cert and tls_key go together"))
	}
	if err == nil && !loopback(host) && c.TLSCert == "" {
		errs = append(errs, errors.New("[console] listen is not a loopback address: serve it with tls_cert and tls_key, or listen on 127.0.0.1"))
	}
	if c.LoginServer != "" {
		if _, _, err := net.SplitHostPort(c.LoginServer); err != nil {
			errs = append(errs, errors.New(`[console] login_server must be the XMPP server's C2S host:port, e.g. "localhost:5222"`))
		}
	}
	if c.SessionSeconds < 60 || c.SessionSeconds > 7*86400 {
		errs = append(errs, errors.New("[console] session_seconds must be between 60 and 604800"))
	}
	if c.RequestsPerSecond < 0 || c.RequestsBurst < 1 {
		errs = append(errs, errors.New("[console] requests_per_second must be positive and requests_burst at least 1"))
	}
	return errs
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
