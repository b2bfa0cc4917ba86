//go:build !linux

package procsec

import "os/exec"

// NoDump does nothing outside Linux.
func NoDump() error { return nil }

// Dumpable reports true outside Linux: nothing was changed.
func Dumpable() (bool, error) { return true, nil }

// ScrubEnviron does nothing outside Linux.
func ScrubEnviron([]string) (int, error) { return 0, nil }

// Start starts cmd; outside Linux there is no parent-death signal.
func Start(cmd *exec.Cmd) error { return cmd.Start() }
