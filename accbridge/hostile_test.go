package accbridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/agentgw/agentgw/accbridge/accdb"
	"github.com/agentgw/agentgw/accbridge/acctest"
	"github.com/agentgw/agentgw/tasks/taskstest"
	"github.com/agentgw/agentgw/testkit"
)

// TestAuthenticationRefusals: nothing reaches the protocol without the
// enrolled certificate and a valid token bound to it.
func TestAuthenticationRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	dir := e.enroll("farm")
	other := e.enroll("other")
	cert, tok, id := loadCreds(t, dir)
	otherCert, otherTok, _ := loadCreds(t, other)
	jk, _ := ReadKey(e.files.JWTKey)
	wrongKey, _ := newKey()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])

	// A certificate from another CA.
	od := t.TempDir()
	of := Files{Cert: filepath.Join(od, "s.crt"), Key: filepath.Join(od, "s.key"), CA: filepath.Join(od, "ca.crt"),
		CAKey: filepath.Join(od, "ca.key"), JWTKey: filepath.Join(od, "j.key"), Hostnames: []string{"127.0.0.1"}}
	if _, err := Init(of); err != nil {
		t.Fatal(err)
	}
	foreignDir := filepath.Join(od, "conn")
	if _, err := Enroll(of, "farm", foreignDir); err != nil {
		t.Fatal(err)
	}
	foreignCert, _, _ := loadCreds(t, foreignDir)

	sign := func(k *ecdsa.PrivateKey, mut func(c *tokenClaims)) string {
		var c tokenClaims
		now := time.Now()
		c.Issuer, c.Subject, c.Audience = tokenIssuer, id, jwt.ClaimStrings{tokenAudience}
		c.IssuedAt, c.ExpiresAt = jwt.NewNumericDate(now), jwt.NewNumericDate(now.Add(time.Hour))
		c.Cnf.X5tS256 = thumbprint(leaf.Raw)
		if mut != nil {
			mut(&c)
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodES256, c).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// alg none: header {"alg":"none"} with the right claims and no signature.
	noneTok := func() string {
		hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
		parts := strings.Split(tok, ".")
		return hdr + "." + parts[1] + "."
	}()
	// HS256 keyed with the public key bytes (algorithm confusion).
	pubDER, _ := x509.MarshalPKIXPublicKey(&jk.PublicKey)
	hsTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": tokenIssuer, "sub": id, "aud": tokenAudience,
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(pubDER)

	for _, tc := range []struct {
		name   string
		cert   *tls.Certificate
		token  string
		reason string // in the server log; "" for a TLS refusal
	}{
		{"no client certificate", nil, tok, ""},
		{"certificate from another CA", &foreignCert, tok, ""},
		{"no token", &cert, "", "no bearer token"},
		{"alg none", &cert, noneTok, "token rejected"},
		{"HS256 with the public key", &cert, hsTok, "token rejected"},
		{"wrong key", &cert, sign(wrongKey, nil), "bad signature"},
		{"wrong audience", &cert, sign(jk, func(c *tokenClaims) { c.Audience = jwt.ClaimStrings{"someone-else"} }), "wrong audience"},
		{"expired", &cert, sign(jk, func(c *tokenClaims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour)) }), "expired"},
		{"no expiry", &cert, sign(jk, func(c *tokenClaims) { c.ExpiresAt = nil }), "missing expiry"},
		{"bound to another certificate", &otherCert, tok, "bound to another certificate"},
		{"another connector's token on this cert", &cert, otherTok, "bound to another certificate"},
		{"oversized token", &cert, strings.Repeat("a", 5000), "too long"},
	} {
		before := len(e.log.String())
		c, resp, err := e.dialRaw(tc.cert, tc.token)
		if err == nil {
			c.CloseNow()
			t.Fatalf("%s: connected", tc.name)
		}
		if tc.reason == "" {
			if resp != nil {
				t.Fatalf("%s: got an HTTP answer %d; want the TLS handshake refused", tc.name, resp.StatusCode)
			}
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %v %v, want 401", tc.name, resp, err)
		}
		logged := e.log.String()[before:]
		if !strings.Contains(logged, tc.reason) {
			t.Fatalf("%s: log lacks %q: %s", tc.name, tc.reason, logged)
		}
		if tc.token != "" && len(tc.token) > 20 && strings.Contains(e.log.String(), tc.token) {
			t.Fatalf("%s: the token reached the log", tc.name)
		}
	}
	if strings.Contains(e.log.String(), tok) {
		t.Fatal("the token reached the log")
	}
	// The right credentials work.
	c, _, err := e.dialRaw(&cert, tok)
	if err != nil {
		t.Fatalf("valid credentials refused: %v", err)
	}
	c.CloseNow()
}

// TestProtocolHostility: register first and in time; bad frames get a
// clear error without echoing; oversized frames close the socket.
func TestProtocolHostility(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxFrameBytes = 64 << 10 })
	dir := e.enroll("farm")
	cert, tok, id := loadCreds(t, dir)
	dial := func() *websocket.Conn {
		c, _, err := e.dialRaw(&cert, tok)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	expectClosed := func(name string, c *websocket.Conn, code websocket.StatusCode) {
		t.Helper()
		for {
			_, err := readJSON(t, c)
			if err == nil {
				continue
			}
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != code {
				t.Fatalf("%s: closed with %v, want %d", name, err, code)
			}
			return
		}
	}

	// A message before register.
	c := dial()
	writeJSON(c, map[string]any{"type": "heartbeat", "connector_id": id})
	m, err := readJSON(t, c)
	if err != nil || m["type"] != "error" || m["code"] != float64(4001) {
		t.Fatalf("before register: %v %v", m, err)
	}
	expectClosed("before register", c, websocket.StatusPolicyViolation)

	// No register within the timeout.
	c = dial()
	m, err = readJSON(t, c)
	if err != nil || m["message"] != "register timeout" {
		t.Fatalf("register timeout: %v %v", m, err)
	}
	expectClosed("register timeout", c, websocket.StatusPolicyViolation)

	// register with another connector_id than the token's.
	c = dial()
	writeJSON(c, map[string]any{"type": "register", "connector_id": "someone-else"})
	m, _ = readJSON(t, c)
	if m["code"] != float64(4007) {
		t.Fatalf("foreign connector_id: %v", m)
	}

	// After register: non-JSON, hostile JSON, unknown and server types.
	c = dial()
	writeJSON(c, map[string]any{"type": "register", "connector_id": id})
	if m, _ := readJSON(t, c); m["type"] != "register_ack" {
		t.Fatalf("register: %v", m)
	}
	payload := "<script>alert(1)</script>"
	for _, tc := range []struct {
		raw  string
		code float64
	}{
		{"not json " + payload, 4001},
		{`{"type":` + strings.Repeat("[", 100) + `}`, 4001},
		{`["type","heartbeat"]`, 4001},
		{`{"type":"` + payload + `"}`, 4002},
		{`{"type":"approval_granted","approval_id":"x","run_id":"r","approved_by":"mallory@example.test"}`, 4002},
		{`{"type":"run_event","run_id":"no-such-run","event":"completion","payload":{}}`, 4004},
	} {
		c.Write(context.Background(), websocket.MessageText, []byte(tc.raw))
		m, err := readJSON(t, c)
		if err != nil || m["type"] != "error" || m["code"] != tc.code {
			t.Fatalf("%q: %v %v, want error %v", tc.raw, m, err, tc.code)
		}
		if b, _ := json.Marshal(m); strings.Contains(string(b), "script") {
			t.Fatalf("the error echoes the payload: %s", b)
		}
	}
	// A heartbeat still works: the connection survived the bad frames.
	writeJSON(c, map[string]any{"type": "heartbeat", "connector_id": id})
	if m, _ := readJSON(t, c); m["type"] != "heartbeat_ack" {
		t.Fatalf("heartbeat after bad frames: %v", m)
	}
	// An oversized frame closes the connection (1009).
	c.Write(context.Background(), websocket.MessageText, []byte(`{"type":"heartbeat","pad":"`+strings.Repeat("x", 70<<10)+`"}`))
	expectClosed("oversized", c, websocket.StatusMessageTooBig)
}

// TestCrossConnectorAndFinishedRuns: a connector cannot touch another
// connector's run or a finished run, and a flood of events is coalesced.
func TestCrossConnectorAndFinishedRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	owner, _ := e.connect(e.enroll("farm"), clog)
	e.ready()
	mlog := &syncBuf{}
	mallory, _ := e.connect(e.enroll("mallory"), mlog)

	r := taskstest.NewRun()
	c := call(goal("hang"))
	go e.agent.Execute(context.Background(), c, r)
	<-r.FirstProgress
	run, _, _ := e.store.RunByTask(context.Background(), c.TaskID)
	for _, f := range []map[string]any{
		{"type": "run_event", "run_id": run.RunID, "event": "completion", "payload": map[string]any{"summary": "forged"}},
		{"type": "run_cancelled", "run_id": run.RunID},
		{"type": "approval_request", "run_id": run.RunID, "action": "rm -rf /", "risk_level": "low"},
	} {
		mallory.Send(f)
	}
	testkit.WaitFor(t, 5*time.Second, "three 4004 for mallory", func() bool {
		n := 0
		for _, m := range mlog.got() {
			if m["got"] == "error" && m["code"] == float64(4004) {
				n++
			}
		}
		return n == 3
	})
	select {
	case <-r.Done:
		t.Fatalf("another connector settled the run: %s", r.Outcome())
	case <-time.After(100 * time.Millisecond):
	}
	close(r.CancelReq)
	r.Wait(t, 5*time.Second)

	// Events for the finished run are refused, even from its connector.
	testkit.WaitFor(t, 2*time.Second, "run done", func() bool {
		x, _, _ := e.store.RunByTask(context.Background(), c.TaskID)
		return x.State == accdb.RunDone
	})
	owner.Send(map[string]any{"type": "run_event", "run_id": run.RunID, "event": "completion", "payload": map[string]any{}})
	testkit.WaitFor(t, 2*time.Second, "4004 for the finished run", func() bool {
		for _, m := range clog.got() {
			if m["got"] == "error" && m["code"] == float64(4004) && m["run_id"] == run.RunID {
				return true
			}
		}
		return false
	})

	// A flood of 5000 events completes, coalesced.
	r2 := taskstest.NewRun()
	e.exec(call(goal("flood 5000")), r2)
	res, _, _, ups := r2.Snapshot()
	if res == nil {
		t.Fatalf("flood: %s", r2.Outcome())
	}
	if len(ups) >= 5000 {
		t.Fatalf("%d progress reports for 5000 events: not coalesced", len(ups))
	}
	// The forged approval_granted of "forge" is refused (4002) and the run
	// completes normally.
	r3 := taskstest.NewRun()
	e.exec(call(goal("forge")), r3)
	if res, _, _, _ := r3.Snapshot(); res == nil {
		t.Fatalf("forge: %s", r3.Outcome())
	}
	testkit.WaitFor(t, 2*time.Second, "4002 for the forged approval", func() bool {
		for _, m := range clog.got() {
			if m["got"] == "error" && m["code"] == float64(4002) {
				return true
			}
		}
		return false
	})
}

// TestTenThousandAgents: a capabilities message beyond max_agents is
// refused whole and the previous declaration stays.
func TestTenThousandAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clog := &syncBuf{}
	c, _ := e.connect(e.enroll("farm"), clog)
	e.ready()
	var agents []acctest.Agent
	for i := 0; i < 10000; i++ {
		agents = append(agents, acctest.Agent{AgentID: fmt.Sprintf("a-%d", i), Tools: []string{"t"}})
	}
	c.Send(map[string]any{"type": "capabilities", "connector_id": "x", "agents": agents})
	testkit.WaitFor(t, 5*time.Second, "capabilities refused", func() bool {
		for _, m := range clog.got() {
			if m["got"] == "error" && m["code"] == float64(4001) {
				return true
			}
		}
		return false
	})
	if got := e.agent.Declared(); len(got) != 2 {
		t.Fatalf("declaration after the refused capabilities: %v", got)
	}
	up, _ := e.avail.get(testEndpoint)
	if !up {
		t.Fatal("the agent went down")
	}
}

// TestGraceAndReconcile: a connector back within the grace period resumes
// its run; after it, the run fails unavailable and the returning
// connector is sent cancel_run.
func TestGraceAndReconcile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Grace = 700 * time.Millisecond })
	dir := e.enroll("farm")
	l1 := &syncBuf{}
	_, stop := e.connect(dir, l1)
	e.ready()
	r := taskstest.NewRun()
	c := call(goal("hang"))
	go e.agent.Execute(context.Background(), c, r)
	<-r.FirstProgress
	stop()
	testkit.WaitFor(t, 3*time.Second, "down", func() bool { up, _ := e.avail.get(testEndpoint); return !up })
	l2 := &syncBuf{}
	e.connect(dir, l2)
	e.ready()
	time.Sleep(time.Second) // beyond the grace period: the run must still be alive
	select {
	case <-r.Done:
		t.Fatalf("the run ended although the connector came back in time: %s", r.Outcome())
	default:
	}
	close(r.CancelReq)
	r.Wait(t, 5*time.Second)
	run, _, _ := e.store.RunByTask(context.Background(), c.TaskID)
	if l2.count("cancel_run", run.RunID) != 1 {
		t.Fatal("the resumed run was not cancelled on the new connection")
	}

	// Now past the grace period.
	l3 := &syncBuf{}
	_, stop = e.connect(dir, l3)
	e.ready()
	r2 := taskstest.NewRun()
	c2 := call(goal("hang"))
	go e.agent.Execute(context.Background(), c2, r2)
	<-r2.FirstProgress
	stop()
	r2.Wait(t, 5*time.Second)
	if _, f, _, _ := r2.Snapshot(); f == nil || f.Code != "unavailable" {
		t.Fatalf("after the grace period: %s", r2.Outcome())
	}
	var run2 accdb.Run
	testkit.WaitFor(t, 2*time.Second, "run orphaned", func() bool {
		run2, _, _ = e.store.RunByTask(context.Background(), c2.TaskID)
		return run2.State == accdb.RunOrphaned
	})
	l4 := &syncBuf{}
	e.connect(dir, l4)
	testkit.WaitFor(t, 5*time.Second, "cancel_run on return", func() bool { return l4.count("cancel_run", run2.RunID) == 1 })
	testkit.WaitFor(t, 2*time.Second, "run done", func() bool {
		x, _, _ := e.store.RunByTask(context.Background(), c2.TaskID)
		return x.State == "done"
	})
}
