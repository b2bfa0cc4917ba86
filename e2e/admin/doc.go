// Package admin tests the CLI and the admin IQs end to end, control characters in manifests and results.
package admin
