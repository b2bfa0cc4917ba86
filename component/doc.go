// Package component implements the gateway's XEP-0114 external component
// session: handshake, reconnect with capped exponential backoff and jitter,
// XEP-0199 keepalive, an outbound send queue, IQ correlation with timeouts
// (in a cluster, across members: relay.go), and dispatch of inbound stanzas
// by recipient JID and then by payload.
package component
