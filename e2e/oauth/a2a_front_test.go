package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit/oauthharness"
)

type a2aOut struct {
	Steps []struct {
		Op     string          `json:"op"`
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
		Task   *struct {
			ID        string          `json:"id"`
			State     string          `json:"state"`
			Artifacts json.RawMessage `json:"artifacts"`
		} `json:"task"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"steps"`
	Fatal *struct {
		Message string `json:"message"`
	} `json:"fatal"`
}

// Two users through one `agentgw a2a --issuer`, with the @a2a-js/sdk
// client and bearers from the issuer: each gets the cards their JID may
// see, sends and reads their own tasks, and cannot read or cancel the
// other's; the cards declare the issuer; hostile tokens are refused with
// 401 and never logged.
func TestA2AFrontOAuthUsers(t *testing.T) {
	t.Parallel()
	x := startEnv(t, "")
	f := x.startFront(t, "a2a", "serving A2A", "--scopes", "agents")
	base := x.resource
	weather, vault := "weather@"+x.gw.Domain, "vault@"+x.gw.Domain
	run := func(tok, proto string, steps ...map[string]any) a2aOut {
		t.Helper()
		var out a2aOut
		x.node(t, "a2a/client.mjs", map[string]any{"base": base, "bearer": tok, "proto": proto, "steps": steps}, &out)
		if out.Fatal != nil {
			t.Fatalf("a2a client: %s\nfront:\n%s", out.Fatal.Message, f.stderr())
		}
		return out
	}
	aliceTok, bobTok := x.token(t, x.alice, base), x.token(t, x.bob, base)

	alice := run(aliceTok, "1.0-jsonrpc",
		map[string]any{"op": "agents"},
		map[string]any{"op": "send", "jid": vault, "skill": "echo", "data": map[string]any{"message": "alice's secret"}},
		map[string]any{"op": "get", "jid": vault, "taskOf": 1},
		map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false},
		map[string]any{"op": "card", "jid": weather},
	)
	s := alice.Steps
	if len(s) != 5 || s[0].Status != http.StatusOK || !strings.Contains(string(s[0].Body), vault) || !strings.Contains(string(s[0].Body), weather) {
		t.Fatalf("alice's agents: %+v", s)
	}
	if s[1].Task == nil || s[1].Task.State != "TASK_STATE_COMPLETED" || !strings.Contains(string(s[1].Task.Artifacts), "alice's secret") {
		t.Fatalf("alice's send: %+v %+v", s[1].Task, s[1].Error)
	}
	if s[2].Task == nil || s[2].Task.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("alice's get: %+v %+v", s[2].Task, s[2].Error)
	}
	if s[3].Task == nil || s[3].Task.ID == "" {
		t.Fatalf("alice's wait: %+v", s[3])
	}
	card := string(s[4].Body)
	if !strings.Contains(card, x.is.URL+"/.well-known/openid-configuration") || !strings.Contains(card, `"oauth"`) {
		t.Fatalf("the card does not declare the issuer: %s", card)
	}
	done, waiting := s[1].Task.ID, s[3].Task.ID

	bob := run(bobTok, "1.0-jsonrpc",
		map[string]any{"op": "agents"},
		map[string]any{"op": "card", "jid": vault},
		map[string]any{"op": "get", "jid": vault, "taskId": done},
		map[string]any{"op": "get", "jid": weather, "taskId": waiting},
		map[string]any{"op": "cancel", "jid": weather, "taskId": waiting},
		map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "bob's own"}},
	)
	b := bob.Steps
	if len(b) != 6 || strings.Contains(string(b[0].Body), vault) || !strings.Contains(string(b[0].Body), weather) {
		t.Fatalf("bob's agents: %+v", b)
	}
	if b[1].Status != http.StatusNotFound {
		t.Fatalf("bob read vault's card: %d %s", b[1].Status, b[1].Body)
	}
	for i, what := range map[int]string{2: "get alice's vault task", 3: "get alice's waiting task", 4: "cancel alice's task"} {
		if b[i].Error == nil {
			t.Errorf("bob could %s: %+v", what, b[i].Task)
		}
	}
	if b[5].Task == nil || b[5].Task.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("bob's own send: %+v %+v", b[5].Task, b[5].Error)
	}
	// Alice's task is untouched by bob's cancel; she cancels it herself.
	again := run(aliceTok, "1.0-jsonrpc",
		map[string]any{"op": "get", "jid": weather, "taskId": waiting},
		map[string]any{"op": "cancel", "jid": weather, "taskId": waiting})
	if g := again.Steps[0].Task; g == nil || (g.State != "TASK_STATE_WORKING" && g.State != "TASK_STATE_SUBMITTED") {
		t.Fatalf("alice's task after bob's cancel: %+v %+v", g, again.Steps[0].Error)
	}
	if c := again.Steps[1].Task; c == nil || c.State != "TASK_STATE_CANCELED" {
		t.Fatalf("alice cancels: %+v %+v", c, again.Steps[1].Error)
	}

	// A user logged in at the issuer (authorization code with PKCE; the
	// login name is the subject and the jid claim) is served as that JID.
	lctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	login, err := x.is.Login(lctx, x.web, "alice@example.test", base, "openid agents")
	if err != nil {
		t.Fatalf("login: %v\n%s", err, x.is.Logs.String())
	}
	viaLogin := run(login.AccessToken, "1.0-jsonrpc", map[string]any{"op": "get", "jid": weather, "taskId": waiting})
	if g := viaLogin.Steps[0].Task; g == nil || g.State != "TASK_STATE_CANCELED" {
		t.Fatalf("alice (logged in) reads her task: %+v %+v", g, viaLogin.Steps[0].Error)
	}

	// Hostile tokens, and the metadata at the root well-known URL.
	meta := "http://" + x.addr + "/.well-known/oauth-protected-resource"
	bad := x.hostile(t)
	// Another issuer's token for this very resource, and a 0.3 client with
	// a good one.
	stranger := oauthharness.Start(t, oauthharness.Options{Clients: []oauthharness.Client{x.alice},
		Resources: map[string]oauthharness.Resource{base: {Scope: "agents"}}})
	st, err := stranger.ClientCredentials(lctx, x.alice, base, "agents")
	if err != nil {
		t.Fatal(err)
	}
	bad["wrong issuer"] = st.AccessToken
	refuses(t, base+"/agents", http.MethodGet, meta, nil, bad, f)
	keepsSecret(t, f, aliceTok, bobTok)
	old := run(aliceTok, "0.3", map[string]any{"op": "send", "jid": vault, "skill": "echo", "data": map[string]any{"message": "0.3 too"}})
	if o := old.Steps[0].Task; o == nil || o.State != "completed" && o.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("alice over A2A 0.3: %+v %+v", o, old.Steps[0].Error)
	}
	resp, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Resource string `json:"resource"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if m.Resource != base {
		t.Fatalf("metadata resource %q, want %q", m.Resource, base)
	}
}
