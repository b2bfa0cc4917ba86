package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/connectorbridge/connectortest"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
	"github.com/agentgw/agentgw/testkit/pgharness"
	"github.com/agentgw/agentgw/testkit/porttest"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// The cluster test: one PostgreSQL (pgharness), one ejabberd whose
// component listener is deploy/cluster/ejabberd-listener.yml, and three
// `agentgw serve` processes on the same component domain and database,
// each with the counting MCP server (testdata/cluster/countmcp.py) behind
// the endpoint "work". ejabberd spreads every stanza over the three at
// random, so the slixmpp callers reach every instance.

const (
	clusterLease     = 2 // [cluster] lease_seconds
	clusterStorm     = 500
	clusterRounds    = 3
	clusterCallers   = 4
	clusterWorkMS    = 300
	clusterConnKey   = "cluster-conn-key-SECRET-81aa"
	clusterFormToken = "cluster-form-token-SECRET-7c2e"
)

type clusterEnv struct {
	t        *testing.T
	e        *e2e.Env
	pg       *pgharness.Server
	dsn      string
	countLog string
	configs  map[string]string
	metrics  map[string]string
	procs    map[string]*e2e.Proc
	names    []string
}

func startCluster(t *testing.T, connectorURL string) *clusterEnv {
	e2e.NeedSlixmpp(t)
	pg := pgharness.Shared(t)
	srv := xmppharness.SharedEjabberd(t, xmppharness.EjabberdOptions{Snippet: "deploy/cluster/ejabberd-listener.yml"})
	users := []string{"admin", "carol"}
	for i := range clusterCallers {
		users = append(users, fmt.Sprintf("caller%d", i))
	}
	e := e2e.Prepare(t, e2e.Options{Server: srv, Users: users})
	c := &clusterEnv{t: t, e: e, pg: pg, dsn: pg.NewDatabase(t), countLog: filepath.Join(e.Dir, "executions.log"),
		configs: map[string]string{}, metrics: map[string]string{}, procs: map[string]*e2e.Proc{}}
	if err := os.WriteFile(filepath.Join(e.Dir, "dsn"), []byte(c.dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(root, "testdata", "cluster", "countmcp.py")
	t.Setenv("AGENTGW_TEST_CONNECTOR_KEY", clusterConnKey)
	t.Setenv("AGENTGW_TEST_FORM_TOKEN", clusterFormToken)
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("gw-%d", i)
		c.names = append(c.names, name)
		addr, err := porttest.Addr("127.0.0.1") // bound later by the member
		if err != nil {
			t.Fatal(err)
		}
		c.metrics[name] = addr
		// No local domain: every caller is a remote principal and sees
		// nothing until `agentgw trust` grants it, which is how the test
		// watches a grant reach every instance.
		cfg := fmt.Sprintf(`[xmpp]
component_domain = %q
server = %q
secret_file = "component.secret"
local_domains = []
admins = ["admin@%s"]
iq_timeout_seconds = 5

[store]
driver = "postgres"
dsn_file = "dsn"

[cluster]
instance = %q
lease_seconds = %d

[tasks]
max_active_per_domain = 100000
max_active_per_principal = 100000

[metrics]
listen = %q

[log]
level = "info"

[[agents]]
jid = "work@%s"
[agents.mcp]
command = [%q, %q, %q, %q]
`, e.Domain, srv.ComponentAddr, srv.Domain, name, clusterLease, c.metrics[name], e.Domain, e2e.SystemPython, count, c.countLog, name)
		if connectorURL != "" {
			cfg += fmt.Sprintf("\n[[agents]]\njid = \"im@%s\"\n[agents.connector]\nbase_url = %q\napi_key_env = \"AGENTGW_TEST_CONNECTOR_KEY\"\n", e.Domain, connectorURL)
		}
		path := filepath.Join(e.Dir, name+".toml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		c.configs[name] = path
	}
	// Callers are remote: grant them before the instances start.
	for i := range clusterCallers {
		e.Agentgw(0, "trust", "grant", "--config", c.configs["gw-1"], "--visibility", "--invocation", e.JID(fmt.Sprintf("caller%d", i)))
	}
	for _, n := range c.names {
		c.procs[n] = e.ServeConfig(n, c.configs[n])
	}
	return c
}

// executions counts the work calls per n in the shared log.
func (c *clusterEnv) executions() map[int]int {
	data, _ := os.ReadFile(c.countLog)
	out := map[int]int{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err == nil {
			out[n]++
		}
	}
	return out
}

func (c *clusterEnv) executionLines() int {
	data, _ := os.ReadFile(c.countLog)
	return strings.Count(string(data), "\n")
}

// slix runs testdata/slixmpp/cluster.py as user and returns its lines.
func (c *clusterEnv) slix(ctx context.Context, user string, args ...string) ([]map[string]any, error) {
	full := append([]string{e2e.SlixmppScript(c.t, "cluster.py"),
		"--jid", c.e.JID(user), "--password", e2e.Password + user,
		"--server", c.e.Server.C2SAddr, "--gateway", c.e.Domain, "--ca", c.e.Server.CAFile,
		"--endpoint", "work@" + c.e.Domain, "--timeout", "600",
	}, args...)
	cmd := exec.CommandContext(ctx, e2e.SystemPython, full...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var lines []map[string]any
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	werr := cmd.Wait()
	for _, m := range lines {
		if m["ok"] != true {
			return lines, fmt.Errorf("%s: %v\n%s", user, m, errb.String())
		}
	}
	if werr != nil {
		return lines, fmt.Errorf("%s: %v\n%s", user, werr, errb.String())
	}
	return lines, nil
}

func (c *clusterEnv) db(ctx context.Context) *pgx.Conn {
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// checkStored: every accepted task is stored once, terminal, with events
// at revisions 1..its revision and nothing else.
func (c *clusterEnv) checkStored(ctx context.Context, taskIDs []string, revs map[string]int64) {
	t := c.t
	conn := c.db(ctx)
	var n, open int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE result IS NULL) FROM tasks WHERE id = ANY($1)`, taskIDs).Scan(&n, &open); err != nil {
		t.Fatal(err)
	}
	if n != len(taskIDs) || open != 0 {
		t.Fatalf("stored %d of %d accepted tasks, %d not terminal", n, len(taskIDs), open)
	}
	rows, err := conn.Query(ctx, `SELECT t.id, t.revision, array_agg(e.revision ORDER BY e.revision)
		FROM tasks t JOIN task_events e ON e.task_id = t.id WHERE t.id = ANY($1) GROUP BY t.id, t.revision`, taskIDs)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			id   string
			rev  int64
			evrs []int64
		)
		if err := rows.Scan(&id, &rev, &evrs); err != nil {
			t.Fatal(err)
		}
		seen++
		for i, r := range evrs {
			if r != int64(i+1) {
				t.Fatalf("task %s: event revisions %v have a gap", id, evrs)
			}
		}
		if int64(len(evrs)) != rev || (revs[id] != 0 && revs[id] != rev) {
			t.Fatalf("task %s: revision %d (caller saw %d), events %v", id, rev, revs[id], evrs)
		}
	}
	if seen != len(taskIDs) {
		t.Fatalf("%d of %d tasks have events", seen, len(taskIDs))
	}
}

// storm runs one round: clusterStorm invokes from clusterCallers callers,
// SIGKILL of victim once a third of them have executed, a restart of the
// victim afterwards.
func (c *clusterEnv) storm(ctx context.Context, round int, victim string) {
	t := c.t
	first := round * clusterStorm
	before := c.executionLines()
	per := clusterStorm / clusterCallers
	type result struct {
		lines []map[string]any
		err   error
	}
	results := make(chan result, clusterCallers)
	for i := range clusterCallers {
		go func() {
			lines, err := c.slix(ctx, fmt.Sprintf("caller%d", i), "--mode", "storm",
				"--first", strconv.Itoa(first+i*per), "--count", strconv.Itoa(per), "--ms", strconv.Itoa(clusterWorkMS))
			results <- result{lines, err}
		}()
	}
	testkit.WaitFor(t, 3*time.Minute, "a third of the round executed", func() bool {
		return c.executionLines()-before >= clusterStorm/3
	})
	c.procs[victim].Kill()
	killedAt := time.Now()
	var (
		ids  []string
		revs = map[string]int64{}
		byN  = map[int]map[string]any{}
	)
	for range clusterCallers {
		r := <-results
		if r.err != nil {
			t.Fatalf("round %d: %v%s", round, r.err, c.linesAbout(r.err.Error()))
		}
		for _, m := range r.lines {
			if m["check"] == "task" {
				n := int(m["n"].(float64))
				byN[n] = m
				id := m["task_id"].(string)
				ids = append(ids, id)
				revs[id] = int64(m["revision"].(float64))
			}
		}
	}
	t.Logf("round %d: %s killed; every task terminal %.1fs later", round, victim, time.Since(killedAt).Seconds())
	if len(byN) != clusterStorm {
		t.Fatalf("round %d: %d of %d request-ids accepted and found", round, len(byN), clusterStorm)
	}
	exec := c.executions()
	interrupted := 0
	for n := first; n < first+clusterStorm; n++ {
		m := byN[n]
		switch {
		case m["state"] == "completed" && exec[n] == 1:
		case m["state"] == "failed" && m["code"] == "agentgw:interrupted" && exec[n] <= 1:
			interrupted++
		default:
			t.Fatalf("round %d: task n=%d ended %v %v after %d executions", round, n, m["state"], m["code"], exec[n])
		}
	}
	c.checkStored(ctx, ids, revs)
	t.Logf("round %d: %d completed once, %d interrupted, none twice", round, clusterStorm-interrupted, interrupted)
	c.procs[victim] = c.e.ServeConfig(victim, c.configs[victim])
}

// linesAbout returns, for a failure naming task ids, every member's log
// lines that mention them (and the members' warnings), so a stuck task can
// be followed from admission to where it stopped.
func (c *clusterEnv) linesAbout(failure string) string {
	tasks := taskIDPattern.FindAllString(failure, 4)
	var b strings.Builder
	for _, name := range c.names {
		p := c.procs[name]
		if p == nil {
			continue
		}
		for _, l := range strings.Split(p.Log(), "\n") {
			hit := strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")
			for _, id := range tasks {
				hit = hit || strings.Contains(l, id)
			}
			if hit && b.Len() < 64<<10 {
				fmt.Fprintf(&b, "\n  %s: %.600s", name, l)
			}
		}
	}
	if len(tasks) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := c.db(ctx).Query(ctx, `SELECT id, state, revision, dispatched, owner, (updated_ns - created_ns) / 1000000 FROM tasks WHERE id = ANY($1)`, tasks)
		if err != nil {
			fmt.Fprintf(&b, "\n  reading the stored tasks: %v", err)
		} else {
			for rows.Next() {
				var (
					id, state, owner string
					rev, ms          int64
					dispatched       bool
				)
				if rows.Scan(&id, &state, &rev, &dispatched, &owner, &ms) == nil {
					fmt.Fprintf(&b, "\n  stored: %s %s@%d dispatched=%v owner=%q updated %d ms after creation", id, state, rev, dispatched, owner, ms)
				}
			}
			rows.Close()
		}
		for _, q := range []string{`SELECT row_to_json(x)::text FROM instances x`, `SELECT row_to_json(x)::text FROM task_counts x`,
			`SELECT row_to_json(x)::text FROM (SELECT * FROM task_signals LIMIT 20) x`} {
			rows, err := c.db(ctx).Query(ctx, q)
			if err != nil {
				fmt.Fprintf(&b, "\n  %s: %v", q, err)
				continue
			}
			for rows.Next() {
				var j string
				if rows.Scan(&j) == nil {
					fmt.Fprintf(&b, "\n  %.300s", j)
				}
			}
			rows.Close()
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nmember log lines about " + strings.Join(tasks, ", ") + " and warnings:" + b.String()
}

var taskIDPattern = regexp.MustCompile(`task-[A-Za-z0-9_-]{8,}`)

// directoryOf lists the gateway's directory as user sees it.
func directoryOf(ctx context.Context, c *agentclient.Client, gw string) ([]string, error) {
	page, err := c.Items(ctx, e2e.MustJID(gw), ns.Directory, 50, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range page.Items {
		out = append(out, it.JID)
	}
	return out, nil
}

// sameOnEvery asks often enough that, with ejabberd picking an instance at
// random per stanza, every one of the three answers (the chance that one
// never does in 15 tries is under 1 %), and requires each answer to satisfy
// ok.
// soonOnEvery waits until a change made on one instance shows on every
// one: 15 answers in a row (spread over the instances) satisfy ok. The
// instances poll once a second, so a fixed one-second sleep before
// sameOnEvery raced that poll on a loaded machine.
func soonOnEvery(t *testing.T, what string, ask func() ([]string, error), ok func([]string) bool) {
	t.Helper()
	start := time.Now()
	testkit.WaitFor(t, testkit.MinWait, what, func() bool {
		for range 15 {
			if got, err := ask(); err != nil || !ok(got) {
				return false
			}
		}
		return true
	})
	t.Logf("%s: on every instance after %v", what, time.Since(start).Round(time.Millisecond))
}

func sameOnEvery(t *testing.T, what string, ask func() ([]string, error), ok func([]string) bool) {
	t.Helper()
	for i := range 15 {
		got, err := ask()
		if err != nil || !ok(got) {
			t.Fatalf("%s: answer %d: %v %v", what, i, got, err)
		}
	}
}

func TestCluster(t *testing.T) {
	conn, err := connectortest.Start(connectortest.Options{APIKey: clusterConnKey, FormToken: clusterFormToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	c := startCluster(t, conn.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := c.e
	gw := e.Domain

	t.Run("MetricsByInstance", func(t *testing.T) {
		for name, addr := range c.metrics {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `agentgw_admissions_total{gateway_instance="`+name+`"`) {
				t.Fatalf("%s /metrics lacks its instance label", name)
			}
		}
	})

	t.Run("StormWithKill9", func(t *testing.T) {
		rounds := clusterRounds
		if v, err := strconv.Atoi(os.Getenv("AGENTGW_CLUSTER_ROUNDS")); err == nil && v > 0 {
			rounds = v // shorter local runs
		}
		for round := range rounds {
			c.storm(ctx, round, c.names[round%len(c.names)])
		}
	})

	t.Run("ReplayOnTwoInstances", func(t *testing.T) {
		before := c.executions()
		lines, err := c.slix(ctx, "caller0", "--mode", "replay", "--first", "100000", "--count", "20", "--ms", "0")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range lines {
			if m["check"] == "replay" {
				n++
			}
		}
		if n != 20 {
			t.Fatalf("%d replay pairs reported", n)
		}
		testkit.WaitFor(t, time.Minute, "the replayed tasks executed", func() bool {
			x := c.executions()
			for i := 100000; i < 100020; i++ {
				if x[i] == 0 {
					return false
				}
			}
			return true
		})
		time.Sleep(time.Second)
		x := c.executions()
		for i := 100000; i < 100020; i++ {
			if x[i]-before[i] != 1 {
				t.Fatalf("request n=%d sent twice at once executed %d times", i, x[i])
			}
		}
	})

	// ejabberd routes each IQ to a random member, so in six rounds the
	// cancel and the answer reach a member that does not own the task
	// (two chances in three each time); without the owner being told, such
	// a task would stay cancelling or waiting for input until its
	// deadline. (tasks/cluster_test.go checks the same deterministically
	// against PostgreSQL.)
	t.Run("CancelAndInputThroughAnyInstance", func(t *testing.T) {
		lines, err := c.slix(ctx, "caller2", "--mode", "signals", "--first", "200000", "--count", "6")
		if err != nil {
			t.Fatal(err)
		}
		var cancels, inputs int
		for _, m := range lines {
			switch m["check"] {
			case "cancel":
				cancels++
			case "input":
				inputs++
			}
		}
		if cancels != 6 || inputs != 6 {
			t.Fatalf("%d cancels and %d answers reported, want 6 each", cancels, inputs)
		}
	})

	t.Run("GrantAndDeactivationOnEveryInstance", func(t *testing.T) {
		carol, _ := e.DialOn(e.Server, "carol")
		admin, _ := e.DialOn(e.Server, "caller0")
		ask := func(cl *agentclient.Client) func() ([]string, error) {
			return func() ([]string, error) { return directoryOf(ctx, cl, gw) }
		}
		sameOnEvery(t, "carol before any grant", ask(carol), func(l []string) bool { return len(l) == 0 })
		e.Agentgw(0, "trust", "grant", "--config", c.configs["gw-2"], "--visibility", e.JID("carol"))
		soonOnEvery(t, "carol after the grant", ask(carol), func(l []string) bool { return slices.Contains(l, "work@"+gw) })

		manifest := filepath.Join(e.Dir, "static.json")
		os.WriteFile(manifest, []byte(e2e.DefaultManifest("static@"+gw)), 0o644)
		e.Agentgw(0, "admin", "register", "--config", c.configs["gw-3"], "--activate", manifest)
		soonOnEvery(t, "static after activation", ask(admin), func(l []string) bool { return slices.Contains(l, "static@"+gw) })
		e.Agentgw(0, "admin", "deactivate", "--config", c.configs["gw-1"], "static@"+gw)
		soonOnEvery(t, "static after deactivation", ask(admin), func(l []string) bool {
			return slices.Contains(l, "work@"+gw) && !slices.Contains(l, "static@"+gw)
		})
	})

	t.Run("ConnectorSurvivesHolderDeath", func(t *testing.T) {
		im := "im@" + gw
		e.Agentgw(0, "connector", "auth", "--config", c.configs["gw-1"], "--flow", "token_form",
			"--field", "account=alice", "--field-env", "token=AGENTGW_TEST_FORM_TOKEN", im)
		caller, _ := e.DialOn(e.Server, "caller1")
		call := func() error {
			res, err := caller.Call(ctx, e2e.MustJID(im), "echo", json.RawMessage(`{"text":"hello cluster"}`), agentclient.CallOptions{})
			if err != nil {
				return err
			}
			if res.State != "completed" || !strings.Contains(string(res.Payload), "hello cluster") {
				return fmt.Errorf("echo ended %s: %s", res.State, res.Payload)
			}
			return nil
		}
		var last error
		testkit.WaitFor(t, time.Minute, "the connector agent answering", func() bool { last = call(); return last == nil })
		holder := c.leaseHolder(ctx, "connector:"+im)
		if holder == "" {
			t.Fatal("no instance holds the connector's lease")
		}
		c.procs[holder].Kill()
		testkit.WaitFor(t, time.Minute, "the connector agent answering again after its holder died", func() bool {
			last = call()
			return last == nil
		})
		if now := c.leaseHolder(ctx, "connector:"+im); now == holder || now == "" {
			t.Fatalf("lease holder after the death of %s: %q", holder, now)
		}
		c.procs[holder] = e.ServeConfig(holder, c.configs[holder])
	})
}

func (c *clusterEnv) leaseHolder(ctx context.Context, name string) string {
	var h string
	c.db(ctx).QueryRow(ctx, `SELECT holder FROM agentgw_leases WHERE name = $1 AND expires > now()`, name).Scan(&h)
	return h
}
