// Package wire implements the xAgent Connector protocol 3.0 wire format:
// the Connector Card, the Connection Descriptor and the data-plane packet
// envelope, with their validation (§4.1, §7, §9).
//
// It does no I/O. Parsers return fixed phrases plus already-checked
// identifiers, never quoting the input, so their errors are safe to log;
// ParseCard refuses a Card that carries a given secret (the system API key).
package wire
