package crash

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // read the gateway's store after the crash

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

const (
	crashTasks     = 500
	crashUsers     = 4
	crashPerClient = 16 // invokes in flight per connection
)

// killPoint is when the gateway gets SIGKILL: as the midAdmission-th invoke
// is sent (with the others in flight; sends are not aligned with group
// commits, acceptances are), or delay after the last acceptance.
type killPoint struct {
	name         string
	midAdmission int
	delay        time.Duration
}

// TestCrashKill9MidRun runs `agentgw serve` as a subprocess with the real
// MCP server-everything behind an endpoint, admits 500 long-running tasks
// from several connections at once, kills the gateway with SIGKILL at
// random points of different phases, restarts it on the same config and
// store, and checks what the spec promises about a crash: every
// acceptance was durable, non-resumable tasks are failed
// agentgw:interrupted (retryable), tasks still accepted are dispatched
// after the restart, revisions are gap-free, and replays return the
// original task. AGENTGW_CRASH_SEED replays the kill points of a logged
// run.
func TestCrashKill9MidRun(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("AGENTGW_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("AGENTGW_CRASH_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("kill points from AGENTGW_CRASH_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	// Three kills land inside the storm (as the n-th invoke is sent, with
	// up to 64 others in flight), three after the last acceptance.
	points := []killPoint{
		{name: "storm-early", midAdmission: 50 + rng.IntN(150)},
		{name: "storm-middle", midAdmission: 200 + rng.IntN(150)},
		{name: "storm-late", midAdmission: 350 + rng.IntN(140)},
		{name: "just-after", delay: between(0, 100*time.Millisecond)},
		{name: "while-running", delay: between(200*time.Millisecond, 1500*time.Millisecond)},
		{name: "long-running", delay: between(2*time.Second, 4*time.Second)},
	}
	if testing.Short() {
		points = []killPoint{{name: "while-dispatching", delay: 200 * time.Millisecond}}
	}
	e2e.Binary(t) // build once, outside the timed runs
	for _, kp := range points {
		t.Run(kp.name, func(t *testing.T) {
			t.Parallel() // each kill point has its own Prosody, gateway and store
			t.Logf("kill point %s: after invoke #%d, or %v after the last acceptance", kp.name, kp.midAdmission, kp.delay)
			crashRun(t, kp)
		})
	}
}

// TestCrashAcceptedTasksDispatchedAfterRestart makes deterministic the
// state a crash leaves between an admission's commit and its dispatch's
// commit, which the kill points hit only by chance: after SIGKILL it adds
// accepted, never dispatched task rows to the store (clones of admitted
// tasks under new IDs, as an admission commit writes them), restarts the
// gateway and checks that recovery dispatched them: running, not failed.
func TestCrashAcceptedTasksDispatchedAfterRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newCrashSetup(t, ctx)
	var admitted []*agentclient.Accepted
	owner := map[string]string{} // task ID -> user
	for i := 0; i < 8; i++ {
		acc, err := s.clients[s.users[i%crashUsers]].Invoke(ctx, s.ep, &agentclient.InvokeRequest{
			Tool: e2e.CrashTool, Version: s.pinned.Manifest.Version, ManifestHash: s.pinned.Manifest.Hash, Arguments: s.args})
		if err != nil {
			t.Fatal(err)
		}
		admitted = append(admitted, acc)
		owner[acc.TaskID] = s.users[i%crashUsers]
	}
	// The assertions below treat these eight as running at the crash, so
	// wait until each has been dispatched.
	for _, acc := range admitted {
		testkit.WaitFor(t, 30*time.Second, "task "+acc.TaskID+" to run", func() bool {
			st, err := s.clients[owner[acc.TaskID]].State(ctx, s.ep, acc.TaskID)
			return err == nil && st.State == "running"
		})
	}
	s.gw1.Kill()

	dbPath := filepath.Join(s.e.Dir, "agentgw.db")
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	clones := map[string]string{} // clone task ID -> caller
	for _, acc := range admitted[:4] {
		id := ids.New("task-")
		if _, err := db.ExecContext(ctx, `INSERT INTO tasks (id, caller, route, endpoint, request_id, tool, api_version,
			manifest_hash, arguments, fingerprint, deadline, deadline_ns, state, revision, dispatched, created_ns,
			updated_ns, retain_until_ns, purge_after_ns, input_request_id, result, cancel_key, cancel_revision)
			SELECT ?, caller, route, endpoint, ?, tool, api_version, manifest_hash, arguments, fingerprint, deadline,
			deadline_ns, 'accepted', 0, 0, ?, ?, retain_until_ns, purge_after_ns, NULL, NULL, NULL, NULL
			FROM tasks WHERE id = ?`, id, ids.New("req-"), now, now, acc.TaskID); err != nil {
			t.Fatal(err)
		}
		var caller string
		if err := db.QueryRowContext(ctx, `SELECT caller FROM tasks WHERE id = ?`, id).Scan(&caller); err != nil {
			t.Fatal(err)
		}
		clones[id] = caller
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	gw2 := s.restart(t, ctx)
	for id, caller := range clones {
		user := caller[:strings.IndexByte(caller, '@')]
		st, err := s.clients[user].State(ctx, s.ep, id)
		if err != nil {
			t.Errorf("accepted task %s after the restart: %v", id, err)
			continue
		}
		if st.State != "running" && st.State != "completed" {
			detail := ""
			if res, err := s.clients[user].Result(ctx, s.ep, id); err == nil {
				detail = string(res.Payload)
			}
			t.Errorf("task %s, accepted at the crash, is %s (revision %d) after the restart, want running or completed: %s", id, st.State, st.Revision, detail)
		}
	}
	for _, acc := range admitted {
		res, err := s.clients[owner[acc.TaskID]].Result(ctx, s.ep, acc.TaskID)
		if err != nil || res.State != "failed" || !strings.Contains(string(res.Payload), "agentgw:interrupted") {
			t.Errorf("task %s, running at the crash: %+v %v", acc.TaskID, res, err)
		}
	}
	if t.Failed() {
		t.Logf("second gateway log (tail):\n%s", e2e.Tail(gw2.Log(), 3000))
	}
}

// sentInvoke is one invoke the test sent and what came back.
type sentInvoke struct {
	user string
	req  agentclient.InvokeRequest
	acc  *agentclient.Accepted // nil: no acceptance received
	err  error
}

// crashSetup is a private Prosody, crashUsers callers, a config with the
// server-everything endpoint and no effective rate limits, and a first
// `agentgw serve` whose endpoint is discoverable.
type crashSetup struct {
	e       *e2e.Env
	users   []string
	clients map[string]*agentclient.Client
	ep      jid.JID
	pinned  *agentclient.Pinned
	args    json.RawMessage
	gw1     *e2e.Proc
}

func newCrashSetup(t *testing.T, ctx context.Context) *crashSetup {
	t.Helper()
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{})
	s := &crashSetup{clients: map[string]*agentclient.Client{}}
	for i := 0; i < crashUsers; i++ {
		s.users = append(s.users, fmt.Sprintf("caller%d", i))
	}
	// All 500 tasks run at once (the crash, not the backend concurrency
	// limit, is under test), so each accepted task at a kill point is one
	// the restart must dispatch at once.
	toml := e2e.EverythingTOML(t, "everything", srv.ComponentDomain) + `
[tasks]
max_running_per_backend = 1000

[federation]
invoke_per_second = 100000
invoke_burst = 100000
input_per_second = 100000
input_burst = 100000
discovery_per_second = 100000
discovery_burst = 100000
schema_per_second = 100000
schema_burst = 100000
`
	s.e = e2e.Prepare(t, e2e.Options{Server: srv, Users: s.users, TOML: toml})
	s.ep = s.e.Endpoint("everything")
	s.gw1 = s.e.Serve("gw1")
	for _, u := range s.users {
		c, _, err := s.e.TryDial(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		c.Retries = 0 // a retry is the replay step, done deliberately
		c.IQTimeout = 5 * time.Second
		s.clients[u] = c
	}
	s.pinned = e2e.WaitPinned(t, ctx, s.clients[s.users[0]], s.ep, e2e.CrashTool)
	// 60 s with a progress notification every 2 s: running through every
	// kill point.
	var err error
	if s.args, err = s.pinned.ValidateArguments(json.RawMessage(`{"duration":60,"steps":30}`)); err != nil {
		t.Fatal(err)
	}
	return s
}

// restart starts the second gateway on the same config and store and
// waits until its MCP session is up: the manifest in the store is
// discoverable at once, but new invokes need this process's session.
func (s *crashSetup) restart(t *testing.T, ctx context.Context) *e2e.Proc {
	t.Helper()
	gw2 := s.e.Serve("gw2")
	gw2.WaitLog("published MCP manifest", 60*time.Second)
	p := e2e.WaitPinned(t, ctx, s.clients[s.users[0]], s.ep, e2e.CrashTool)
	if p.Manifest.Version != s.pinned.Manifest.Version || p.Manifest.Hash != s.pinned.Manifest.Hash {
		t.Errorf("the republished manifest differs: %s %s, was %s %s", p.Manifest.Version, p.Manifest.Hash, s.pinned.Manifest.Version, s.pinned.Manifest.Hash)
	}
	return gw2
}

func crashRun(t *testing.T, kp killPoint) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newCrashSetup(t, ctx)
	e, users, clients, ep, pinned, args, gw1 := s.e, s.users, s.clients, s.ep, s.pinned, s.args, s.gw1

	// Admission: crashTasks invokes over crashUsers connections, crashPerClient
	// in flight each.
	invokes := make([]*sentInvoke, crashTasks)
	for i := range invokes {
		invokes[i] = &sentInvoke{user: users[i%crashUsers], req: agentclient.InvokeRequest{
			RequestID: ids.New("req-"), Tool: e2e.CrashTool, Version: pinned.Manifest.Version,
			ManifestHash: pinned.Manifest.Hash, Arguments: args,
		}}
	}
	var (
		killed       atomic.Bool
		nAccepted    atomic.Int64
		lastAccepted atomic.Int64 // unix nanoseconds
		killNow      = make(chan struct{})
		killOnce     sync.Once
		wg           sync.WaitGroup
		sentMu       sync.Mutex
		sent         []*sentInvoke
	)
	jobs := map[string]chan *sentInvoke{}
	for _, u := range users {
		jobs[u] = make(chan *sentInvoke, crashTasks)
	}
	for _, in := range invokes {
		jobs[in.user] <- in
	}
	admitStart := time.Now()
	for _, u := range users {
		close(jobs[u])
		for w := 0; w < crashPerClient; w++ {
			wg.Add(1)
			go func(c *agentclient.Client, q <-chan *sentInvoke) {
				defer wg.Done()
				for in := range q {
					if killed.Load() {
						return // never sent
					}
					sentMu.Lock()
					sent = append(sent, in)
					if kp.midAdmission > 0 && len(sent) == kp.midAdmission {
						killOnce.Do(func() { close(killNow) })
					}
					sentMu.Unlock()
					req := in.req
					acc, err := c.Invoke(ctx, ep, &req)
					if err != nil {
						in.err = err
						if !killed.Load() {
							t.Errorf("invoke %s failed before the kill: %v", in.req.RequestID, err)
						}
						continue
					}
					in.acc = acc
					lastAccepted.Store(time.Now().UnixNano())
					nAccepted.Add(1)
				}
			}(clients[u], jobs[u])
		}
	}
	if kp.midAdmission > 0 {
		select {
		case <-killNow:
		case <-ctx.Done():
			t.Fatal("admission did not reach the kill point")
		}
		// A kill mid-storm is meant to land among acceptances. On a loaded
		// machine the n-th invoke can go out before the gateway's first
		// <accepted/> comes back (59 sent, 0 accepted in one run), which is
		// a kill before admission, not in it: wait for the first one.
		testkit.WaitFor(t, time.Minute, "the first acceptance of the storm", func() bool { return nAccepted.Load() > 0 })
	} else {
		wg.Wait()
		if d := time.Until(time.Unix(0, lastAccepted.Load()).Add(kp.delay)); d > 0 {
			time.Sleep(d)
		}
	}
	killed.Store(true)
	decided := time.Now()
	acceptedAtKill := nAccepted.Load()
	sinceLast := time.Since(time.Unix(0, lastAccepted.Load()))
	gw1.Kill()
	killAt := time.Now()
	wg.Wait() // in-flight invokes end with an error or a late reply
	if t.Failed() {
		t.Fatalf("gateway log:\n%s", e2e.Tail(gw1.Log(), 4000))
	}

	var accepted, unanswered []*sentInvoke
	for _, in := range sent {
		if in.acc != nil {
			accepted = append(accepted, in)
		} else {
			unanswered = append(unanswered, in)
		}
	}
	t.Logf("kill point %s: %d sent, %d accepted (%d when the kill was decided, %v after the last acceptance; SIGKILL landed %v later), %d unanswered; the last acceptance came %v after the first send",
		kp.name, len(sent), len(accepted), acceptedAtKill, sinceLast.Round(time.Millisecond), killAt.Sub(decided).Round(time.Millisecond), len(unanswered), time.Unix(0, lastAccepted.Load()).Sub(admitStart).Round(time.Millisecond))
	if len(accepted) == 0 {
		t.Fatal("nothing was accepted before the kill")
	}

	// Restart on the same config and store. Every event committed before
	// restartAt is the first process's.
	restartAt := time.Now()
	gw2 := s.restart(t, ctx)

	dbPath := filepath.Join(e.Dir, "agentgw.db")
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// Which unanswered invokes the first process had committed anyway.
	existedBefore := map[string]bool{}
	for _, in := range unanswered {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE request_id = ?`, in.req.RequestID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		existedBefore[in.req.RequestID] = n > 0
	}

	// Every acceptance was durable: task-state answers, and an identical
	// replay returns the original acceptance.
	states := map[string]*agentclient.TaskState{}
	for _, in := range accepted {
		c := clients[in.user]
		st, err := c.State(ctx, ep, in.acc.TaskID)
		if err != nil {
			t.Errorf("accepted task %s (request %s) after restart: %v", in.acc.TaskID, in.req.RequestID, err)
			continue
		}
		states[in.acc.TaskID] = st
		req := in.req
		again, err := c.Invoke(ctx, ep, &req)
		switch {
		case err != nil:
			t.Errorf("replay of %s: %v", in.req.RequestID, err)
		case again.TaskID != in.acc.TaskID || again.Revision != 0 || again.Created != in.acc.Created || again.RetainUntil != in.acc.RetainUntil:
			t.Errorf("replay of %s = %+v, want the original %+v", in.req.RequestID, *again, *in.acc)
		}
	}
	// Unanswered invokes may or may not exist; replaying converges on
	// exactly one task.
	converged := 0
	for _, in := range unanswered {
		c := clients[in.user]
		r1, r2 := in.req, in.req
		a1, err1 := c.Invoke(ctx, ep, &r1)
		a2, err2 := c.Invoke(ctx, ep, &r2)
		if err1 != nil || err2 != nil {
			t.Errorf("replay of unanswered %s: %v / %v", in.req.RequestID, err1, err2)
			continue
		}
		if a1.TaskID != a2.TaskID || a1.Created != a2.Created {
			t.Errorf("replays of unanswered %s disagree: %+v vs %+v", in.req.RequestID, *a1, *a2)
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM tasks WHERE request_id = ?`, in.req.RequestID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("request %s has %d tasks after replays, want 1", in.req.RequestID, n)
		}
		converged++
	}

	// Stored events: revisions 1..N, each once, matching the task row; and
	// each task's fate across the crash.
	rows, err := db.QueryContext(ctx, `SELECT task_id, revision, event_id, type, payload, created_ns FROM task_events ORDER BY task_id, revision`)
	if err != nil {
		t.Fatal(err)
	}
	events := map[string][]storedEventRow{}
	for rows.Next() {
		var id string
		var r storedEventRow
		if err := rows.Scan(&id, &r.rev, &r.id, &r.typ, &r.payload, &r.created); err != nil {
			t.Fatal(err)
		}
		events[id] = append(events[id], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	type taskRow struct {
		id, requestID, state string
		revision, created    int64
		result               []byte
	}
	var taskRows []taskRow
	rows, err = db.QueryContext(ctx, `SELECT id, request_id, state, revision, created_ns, result FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r taskRow
		if err := rows.Scan(&r.id, &r.requestID, &r.state, &r.revision, &r.created, &r.result); err != nil {
			t.Fatal(err)
		}
		taskRows = append(taskRows, r)
	}
	rows.Close()

	split := restartAt.UnixNano()
	acceptedByTask := map[string]*sentInvoke{}
	for _, in := range accepted {
		acceptedByTask[in.acc.TaskID] = in
	}
	var fate = map[string]int{}
	eventIDs := map[string]bool{}
	for _, tr := range taskRows {
		evs := events[tr.id]
		for i, ev := range evs {
			if ev.rev != int64(i+1) {
				t.Errorf("task %s: event %d has revision %d (gap or duplicate)", tr.id, i, ev.rev)
				break
			}
			if eventIDs[ev.id] {
				t.Errorf("task %s: event id %s repeats", tr.id, ev.id)
			}
			eventIDs[ev.id] = true
		}
		if int64(len(evs)) != tr.revision {
			t.Errorf("task %s: revision %d but %d events", tr.id, tr.revision, len(evs))
		}
		if tr.result != nil && len(evs) > 0 && string(evs[len(evs)-1].payload) != string(tr.result) {
			t.Errorf("task %s: result differs from the terminal event", tr.id)
		}
		// State at the kill: what the first process had committed.
		atKill := "accepted"
		if tr.created >= split {
			atKill = "admitted after the restart"
		}
		var pre, post []storedEventRow
		for _, ev := range evs {
			if ev.created < split {
				pre = append(pre, ev)
			} else {
				post = append(post, ev)
			}
		}
		if len(pre) > 0 {
			last := pre[len(pre)-1]
			switch last.typ {
			case "status":
				var s struct{ State string }
				_ = json.Unmarshal(last.payload, &s)
				atKill = s.State
			case "progress":
				atKill = "running"
			default:
				atKill = last.typ
			}
		}
		switch atKill {
		case "accepted", "admitted after the restart":
			// Dispatched after the restart: running, then whatever the
			// MCP call does; never interrupted.
			if len(post) == 0 || post[0].typ != "status" || !strings.Contains(string(post[0].payload), `"running"`) {
				t.Errorf("task %s (%s at the kill) was not dispatched after the restart: events %s", tr.id, atKill, describeEvents(post))
			} else if tr.state != "running" && tr.state != "completed" {
				t.Errorf("task %s (%s at the kill) is %s after the restart, want running or completed: %s", tr.id, atKill, tr.state, describeEvents(post))
			}
			fate[atKill+"→dispatched"]++
		case "running", "input_required", "cancelling":
			if tr.state != "failed" || len(post) != 1 || post[0].typ != "failed" {
				t.Errorf("task %s was %s at the kill; now %s with post-restart events %s, want exactly one failed", tr.id, atKill, tr.state, describeEvents(post))
				break
			}
			var f struct {
				Error struct {
					Code      string `json:"code"`
					Retryable bool   `json:"retryable"`
				} `json:"error"`
			}
			if err := json.Unmarshal(post[0].payload, &f); err != nil || f.Error.Code != "agentgw:interrupted" || !f.Error.Retryable {
				t.Errorf("task %s: failed payload %s, want agentgw:interrupted retryable", tr.id, post[0].payload)
			}
			fate[atKill+"→interrupted"]++
			// The caller sees the same through task-result.
			if in := acceptedByTask[tr.id]; in != nil {
				res, err := clients[in.user].Result(ctx, ep, tr.id)
				if err != nil {
					t.Errorf("task-result of %s: %v", tr.id, err)
				} else if err := json.Unmarshal(res.Payload, &f); err != nil || res.State != "failed" || f.Error.Code != "agentgw:interrupted" || !f.Error.Retryable {
					t.Errorf("task-result of %s = %s %s, want failed agentgw:interrupted retryable", tr.id, res.State, res.Payload)
				}
				if st := states[tr.id]; st != nil && (st.State != "failed" || st.Revision != tr.revision || !st.ResultAvailable) {
					t.Errorf("task-state of %s = %+v", tr.id, *st)
				}
			}
		default:
			if len(post) != 0 {
				t.Errorf("task %s was %s at the kill and changed after the restart: %s", tr.id, atKill, describeEvents(post))
			}
			fate[atKill+"→unchanged"]++
		}
	}
	for _, in := range accepted {
		found := false
		for _, tr := range taskRows {
			if tr.id == in.acc.TaskID {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("accepted task %s (request %s) is not in the store", in.acc.TaskID, in.req.RequestID)
		}
	}
	preExisting := 0
	for _, v := range existedBefore {
		if v {
			preExisting++
		}
	}
	if fate["running→interrupted"] == 0 {
		t.Errorf("no task was running at the kill; the kill point missed the run")
	}
	keys := make([]string, 0, len(fate))
	for k := range fate {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, fate[k])
	}
	t.Logf("kill point %s: %d tasks in the store; fates:%s; %d of %d unanswered invokes had been committed, all %d converged on one task; %d events checked; run took %v",
		kp.name, len(taskRows), b.String(), preExisting, len(unanswered), converged, len(eventIDs), time.Since(began).Round(time.Millisecond))
	if t.Failed() {
		t.Logf("first gateway log (tail):\n%s", e2e.Tail(gw1.Log(), 3000))
		t.Logf("second gateway log (tail):\n%s", e2e.Tail(gw2.Log(), 3000))
	}
}

// storedEventRow is one stored event.
type storedEventRow struct {
	rev     int64
	id, typ string
	payload []byte
	created int64
}

func describeEvents(evs []storedEventRow) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "[rev %d %s %s]", ev.rev, ev.typ, ev.payload)
	}
	return b.String()
}
