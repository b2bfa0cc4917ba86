// Package directory implements the agent directory of urn:xmpp:agent-api:0:
// endpoints, immutable versioned manifests validated against the normative
// manifest JSON Schema, RFC 8785 canonical bytes with SHA-256 hashes,
// activation, tombstones, and the read side that discovery, search and
// invocation use.
package directory
