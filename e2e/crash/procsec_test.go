package crash

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestMCPChildCannotReadGatewaySecret runs a real `agentgw serve` whose
// component secret comes from secret_env, with an MCP server behind a
// shell wrapper that first tries to get the secret from its parent (the
// gateway): /proc/<ppid>/environ, /proc/<ppid>/cmdline and its own
// environment. None may hold it, and the gateway must still connect with
// it (it reads the value before taking it out of the environment). Then
// the gateway is killed with SIGKILL: the wrapper, which outlives its
// stdin, must die with it (Pdeathsig).
//
// Tests run as root here, and root (CAP_SYS_PTRACE) may read a
// non-dumpable process's environ: what keeps the secret out is that the
// gateway overwrote it in its environment block. For a child of the same
// non-root user, non-dumpable alone already refuses the read
// (internal/procsec tests). A secret *file* stays readable by a child of
// the same user; docs/operations.md says so.
func TestMCPChildCannotReadGatewaySecret(t *testing.T) {
	e := e2e.Prepare(t, e2e.Options{Users: []string{"alice"}})
	everything := e2e.EverythingTOML(t, "probe", e.Domain)
	var cmdLine []string
	for _, l := range strings.Split(everything, "\n") {
		if strings.HasPrefix(l, "command = ") {
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "command = ")), &cmdLine); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(cmdLine) != 3 {
		t.Fatalf("no server-everything command in %q", everything)
	}
	probe := filepath.Join(e.Dir, "probe")
	if err := os.Mkdir(probe, 0o700); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`d=%q
cat /proc/$PPID/comm > $d/parent-comm
cat /proc/$PPID/environ > $d/parent-environ 2> $d/parent-environ.err
cat /proc/$PPID/cmdline > $d/parent-cmdline 2>&1
env > $d/child-env
echo $$ > $d/child-pid
%q %q stdio
# Outlive stdin: only the parent-death signal ends this shell now.
while :; do sleep 1; done
`, probe, cmdLine[0], cmdLine[1])
	secretVar := "AGW_PROCSEC_COMPONENT_SECRET"
	t.Setenv(secretVar, e.Server.ComponentSecret)
	cfg, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	toml := strings.Replace(string(cfg), `secret_file = "component.secret"`, fmt.Sprintf("secret_env = %q", secretVar), 1)
	toml += fmt.Sprintf("\n[[agents]]\njid = %q\n[agents.mcp]\ncommand = [\"/bin/sh\", \"-c\", %q]\n", "probe@"+e.Domain, script)
	if err := os.WriteFile(e.ConfigPath, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(e.Dir, "component.secret"))

	p := e.Serve("gw") // returns once the component is connected: the secret was usable
	p.WaitLog("published MCP manifest", 60*time.Second)
	if !strings.Contains(p.Log(), "process hardened") {
		t.Errorf("no hardening log line:\n%s", e2e.Tail(p.Log(), 3000))
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(probe, name))
		if err != nil {
			t.Fatalf("probe %s: %v", name, err)
		}
		return string(b)
	}
	if comm := strings.TrimSpace(read("parent-comm")); comm != "agentgw" {
		t.Fatalf("the probe's parent is %q, not the gateway", comm)
	}
	secret := e.Server.ComponentSecret
	environ := read("parent-environ")
	t.Logf("child reading /proc/<gateway>/environ as uid %d: %d bytes, error %q", os.Getuid(), len(environ), strings.TrimSpace(read("parent-environ.err")))
	for name, text := range map[string]string{
		"/proc/<gateway>/environ": environ,
		"/proc/<gateway>/cmdline": read("parent-cmdline"),
		"the child's environment": read("child-env"),
	} {
		if strings.Contains(text, secret) {
			t.Errorf("the component secret is readable from %s", name)
		}
	}
	if strings.Contains(read("child-env"), secretVar) {
		t.Errorf("the child inherited %s", secretVar)
	}

	// The endpoint works: the gateway is whole after hardening.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	e2e.WaitPinned(t, ctx, c, e.Endpoint("probe"), "echo")

	child, err := strconv.Atoi(strings.TrimSpace(read("child-pid")))
	if err != nil {
		t.Fatal(err)
	}
	// Whatever happens, the wrapper (its own process group) goes.
	t.Cleanup(func() { syscall.Kill(-child, syscall.SIGKILL) })
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	testkit.WaitFor(t, 10*time.Second, "the MCP child to die with the gateway", func() bool { return !alive(child) })
}

// alive reports whether pid exists and is not a zombie (exited children
// are not always reaped on these machines).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
