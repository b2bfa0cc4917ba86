// Package mcpoauth implements the OAuth 2.1 client side of MCP
// 2026-07-28 authorization for the MCP bridge's HTTP backends (the
// [agents.mcp.oauth] table): authorization server discovery from the
// server's 401 (RFC 9728 Protected Resource Metadata, then RFC 8414 or
// OpenID Connect discovery), resource-bound token requests (RFC 8707) by
// the client credentials grant or by a refresh token that an operator's
// one authorization-code login with PKCE (Login) left in a token file of
// mode 0600. Access tokens are refreshed before they expire, and once
// more when the server answers 401; a refused refresh token turns into
// ErrLoginRequired. No error or log line carries a token or a secret.
package mcpoauth

import (
	"fmt"
	"net/url"
	"strings"
)

// The grants of [agents.mcp.oauth] grant.
const (
	GrantClientCredentials = "client_credentials"
	GrantAuthorizationCode = "authorization_code"
)

// Config is the [agents.mcp.oauth] table.
type Config struct {
	// Grant is "client_credentials" (the gateway acts as itself) or
	// "authorization_code" (it acts for the user who ran `agentgw oauth
	// login` once).
	Grant string `toml:"grant"`
	// ClientID is a registered client id, or the HTTPS URL of a Client
	// ID Metadata Document.
	ClientID string `toml:"client_id"`
	// The client secret, from the environment or a file; none for a
	// public client (authorization_code only).
	ClientSecretEnv  string `toml:"client_secret_env"`
	ClientSecretFile string `toml:"client_secret_file"`
	// Scopes requested; empty: the server's challenge or its metadata's
	// scopes_supported.
	Scopes []string `toml:"scopes"`
	// Issuer, when set, is the only authorization server the gateway
	// accepts from the server's metadata. Unset, the first one
	// discovered is kept for the process's life (and a login's issuer
	// for its refresh token): a server that later names another one
	// cannot move the gateway's credentials there.
	Issuer string `toml:"issuer"`
	// TokenFile holds the refresh token (mode 0600), relative to the
	// config file's directory. Required for authorization_code.
	TokenFile string `toml:"token_file"`
}

// Validate lists what is wrong with the table, each problem a sentence
// naming the key.
func (c *Config) Validate() []string {
	var out []string
	switch c.Grant {
	case GrantClientCredentials, GrantAuthorizationCode:
	case "":
		out = append(out, `[agents.mcp.oauth] grant is required: "client_credentials" or "authorization_code"`)
	default:
		out = append(out, `[agents.mcp.oauth] grant must be "client_credentials" or "authorization_code"`)
	}
	if c.ClientID == "" {
		out = append(out, "[agents.mcp.oauth] client_id is required")
	} else if strings.Contains(c.ClientID, "://") && !IsMetadataDocumentID(c.ClientID) {
		out = append(out, "[agents.mcp.oauth] client_id that is a URL must be an https URL with a path (a Client ID Metadata Document)")
	}
	if c.ClientSecretEnv != "" && c.ClientSecretFile != "" {
		out = append(out, "[agents.mcp.oauth] takes client_secret_env or client_secret_file, not both")
	}
	if c.Grant == GrantClientCredentials && c.ClientSecretEnv == "" && c.ClientSecretFile == "" {
		out = append(out, "[agents.mcp.oauth] grant = \"client_credentials\" needs client_secret_env or client_secret_file")
	}
	if c.Grant == GrantAuthorizationCode && c.TokenFile == "" {
		out = append(out, "[agents.mcp.oauth] grant = \"authorization_code\" needs token_file (where `agentgw oauth login` keeps the refresh token)")
	}
	if c.Issuer != "" {
		if err := secureURL(c.Issuer); err != nil {
			out = append(out, "[agents.mcp.oauth] issuer must be an https URL (http only on a loopback address)")
		}
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			out = append(out, fmt.Sprintf("[agents.mcp.oauth] scopes: %q is not a scope token", trim(s)))
			break
		}
	}
	return out
}

// IsMetadataDocumentID reports whether a client id is a Client ID
// Metadata Document URL: https, with a path.
func IsMetadataDocumentID(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == ""
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
