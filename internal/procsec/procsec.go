// Package procsec hardens the gateway process against the backends it runs:
// stdio MCP servers are children of the gateway, run as the same user, and
// must not read its secrets or outlive it.
//
// On Linux, NoDump makes the process non-dumpable (no core dumps; other
// processes of the same user cannot ptrace it or open its /proc/<pid>/mem,
// environ, fd), ScrubEnviron overwrites secret values in the environment
// block the kernel shows as /proc/<pid>/environ (os.Unsetenv only changes
// Go's copy), and Start starts a child that the kernel kills with SIGKILL
// when the gateway dies. Elsewhere they do nothing (Start only starts).
//
// What this cannot do: a child running as root, or holding CAP_SYS_PTRACE,
// still reads any process's memory; and a child running as the gateway's
// user can open every file the gateway can, secret files included. The
// trust boundary is therefore the user ID: run MCP servers under another
// user (docs/operations.md, "Process isolation").
package procsec
