// Package transport implements the two transports of the xAgent Connector
// protocol 3.0: the HTTP control plane (Control: Connector Card, Skill and
// the keyed /health probe, with size limits) and the WebSocket data plane
// (DataPlane.Dial and Session: hello, request correlation, ping/pong,
// progress routing).
//
// Error text never carries the system API key or the connector's answer.
// The channel, binding and reconnection logic stays in connectorbridge,
// which a Session calls back when it ends or gets a descriptor push.
package transport
