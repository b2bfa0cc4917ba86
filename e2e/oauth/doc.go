// Package oauth tests the HTTP fronts as OAuth 2.1 resource servers end to
// end: a real issuer (oidc-provider), Prosody, the gateway, `agentgw mcp
// --http --issuer` and `agentgw a2a --issuer`, with the official MCP and
// A2A SDK clients, several users through one front.
package oauth
