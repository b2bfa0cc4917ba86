// Package accbridge implements agent-control-center (ACC) connectors as
// XMPP agents: the gateway is the control-center server they dial into.
//
// The TLS 1.3 listener and JWT check are in server.go and pki.go,
// connector sessions in session.go, agents as endpoints in agent.go, and
// runs as tasks and chat turns in run.go, execute.go and converse.go.
// acctest is the independent reference connector
// (acctest/cmd/refconnector).
package accbridge
