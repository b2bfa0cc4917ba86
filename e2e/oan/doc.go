// Package oan tests openAgentNetwork agents and owners end to end.
package oan
