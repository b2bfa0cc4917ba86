// Package transport implements the HTTP control plane of the xAgent
// Connector protocol 3.0: fetching the Connector Card and Skill, and the
// keyed /health probe, with size limits and error text that never carries
// the key or the connector's answer.
//
// The WebSocket data plane (dataplane.go) still lives in connectorbridge,
// where it is tied to the Client's session state.
package transport
