package crash

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // read the gateway's store after the fault

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// The disk-fault tests run `agentgw serve` with its store on a file system
// the test breaks: a small tmpfs that fills up, and an ext4 image whose
// mount is forced read-only (ext4's abort, as errors=remount-ro does on an
// I/O error). They need root and mount(8); outside CI a refusal skips,
// under CI=true it fails.

// dfRun runs a command and returns its combined output.
func dfRun(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// dfUnavailable skips the test outside CI and fails it under CI=true.
func dfUnavailable(t *testing.T, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	testkit.Unavailable(t, "disk-fault test cannot run: %s", msg)
}

// dfMount mounts (mount args..., then dir) and unmounts dir on cleanup,
// after everything registered later (the gateway) has stopped.
func dfMount(t *testing.T, dir string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		dfUnavailable(t, "mounting needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := dfRun("mount", append(args, dir)...); err != nil {
		dfUnavailable(t, "mount %v %s: %v: %s", args, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := dfRun("umount", dir); err != nil {
			t.Logf("umount %s: %v: %s; detaching lazily", dir, err, out)
			dfRun("umount", "-l", dir)
		}
	})
}

// dfUseStore points the environment's [store] path into dir.
func dfUseStore(t *testing.T, e *e2e.Env, dir string) string {
	t.Helper()
	b, err := os.ReadFile(e.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "agentgw.db")
	cfg := strings.Replace(string(b), `path = "agentgw.db"`, fmt.Sprintf("path = %q", db), 1)
	if cfg == string(b) {
		t.Fatal("the config has no [store] path to replace")
	}
	if err := os.WriteFile(e.ConfigPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return db
}

// dfSetup is a Prosody, alice, and a config whose endpoint everything is
// the MCP server-everything (its echo tool takes {"message": string}).
func dfSetup(t *testing.T) *e2e.Env {
	t.Helper()
	e2e.Binary(t)
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	return e2e.Prepare(t, e2e.Options{Server: srv, Users: []string{"alice"}, TOML: e2e.EverythingTOML(t, "everything", srv.ComponentDomain) + e2e.DfRates})
}

func dfClient(t *testing.T, ctx context.Context, e *e2e.Env) *agentclient.Client {
	t.Helper()
	c, _, err := e.TryDial(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	c.Retries = 0 // every outcome is recorded as it came
	c.IQTimeout = 15 * time.Second
	return c
}

// dfInvoke is one invoke and what came back.
type dfInvoke struct {
	phase string
	req   agentclient.InvokeRequest
	acc   *agentclient.Accepted
	err   error
}

func (r *dfInvoke) outcome() string {
	if r.acc != nil {
		return "accepted"
	}
	if cond := agentclient.Condition(r.err); cond != "" {
		return string(cond)
	}
	return "no reply"
}

// dfAdmit sends up to max invokes of tool with args from workers
// goroutines, stopping once stopAfter of them were refused (0: never).
func dfAdmit(ctx context.Context, c *agentclient.Client, ep jid.JID, p *agentclient.Pinned, tool string, args json.RawMessage, phase string, max, workers, stopAfter int) []*dfInvoke {
	var (
		next    atomic.Int64
		refused atomic.Int64
		mu      sync.Mutex
		out     []*dfInvoke
		wg      sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if int(next.Add(1)) > max || (stopAfter > 0 && int(refused.Load()) >= stopAfter) || ctx.Err() != nil {
					return
				}
				r := &dfInvoke{phase: phase, req: agentclient.InvokeRequest{
					RequestID: ids.New("req-"), Tool: tool, Version: p.Manifest.Version,
					ManifestHash: p.Manifest.Hash, Arguments: args,
				}}
				req := r.req
				r.acc, r.err = c.Invoke(ctx, ep, &req)
				if r.acc == nil {
					refused.Add(1)
				}
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

func dfTally(rs []*dfInvoke) string {
	n := map[string]int{}
	for _, r := range rs {
		n[r.outcome()]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n[k]))
	}
	return strings.Join(parts, " ")
}

var dfMsgRE = regexp.MustCompile(`level=(ERROR|WARN) msg=("[^"]*"|\S+)(.*)`)

// dfLogSummary counts the gateway's error and warning messages.
func dfLogSummary(log string) string {
	n := map[string]int{}
	var order []string
	for _, line := range strings.Split(log, "\n") {
		m := dfMsgRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key := m[1] + " " + m[2]
		if e := regexp.MustCompile(`err="([^"]{0,160})`).FindStringSubmatch(m[3]); e != nil {
			key += " err=" + e[1]
		}
		if n[key] == 0 {
			order = append(order, key)
		}
		n[key]++
	}
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "\n    %4d× %s", n[k], k)
	}
	if b.Len() == 0 {
		return " (none)"
	}
	return b.String()
}

// dfAlive reports whether the gateway process is still running.
func dfAlive(p *e2e.Proc) bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// dfStoreReport is what the store holds after recovery.
type dfStoreReport struct {
	tasks  map[string]string // id -> state, with the failure code
	byReq  map[string]string // request id -> task id
	events int
}

// dfCheckStore opens the store read-only, runs PRAGMA integrity_check and
// checks every task's events: revisions 1..N each once, N the task's
// revision, unique event IDs, the result equal to the terminal event.
func dfCheckStore(t *testing.T, ctx context.Context, dbPath, when string) *dfStoreReport {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		t.Fatalf("integrity_check %s: %v", when, err)
	}
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	rows.Close()
	if len(problems) > 0 {
		t.Errorf("PRAGMA integrity_check %s: %s", when, strings.Join(problems, "; "))
	}

	events := map[string][]storedEventRow{}
	rows, err = db.QueryContext(ctx, `SELECT task_id, revision, event_id, type, payload, created_ns FROM task_events ORDER BY task_id, revision`)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for rows.Next() {
		var id string
		var r storedEventRow
		if err := rows.Scan(&id, &r.rev, &r.id, &r.typ, &r.payload, &r.created); err != nil {
			t.Fatal(err)
		}
		events[id] = append(events[id], r)
		total++
	}
	rows.Close()
	rep := &dfStoreReport{tasks: map[string]string{}, byReq: map[string]string{}, events: total}
	rows, err = db.QueryContext(ctx, `SELECT id, request_id, state, revision, result FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var id, req, state string
		var rev int64
		var result []byte
		if err := rows.Scan(&id, &req, &state, &rev, &result); err != nil {
			t.Fatal(err)
		}
		if state == "failed" {
			var f struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal(result, &f)
			state += "(" + f.Error.Code + ")"
		}
		rep.tasks[id], rep.byReq[req] = state, id
		evs := events[id]
		for i, ev := range evs {
			if ev.rev != int64(i+1) {
				t.Errorf("%s: task %s: event %d has revision %d (gap or duplicate)", when, id, i, ev.rev)
				break
			}
			if seen[ev.id] {
				t.Errorf("%s: task %s: event id %s repeats", when, id, ev.id)
			}
			seen[ev.id] = true
		}
		if int64(len(evs)) != rev {
			t.Errorf("%s: task %s: revision %d but %d events", when, id, rev, len(evs))
		}
		if result != nil && len(evs) > 0 && string(evs[len(evs)-1].payload) != string(result) {
			t.Errorf("%s: task %s: result differs from the terminal event", when, id)
		}
	}
	rows.Close()
	return rep
}

// dfFates tallies the final states of the accepted invokes by phase.
func dfFates(rep *dfStoreReport, all []*dfInvoke) string {
	n := map[string]int{}
	for _, r := range all {
		if r.acc != nil {
			n[r.phase+": "+rep.tasks[r.acc.TaskID]]++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

// dfCheckAccepted checks that every accepted invoke's task is in the store
// and answers task-state, and counts refused invokes that were committed
// anyway.
func dfCheckAccepted(t *testing.T, ctx context.Context, c *agentclient.Client, ep jid.JID, rep *dfStoreReport, all []*dfInvoke) (accepted, refusedButStored int) {
	t.Helper()
	for _, r := range all {
		if r.acc == nil {
			if _, ok := rep.byReq[r.req.RequestID]; ok {
				refusedButStored++
				t.Logf("refused invoke %s (%s, %s) exists in the store", r.req.RequestID, r.phase, r.outcome())
			}
			continue
		}
		accepted++
		if _, ok := rep.tasks[r.acc.TaskID]; !ok {
			t.Errorf("accepted task %s (%s) is not in the store", r.acc.TaskID, r.phase)
			continue
		}
		if _, err := c.State(ctx, ep, r.acc.TaskID); err != nil {
			t.Errorf("task-state of accepted task %s (%s): %v", r.acc.TaskID, r.phase, err)
		}
	}
	return accepted, refusedButStored
}

// dfWaitSettled waits until no task in the store is accepted or running.
func dfWaitSettled(t *testing.T, ctx context.Context, dbPath string) map[string]int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var states map[string]int
	deadline := time.Now().Add(60 * time.Second)
	for {
		states = map[string]int{}
		rows, err := db.QueryContext(ctx, `SELECT state, count(*) FROM tasks GROUP BY state`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			var n int
			rows.Scan(&s, &n)
			states[s] = n
		}
		rows.Close()
		if states["accepted"]+states["running"]+states["cancelling"]+states["input_required"] == 0 || time.Now().After(deadline) {
			return states
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dfSmallCall runs a small echo through the whole client flow.
func dfSmallCall(ctx context.Context, c *agentclient.Client, ep jid.JID) (string, error) {
	out, err := c.Call(ctx, ep, "echo", json.RawMessage(`{"message":"after"}`), agentclient.CallOptions{})
	if err != nil {
		return "", err
	}
	return string(out.State), nil
}

func dfExit(p *e2e.Proc) string {
	select {
	case <-p.Exited():
		return p.State.String()
	default:
		return "running"
	}
}

// TestDiskFaultFull fills the store's tmpfs with admissions: every invoke
// is accepted (and then exists) or refused with an IQ error, the gateway
// keeps running, and after the file system grows and the gateway restarts
// the store passes integrity_check with gap-free revisions.
func TestDiskFaultFull(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := dfSetup(t)
	mnt := filepath.Join(e.Dir, "store")
	dfMount(t, mnt, "-t", "tmpfs", "-o", "size=6m", "tmpfs")
	dbPath := dfUseStore(t, e, mnt)
	gw1 := e.Serve("gw1")
	c := dfClient(t, ctx, e)
	ep := e.Endpoint("everything")
	p := e2e.WaitPinned(t, ctx, c, ep, "echo")

	// 50 KiB arguments (the default MaxArgumentBytes is 1 MiB); the echo
	// result stores them twice more.
	big, err := json.Marshal(map[string]string{"message": strings.Repeat("0123456789abcdef", 50<<10/16)})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	fill := dfAdmit(ctx, c, ep, p, "echo", big, "fill", 2000, 4, 40)
	firstRefusal := -1
	for i, r := range fill {
		if r.acc == nil && firstRefusal < 0 {
			firstRefusal = i
		}
	}
	df, _ := dfRun("df", "-k", mnt)
	t.Logf("fill: %d invokes in %v: %s; first refusal at #%d\n%s", len(fill), time.Since(began).Round(time.Millisecond), dfTally(fill), firstRefusal, df)
	if firstRefusal < 0 {
		t.Fatalf("the tmpfs never filled up")
	}
	for _, r := range fill {
		if r.acc == nil && agentclient.Condition(r.err) == "" {
			t.Errorf("invoke %s got no IQ error: %v", r.req.RequestID, r.err)
		}
	}
	if !dfAlive(gw1) {
		t.Fatalf("the gateway exited while the disk was full (%s):\n%s", dfExit(gw1), e2e.Tail(gw1.Log(), 4000))
	}
	// Reads still answer while the disk is full.
	for _, r := range fill[:min(3, len(fill))] {
		if r.acc != nil {
			if st, err := c.State(ctx, ep, r.acc.TaskID); err != nil {
				t.Errorf("task-state while full: %v", err)
			} else {
				t.Logf("task-state while full: %s is %s at revision %d", st.TaskID, st.State, st.Revision)
			}
		}
	}
	more := dfAdmit(ctx, c, ep, p, "echo", json.RawMessage(`{"message":"small"}`), "full-small", 5, 1, 0)
	t.Logf("small invokes while full: %s", dfTally(more))

	// Grow the file system; does admission recover without a restart?
	if out, err := dfRun("mount", "-o", "remount,size=64m", mnt); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, out)
	}
	grown := dfAdmit(ctx, c, ep, p, "echo", json.RawMessage(`{"message":"small"}`), "grown", 5, 1, 0)
	recovered := 0
	for _, r := range grown {
		if r.acc != nil {
			recovered++
		}
	}
	t.Logf("after growing the tmpfs, without a restart: %s (admission recovered without restart: %v)", dfTally(grown), recovered == len(grown))
	t.Logf("gateway errors and warnings while full:%s", dfLogSummary(gw1.Log()))
	// Tasks whose dispatch or settlement commit failed while the disk was
	// full are retried (backoff up to 5 s) and settle once space returns,
	// without a restart.
	grewAt := time.Now()
	var stuck map[string]int
	for {
		stuck = map[string]int{}
		for _, r := range fill {
			if r.acc == nil {
				continue
			}
			if st, err := c.State(ctx, ep, r.acc.TaskID); err != nil {
				t.Errorf("task-state after growing: %v", err)
			} else if st.State != "completed" {
				stuck[string(st.State)]++
			}
		}
		if len(stuck) == 0 || time.Since(grewAt) > 30*time.Second {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(stuck) > 0 {
		t.Errorf("accepted fill tasks still not completed 30 s after the disk grew, without a restart: %v", stuck)
	} else {
		t.Logf("every accepted fill task completed %v after the disk grew, without a restart", time.Since(grewAt).Round(100*time.Millisecond))
	}
	if !dfAlive(gw1) {
		t.Fatalf("the gateway exited (%s):\n%s", dfExit(gw1), e2e.Tail(gw1.Log(), 4000))
	}

	gw1.Stop()
	t.Logf("first gateway stopped on SIGTERM: %s", dfExit(gw1))
	dfCheckStore(t, ctx, dbPath, "after the first gateway stopped")

	gw2 := e.Serve("gw2")
	gw2.WaitLog("published MCP manifest", 60*time.Second)
	e2e.WaitPinned(t, ctx, c, ep, "echo")
	states := dfWaitSettled(t, ctx, dbPath)
	rep := dfCheckStore(t, ctx, dbPath, "after the restart")
	all := append(append(append([]*dfInvoke{}, fill...), more...), grown...)
	acc, refusedStored := dfCheckAccepted(t, ctx, c, ep, rep, all)
	st, err := dfSmallCall(ctx, c, ep)
	if err != nil || st != "completed" {
		t.Errorf("echo after the restart: %s %v", st, err)
	}
	t.Logf("after the restart: integrity_check ok=%v; %d tasks, %d events; states %v; all %d accepted tasks present; %d refused invokes were stored anyway; echo after restart: %s\n  fates of accepted tasks: %s",
		!t.Failed(), len(rep.tasks), rep.events, states, acc, refusedStored, st, dfFates(rep, all))
	if t.Failed() {
		t.Logf("first gateway log (tail):\n%s", e2e.Tail(gw1.Log(), 4000))
		t.Logf("second gateway log (tail):\n%s", e2e.Tail(gw2.Log(), 3000))
	}
}

// TestDiskFaultReadOnly makes the store's file system read-only under a
// running gateway: first a tmpfs remount (which Linux refuses while the
// store's files are open for writing), then ext4's abort, which forces the
// mount read-only as an I/O error under errors=remount-ro would.
func TestDiskFaultReadOnly(t *testing.T) {
	t.Parallel()
	t.Run("tmpfs-remount", dfTmpfsRemount)
	t.Run("ext4-abort", dfExt4Abort)
}

func dfTmpfsRemount(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	e := dfSetup(t)
	mnt := filepath.Join(e.Dir, "store")
	dfMount(t, mnt, "-t", "tmpfs", "-o", "size=64m", "tmpfs")
	dbPath := dfUseStore(t, e, mnt)
	gw1 := e.Serve("gw1")
	c := dfClient(t, ctx, e)
	ep := e.Endpoint("everything")
	p := e2e.WaitPinned(t, ctx, c, ep, "echo")
	t.Logf("%v: the first gateway serves", time.Since(began).Round(time.Millisecond))
	small := json.RawMessage(`{"message":"small"}`)
	all := dfAdmit(ctx, c, ep, p, "echo", small, "before", 5, 1, 0)

	out, err := dfRun("mount", "-o", "remount,ro", mnt)
	if err != nil {
		// Linux refuses a read-only remount while files are open for
		// writing (EBUSY): the store cannot become read-only this way.
		t.Logf("remount,ro of the tmpfs under the running gateway was refused: %v: %s", err, out)
		again := dfAdmit(ctx, c, ep, p, "echo", small, "after refused remount", 5, 1, 0)
		t.Logf("admission after the refused remount: %s", dfTally(again))
		all = append(all, again...)
		for _, r := range again {
			if r.acc == nil {
				t.Errorf("invoke refused after a refused remount: %v", r.err)
			}
		}
	} else {
		ro := dfAdmit(ctx, c, ep, p, "echo", small, "read-only", 5, 1, 0)
		t.Logf("tmpfs remounted read-only; admission: %s", dfTally(ro))
		for _, r := range ro {
			if r.acc != nil {
				t.Errorf("invoke accepted on a read-only store: %s", r.acc.TaskID)
			}
		}
		if out, err := dfRun("mount", "-o", "remount,rw", mnt); err != nil {
			t.Fatalf("remount,rw: %v: %s", err, out)
		}
		rw := dfAdmit(ctx, c, ep, p, "echo", small, "read-write again", 5, 1, 0)
		t.Logf("remounted read-write; admission without a restart: %s", dfTally(rw))
		all = append(append(all, ro...), rw...)
	}
	if !dfAlive(gw1) {
		t.Fatalf("the gateway exited (%s):\n%s", dfExit(gw1), e2e.Tail(gw1.Log(), 4000))
	}
	t.Logf("%v: stopping the first gateway", time.Since(began).Round(time.Millisecond))
	gw1.Stop()
	t.Logf("%v: stopped: %s", time.Since(began).Round(time.Millisecond), dfExit(gw1))
	rep := dfCheckStore(t, ctx, dbPath, "after stop")

	// With the gateway stopped the remount succeeds: a gateway started on
	// a read-only store must exit with a clear message, not serve.
	if out, err := dfRun("mount", "-o", "remount,ro", mnt); err != nil {
		t.Fatalf("remount,ro with the gateway stopped: %v: %s", err, out)
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	cmd := exec.CommandContext(sctx, e2e.Binary(t), "serve", "--config", e.ConfigPath)
	cmd.Dir = e.Dir
	sout, serr := cmd.CombinedOutput()
	timedOut := sctx.Err() != nil
	scancel()
	var ee *exec.ExitError
	switch {
	case errors.As(serr, &ee) && !timedOut:
		t.Logf("agentgw serve on the read-only store exited %d: %s", ee.ExitCode(), e2e.Tail(strings.TrimSpace(string(sout)), 600))
		if !strings.Contains(string(sout), "store") {
			t.Errorf("the exit message does not name the store: %s", e2e.Tail(string(sout), 600))
		}
	default:
		t.Errorf("agentgw serve on a read-only store did not exit with an error (%v):\n%s", serr, e2e.Tail(string(sout), 3000))
	}
	if out, err := dfRun("mount", "-o", "remount,rw", mnt); err != nil {
		t.Fatalf("remount,rw: %v: %s", err, out)
	}
	gw2 := e.Serve("gw2")
	gw2.WaitLog("published MCP manifest", 60*time.Second)
	e2e.WaitPinned(t, ctx, c, ep, "echo")
	rep = dfCheckStore(t, ctx, dbPath, "after the restart")
	acc, refusedStored := dfCheckAccepted(t, ctx, c, ep, rep, all)
	t.Logf("tmpfs: %s; %d accepted tasks present, %d refused but stored; %d tasks, %d events, integrity ok=%v", dfTally(all), acc, refusedStored, len(rep.tasks), rep.events, !t.Failed())
}

func dfExt4Abort(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			dfUnavailable(t, "%s not installed (e2fsprogs)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := dfSetup(t)
	img := filepath.Join(e.Dir, "store.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := dfRun("mkfs.ext4", "-q", "-F", img); err != nil {
		dfUnavailable(t, "mkfs.ext4: %v: %s", err, out)
	}
	mnt := filepath.Join(e.Dir, "store")
	dfMount(t, mnt, "-t", "ext4", "-o", "loop,errors=remount-ro", img)
	dbPath := dfUseStore(t, e, mnt)
	gw1 := e.Serve("gw1")
	c := dfClient(t, ctx, e)
	ep := e.Endpoint("everything")
	p := e2e.WaitPinned(t, ctx, c, ep, "echo")
	small := json.RawMessage(`{"message":"small"}`)
	before := dfAdmit(ctx, c, ep, p, "echo", small, "before", 10, 2, 0)
	for _, r := range before {
		if r.acc == nil {
			t.Fatalf("invoke before the fault: %v", r.err)
		}
	}
	// Long-running tasks in flight when the file system goes read-only.
	lp := e2e.WaitPinned(t, ctx, c, ep, e2e.CrashTool)
	long := dfAdmit(ctx, c, ep, lp, e2e.CrashTool, json.RawMessage(`{"duration":5,"steps":5}`), "in flight", 3, 1, 0)
	for _, r := range long {
		if r.acc == nil {
			t.Fatalf("long-running invoke: %v", r.err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // some progress is committed first

	if out, err := dfRun("mount", "-o", "remount,abort", mnt); err != nil {
		dfUnavailable(t, "ext4 remount,abort: %v: %s", err, out)
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, l := range strings.Split(string(mounts), "\n") {
		if strings.Contains(l, mnt) {
			t.Logf("after abort: %s", l)
		}
	}
	ro := dfAdmit(ctx, c, ep, p, "echo", small, "read-only", 10, 2, 0)
	t.Logf("admission on the read-only store: %s", dfTally(ro))
	for _, r := range ro {
		if r.acc != nil {
			t.Errorf("invoke accepted on a read-only store: task %s", r.acc.TaskID)
		} else if agentclient.Condition(r.err) == "" {
			t.Errorf("invoke on the read-only store got no IQ error: %v", r.err)
		}
	}
	for _, r := range before[:2] {
		st, err := c.State(ctx, ep, r.acc.TaskID)
		if err != nil {
			t.Logf("task-state on the read-only store: %v", err)
		} else {
			t.Logf("task-state on the read-only store: %s at revision %d", st.State, st.Revision)
		}
	}
	time.Sleep(5 * time.Second) // the long-running tasks try to settle
	out, err := dfRun("mount", "-o", "remount,rw", mnt)
	t.Logf("remount,rw after the abort: err=%v %s", err, out)
	if err == nil {
		rw := dfAdmit(ctx, c, ep, p, "echo", small, "read-write again", 3, 1, 0)
		t.Logf("admission after remount,rw without a restart: %s", dfTally(rw))
		ro = append(ro, rw...)
	}
	alive := dfAlive(gw1)
	t.Logf("gateway alive on the read-only store: %v; errors and warnings:%s", alive, dfLogSummary(gw1.Log()))
	if !alive {
		t.Errorf("the gateway exited on the read-only store (%s):\n%s", dfExit(gw1), e2e.Tail(gw1.Log(), 3000))
	}
	stopAt := time.Now()
	gw1.Stop()
	t.Logf("first gateway stopped on SIGTERM after %v: %s", time.Since(stopAt).Round(time.Millisecond), dfExit(gw1))

	// Recovery as an operator would: unmount, fsck, mount, restart.
	if out, err := dfRun("umount", mnt); err != nil {
		t.Fatalf("umount after the abort: %v: %s", err, out)
	}
	fsck, ferr := dfRun("e2fsck", "-fy", img)
	code := 0
	if ee, ok := ferr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	t.Logf("e2fsck -fy exited %d:\n%s", code, fsck)
	if code >= 4 {
		t.Fatalf("e2fsck left errors uncorrected (exit %d)", code)
	}
	if out, err := dfRun("mount", "-t", "ext4", "-o", "loop,errors=remount-ro", img, mnt); err != nil {
		t.Fatalf("mount after fsck: %v: %s", err, out)
	}
	dfCheckStore(t, ctx, dbPath, "after fsck")
	gw2 := e.Serve("gw2")
	gw2.WaitLog("published MCP manifest", 60*time.Second)
	e2e.WaitPinned(t, ctx, c, ep, "echo")
	states := dfWaitSettled(t, ctx, dbPath)
	rep := dfCheckStore(t, ctx, dbPath, "after the restart")
	all := append(append(append([]*dfInvoke{}, before...), long...), ro...)
	acc, refusedStored := dfCheckAccepted(t, ctx, c, ep, rep, all)
	var fates []string
	for _, r := range long {
		res, err := c.Result(ctx, ep, r.acc.TaskID)
		if err != nil {
			fates = append(fates, "error "+err.Error())
			continue
		}
		fates = append(fates, string(res.State)+" "+e2e.Tail(string(res.Payload), 120))
	}
	st, err := dfSmallCall(ctx, c, ep)
	if err != nil || st != "completed" {
		t.Errorf("echo after the restart: %s %v", st, err)
	}
	t.Logf("after fsck and restart: %d tasks, %d events, states %v; all %d accepted tasks present; %d refused invokes stored anyway; echo after restart: %s\n  fates of accepted tasks: %s\n  in-flight tasks: %s",
		len(rep.tasks), rep.events, states, acc, refusedStored, st, dfFates(rep, all), strings.Join(fates, " | "))
	if t.Failed() {
		t.Logf("first gateway log (tail):\n%s", e2e.Tail(gw1.Log(), 4000))
		t.Logf("second gateway log (tail):\n%s", e2e.Tail(gw2.Log(), 3000))
	}
}
