//go:build linux

package procsec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// NoDump makes the process non-dumpable. Call it after ScrubEnviron: a
// non-dumpable process that is not root can no longer open its own
// /proc/self/mem.
func NoDump() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// Dumpable reports the process's dumpable flag.
func Dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v != 0, err
}

// ScrubEnviron overwrites with NUL bytes the values of the named variables
// in the process's initial environment block (what /proc/<pid>/environ
// shows), and reports how many it overwrote. The Go runtime copied the
// environment at start-up, so nothing reads the block afterwards; callers
// take the values out of os.Environ themselves (config.TakeSecretEnv).
func ScrubEnviron(names []string) (int, error) {
	if len(names) == 0 {
		return 0, nil
	}
	start, end, err := environBounds()
	if err != nil {
		return 0, err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, start); err != nil {
		return 0, fmt.Errorf("reading the environment block: %w", err)
	}
	n := 0
	for off := 0; off < len(block); {
		entry := block[off:]
		if i := bytes.IndexByte(entry, 0); i >= 0 {
			entry = entry[:i]
		}
		for _, name := range names {
			prefix := name + "="
			if name == "" || !bytes.HasPrefix(entry, []byte(prefix)) || len(entry) == len(prefix) {
				continue
			}
			zeros := make([]byte, len(entry)-len(prefix))
			if _, err := mem.WriteAt(zeros, start+int64(off+len(prefix))); err != nil {
				return n, fmt.Errorf("overwriting %s: %w", name, err)
			}
			n++
		}
		off += len(entry) + 1
	}
	return n, nil
}

// environBounds reads env_start and env_end, fields 50 and 51 of
// /proc/self/stat (proc(5)); the command name before them may hold spaces
// and parentheses, so fields are counted after its last ')'.
func environBounds() (start, end int64, err error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc/self/stat: no command name")
	}
	f := bytes.Fields(stat[i+1:]) // f[0] is field 3
	if len(f) < 49 {
		return 0, 0, errors.New("/proc/self/stat: no env_start/env_end (Linux < 3.5)")
	}
	if start, err = strconv.ParseInt(string(f[47]), 10, 64); err == nil {
		end, err = strconv.ParseInt(string(f[48]), 10, 64)
	}
	if err != nil || end <= start {
		return 0, 0, fmt.Errorf("/proc/self/stat: bad env_start/env_end")
	}
	return start, end, nil
}

// Start starts cmd so that the kernel sends it SIGKILL when the gateway
// dies (also by kill -9), adding Pdeathsig to cmd.SysProcAttr.
//
// Linux delivers the parent-death signal when the *thread* that forked the
// child exits, not the process. Go may end an OS thread whose goroutine
// exited while locked to it, so forking from an arbitrary goroutine could
// kill a healthy server at random. Every child is therefore forked from one
// goroutine locked to its thread for the life of the process.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	spawnOnce.Do(func() { go spawner() })
	done := make(chan error, 1)
	spawns <- spawnReq{cmd, done}
	return <-done
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawns    = make(chan spawnReq)
)

func spawner() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for r := range spawns {
		r.done <- r.cmd.Start()
	}
}
