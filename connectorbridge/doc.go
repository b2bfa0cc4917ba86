// Package connectorbridge implements the xAgent side of the xAgent Connector
// protocol 3.0, so that a Connector Server's tools become an XMPP agent.
//
// A Client owns one connector: the control plane (Connector Card, Skill and
// health over HTTP), the WebSocket data plane (hello, request correlation,
// ping/pong, reconnection with the last connector_id) and the one user
// channel of the agent (open, close, authentication, Connection Descriptor).
// A Backend wraps a Client as a tasks.Backend: it projects the Card and the
// Descriptor into an agent manifest, publishes a new version when either
// changes, and runs tool calls as tool.invoke packets on the bound channel.
//
// The system API key travels only in the Authorization header; it is
// scrubbed from results, errors and log lines, and a Card or Skill that
// carries it is refused. See docs/connector-bridge.md for the operator view.
//
// The wire types and their validation live in connectorbridge/wire, the
// HTTP control plane and the WebSocket data plane in
// connectorbridge/transport, the binding store in
// connectorbridge/bindingdb and store/sqlite.
package connectorbridge
