// Package hostile tests hostile inputs through Prosody.
package hostile
