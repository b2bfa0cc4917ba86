// Package selfreg tests agentgw host and self-registration end to end.
package selfreg
