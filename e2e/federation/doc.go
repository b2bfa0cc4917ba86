// Package federation tests two federated Prosody servers: grants, hidden versus missing timing.
package federation
