// Package connector tests an xAgent connector agent through Prosody.
package connector
