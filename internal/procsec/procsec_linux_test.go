//go:build linux

package procsec

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "PROCSEC_TEST_HELPER"

// TestMain lets the test binary play the gateway and its child.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "scrub":
		os.Unsetenv("PROCSEC_SECRET")
		n, err := ScrubEnviron([]string{"PROCSEC_SECRET", "PROCSEC_UNSET"})
		b, rerr := os.ReadFile("/proc/self/environ")
		fmt.Printf("n=%d err=%v rerr=%v secret=%v other=%v\n", n, err, rerr,
			bytes.Contains(b, []byte("hunter2-secret")), bytes.Contains(b, []byte("PROCSEC_OTHER=keep-me\x00")))
	case "parent":
		// The gateway: optionally non-dumpable, then a child of the same
		// user tries to read its environment.
		if os.Getenv("PROCSEC_NODUMP") == "1" {
			if err := NoDump(); err != nil {
				fmt.Println("nodump:", err)
				os.Exit(1)
			}
		}
		d, _ := Dumpable()
		cmd := exec.Command(os.Args[0])
		cmd.Env = []string{helperEnv + "=reader"}
		out, err := cmd.CombinedOutput()
		fmt.Printf("dumpable=%v child: %s %v\n", d, strings.TrimSpace(string(out)), err)
	case "reader":
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
		fmt.Printf("read-error=%v secret=%v", err != nil, bytes.Contains(b, []byte("hunter2-secret")))
	case "spawner":
		// Start a child from a goroutine whose thread then ends (locked,
		// never unlocked): with a naive Pdeathsig the child would die
		// with that thread. The main goroutine holds the main thread,
		// which Go never ends, so the other goroutine gets another one.
		runtime.LockOSThread()
		done := make(chan int)
		go func() {
			runtime.LockOSThread()
			cmd := exec.Command("sleep", "60")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := Start(cmd); err != nil {
				fmt.Println("start:", err)
				os.Exit(1)
			}
			done <- cmd.Process.Pid
		}()
		pid := <-done
		fmt.Println(pid)
		time.Sleep(time.Hour) // until killed
	}
	os.Exit(0)
}

func helper(t *testing.T, mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{helperEnv + "=" + mode, "PATH=" + os.Getenv("PATH")}, env...)
	return cmd
}

func TestScrubEnviron(t *testing.T) {
	out, err := helper(t, "scrub", "PROCSEC_SECRET=hunter2-secret", "PROCSEC_OTHER=keep-me").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "n=1 err=<nil> rerr=<nil> secret=false other=true" {
		t.Fatalf("helper: %s", got)
	}
}

// A child of the same (non-root) user reads a dumpable parent's environ,
// and not a non-dumpable one's. Root bypasses this with CAP_SYS_PTRACE, so
// as root the helpers run as nobody (both parent and child).
func TestNoDumpRefusesSameUser(t *testing.T) {
	bin := os.Args[0]
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		// nobody must be able to execute the test binary.
		dir, err := os.MkdirTemp("", "procsec-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		bin = filepath.Join(dir, "procsec.test")
		src, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(dst, src)
		src.Close()
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	for _, tc := range []struct {
		nodump string
		want   string
	}{
		{"0", "dumpable=true child: read-error=false secret=true"},
		{"1", "dumpable=false child: read-error=true secret=false"},
	} {
		cmd := exec.Command(bin)
		cmd.Env = []string{helperEnv + "=parent", "PROCSEC_NODUMP=" + tc.nodump, "PROCSEC_SECRET=hunter2-secret"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nodump=%s: %v %s", tc.nodump, err, out)
		}
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("nodump=%s: %q, want %q", tc.nodump, got, tc.want)
		}
	}
}

// A child started by Start survives the end of the thread of the goroutine
// that asked for it, and dies when its parent is killed.
func TestStartKillsChildWithParent(t *testing.T) {
	cmd := helper(t, "spawner")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 32)
	n, _ := stdout.Read(line)
	child, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("spawner said %q", line[:n])
	}
	t.Cleanup(func() { syscall.Kill(-child, syscall.SIGKILL) })
	// The spawning goroutine has ended with its thread; the child must not
	// have been taken with it.
	time.Sleep(300 * time.Millisecond)
	if !alive(child) {
		t.Fatal("the child died with the thread of the goroutine that started it")
	}
	cmd.Process.Kill()
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatal("the child outlived its killed parent")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
