package bench

import (
	"bufio"
	"context"
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

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// benchLimitsTOML lifts the rate limits and task caps in a config file, as
// benchUnlimited does for the in-process gateway (a negative rate disables
// a limit).
const benchLimitsTOML = `
[tasks]
max_active = 1048576
max_active_per_principal = 1048576
max_active_per_domain = 1048576
max_running_per_backend = 1048576
retained_bytes_per_principal = 1125899906842624

[federation]
discovery_per_second = -1
schema_per_second = -1
invoke_per_second = -1
input_per_second = -1

[federation.local]
discovery_per_second = -1
schema_per_second = -1
invoke_per_second = -1
input_per_second = -1
`

// BenchmarkEchoCPU is the CPU the gateway process spends per echo task
// (issue 23 item 3), beside the same figure for the trivial component
// that sends the same stanzas (BenchmarkMCPEchoXMPPCeiling's: accepted,
// status running, completed). Both run as processes of their own, each on
// its own private Prosody, so /proc/<pid>/stat (utime+stime, read before
// and after each timed phase) holds their CPU alone: `agentgw serve` with
// server-everything's echo over stdio at info logging, and this test
// binary re-executed as the trivial component. The backend's CPU (node,
// a child of the gateway, not counted in the gateway's figure) and each
// Prosody's are reported beside them. Phases alternate, as in
// BenchmarkMCPEcho, so that a noisy spell hits both alike.
func BenchmarkEchoCPU(b *testing.B) {
	users := benchUserNames("cpu", 8)
	e := e2e.Prepare(b, e2e.Options{Users: users, TOML: e2e.EverythingTOML(b, "everything", "agents.example.test") + benchLimitsTOML})
	quietConfig(b, e.ConfigPath)
	gw := e.Serve("gw")
	gwClients := benchClients(b, e, users)
	gwEP := e.Endpoint("everything")
	pinned := pinWhenReady(b, gwClients[0], gwEP, "echo")

	tsrv, trivPID := startTrivialProcess(b, users)
	te := &e2e.Env{T: b, Server: tsrv, Domain: tsrv.ComponentDomain}
	trivClients := benchClients(b, te, users)
	trivEP := jid.MustParse("echo@" + tsrv.ComponentDomain)

	backendCPU := func() float64 { // the gateway's children: server-everything
		var s float64
		for _, pid := range e2e.Descendants(gw.PID()) {
			if c := procCPU(pid); c > 0 {
				s += c
			}
		}
		return s
	}
	for _, callers := range []int{1, 32} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			const rounds = 2
			var gwTasks, trivTasks int
			var gwCPU, trivCPU, gwSrvCPU, trivSrvCPU, beCPU float64
			var gwEl, trivEl time.Duration
			var gwWake, trivWake float64
			for range rounds {
				c0, s0, be0 := procCPU(gw.PID()), procCPU(e.Server.PID()), backendCPU()
				w0 := procWakeups(e.Server.PID())
				l, el, err := driveCalls(callers, benchPhase()/rounds, func(ctx context.Context, w int) error {
					return invokeAndFollow(ctx, gwClients[w%len(gwClients)], gwEP, pinned, "echo", `{"message":"hello"}`)
				})
				if err != nil {
					b.Fatalf("gateway: %v", err)
				}
				gwCPU += procCPU(gw.PID()) - c0
				gwSrvCPU += procCPU(e.Server.PID()) - s0
				gwWake += procWakeups(e.Server.PID()) - w0
				beCPU += backendCPU() - be0
				gwTasks, gwEl = gwTasks+len(l), gwEl+el

				c0, s0, w0 = procCPU(trivPID), procCPU(tsrv.PID()), procWakeups(tsrv.PID())
				l, el, err = driveCalls(callers, benchPhase()/rounds, func(ctx context.Context, w int) error {
					return callAndFollow(ctx, trivClients[w%len(trivClients)], trivEP, trivialInvoke())
				})
				if err != nil {
					b.Fatalf("trivial component: %v", err)
				}
				trivCPU += procCPU(trivPID) - c0
				trivSrvCPU += procCPU(tsrv.PID()) - s0
				trivWake += procWakeups(tsrv.PID()) - w0
				trivTasks, trivEl = trivTasks+len(l), trivEl+el
			}
			if gwTasks == 0 || trivTasks == 0 {
				b.Fatal("no task completed")
			}
			perTask := func(cpu float64, n int) float64 { return cpu * 1e6 / float64(n) }
			b.ReportMetric(perTask(gwCPU, gwTasks), "gw-cpu-µs/task")
			b.ReportMetric(perTask(trivCPU, trivTasks), "ceiling-cpu-µs/task")
			b.ReportMetric(perTask(gwCPU, gwTasks)/perTask(trivCPU, trivTasks), "cpu-x-ceiling")
			b.ReportMetric(perTask(beCPU, gwTasks), "backend-cpu-µs/task")
			b.ReportMetric(perTask(gwSrvCPU, gwTasks), "gw-server-cpu-µs/task")
			b.ReportMetric(perTask(trivSrvCPU, trivTasks), "ceiling-server-cpu-µs/task")
			// How often each Prosody blocked and woke per task: one wake-up
			// per stanza a component writes alone, fewer when stanzas
			// arrive in bursts.
			b.ReportMetric(gwWake/float64(gwTasks), "gw-server-wakeups/task")
			b.ReportMetric(trivWake/float64(trivTasks), "ceiling-server-wakeups/task")
			b.ReportMetric(float64(gwTasks)/gwEl.Seconds(), "gw-calls/s")
			b.ReportMetric(float64(trivTasks)/trivEl.Seconds(), "ceiling-calls/s")
		})
	}
}

// procWakeups is the voluntary context switches of pid's threads: for
// Prosody, which serves on one thread, how often it blocked in epoll and
// woke for more input.
func procWakeups(pid int) float64 {
	dirs, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	var n float64
	for _, d := range dirs {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + d.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				n += f
			}
		}
	}
	return n
}

// quietConfig sets the config's log level to info, as in production: the
// harness's debug level logs every stanza, a cost no deployment pays.
func quietConfig(tb testing.TB, path string) {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	s := strings.Replace(string(data), "[log]\nlevel = \"debug\"", "[log]\nlevel = \"info\"", 1)
	if s == string(data) {
		tb.Fatal("config has no debug [log] level to replace")
	}
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// Environment of the trivial component process (TestTrivialComponentProcess).
const (
	trivialEnvDomain = "AGENTGW_TRIVIAL_DOMAIN"
	trivialEnvAddr   = "AGENTGW_TRIVIAL_ADDR"
	trivialEnvSecret = "AGENTGW_TRIVIAL_SECRET_FILE"
	trivialReady     = "trivial component: connected"
)

// startTrivialProcess starts a private Prosody with users registered and
// this test binary, re-executed as TestTrivialComponentProcess, as its
// component sending the echo task's stanzas. It returns the server and the
// component's PID; the process ends with the benchmark (its stdin closes).
func startTrivialProcess(b *testing.B, users []string) (*xmppharness.Server, int) {
	b.Helper()
	srv := xmppharness.StartProsody(b, xmppharness.ProsodyOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range users {
		if err := srv.Register(ctx, u, e2e.Password+u); err != nil {
			b.Fatal(err)
		}
	}
	secret := filepath.Join(b.TempDir(), "component.secret")
	if err := os.WriteFile(secret, []byte(srv.ComponentSecret), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTrivialComponentProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), trivialEnvDomain+"="+srv.ComponentDomain, trivialEnvAddr+"="+srv.ComponentAddr,
		trivialEnvSecret+"="+secret)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread() // Pdeathsig follows the starting thread
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	b.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.Contains(sc.Text(), trivialReady) {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case ok := <-ready:
		if !ok {
			b.Fatal("trivial component process exited before connecting")
		}
	case <-time.After(60 * time.Second):
		b.Fatal("trivial component process did not connect within 60 s")
	}
	return srv, cmd.Process.Pid
}

// TestTrivialComponentProcess is the trivial component of BenchmarkEchoCPU
// when run as a process of its own (startTrivialProcess sets its
// environment); otherwise it is skipped. It runs until stdin closes.
func TestTrivialComponentProcess(t *testing.T) {
	domain := os.Getenv(trivialEnvDomain)
	if domain == "" {
		t.Skip("run by BenchmarkEchoCPU as a subprocess")
	}
	secret, err := os.ReadFile(os.Getenv(trivialEnvSecret))
	if err != nil {
		t.Fatal(err)
	}
	startTrivialComponent(t, domain, os.Getenv(trivialEnvAddr), strings.TrimSpace(string(secret)), true)
	fmt.Println(trivialReady)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
