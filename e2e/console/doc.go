// Package console tests the operator web console end to end: a gateway on
// Prosody, logins checked by real SASL logins, tools run through the task
// engine, and headless Chromium driving the pages.
package console
