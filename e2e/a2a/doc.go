// Package a2a tests a2A agents behind the gateway end to end, hostile cards and unreadable results.
package a2a
