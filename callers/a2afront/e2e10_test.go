package a2afront_test

// A2A 1.0 through `agentgw a2a`: the JS SDK 1.3.0's 1.0 Client (made by
// its ClientFactory from the agent's card, A2A-Version: 1.0) over JSON-RPC
// and HTTP+JSON, through Prosody to a running gateway; and the version
// negotiation and bad input of the 1.0 interfaces.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestA2AFront10(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	echoes := 0
	for _, proto := range []string{"1.0-jsonrpc", "1.0-rest"} {
		t.Run(proto, func(t *testing.T) {
			ctxID := "ctx-" + proto
			steps := x.runProto(t, proto, nil,
				map[string]any{"op": "card", "jid": weather},
				map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "hi from 1.0"}, "messageId": "m-" + proto, "contextId": ctxID},
				map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "hi from 1.0"}, "messageId": "m-" + proto, "contextId": ctxID},
				map[string]any{"op": "stream", "jid": weather, "skill": "slow", "data": map[string]any{}, "contextId": ctxID},
				map[string]any{"op": "stream", "jid": weather, "skill": "ask", "data": map[string]any{}, "contextId": ctxID},
				map[string]any{"op": "stream", "jid": weather, "taskOf": 4, "data": map[string]any{"unit": "F"}, "contextId": ctxID},
				map[string]any{"op": "get", "jid": weather, "taskOf": 4},
				map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false, "contextId": ctxID},
				map[string]any{"op": "cancel", "jid": weather, "taskOf": 7},
				map[string]any{"op": "send", "jid": weather, "skill": "fail", "data": map[string]any{}, "contextId": ctxID},
			)
			for _, s := range steps {
				noError(t, s)
			}
			var card struct {
				ProtocolVersion     string `json:"protocolVersion"`
				SupportedInterfaces []struct {
					URL             string `json:"url"`
					ProtocolBinding string `json:"protocolBinding"`
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"supportedInterfaces"`
			}
			if err := json.Unmarshal(steps[0].Body, &card); err != nil {
				t.Fatalf("card: %v", err)
			}
			ifaces := map[string]string{}
			for _, i := range card.SupportedInterfaces {
				ifaces[i.ProtocolBinding+" "+i.ProtocolVersion] = i.URL
			}
			if !strings.HasSuffix(ifaces["JSONRPC 1.0"], "/agents/"+weather) || !strings.HasSuffix(ifaces["HTTP+JSON 1.0"], "/agents/"+weather+"/rest") ||
				ifaces["JSONRPC 0.3"] == "" || card.ProtocolVersion != "0.3.0" {
				t.Errorf("card interfaces: %s", steps[0].Body)
			}

			e1, e2 := steps[1].Task, steps[2].Task
			if e1 == nil || e1.State != "TASK_STATE_COMPLETED" || len(e1.Artifacts) != 1 || !strings.Contains(fmt.Sprint(e1.Artifacts[0].Parts), "hi from 1.0") {
				t.Errorf("echo: %+v", e1)
			}
			if e1 != nil && (e2 == nil || e2.ID != e1.ID) {
				t.Errorf("retried messageId made another task: %v vs %+v", e1.ID, e2)
			}
			if e1 != nil && e1.ContextID != ctxID {
				t.Errorf("context id %q, want the client's %q", e1.ContextID, ctxID)
			}
			echoes++

			st := states(steps[3].Events)
			if len(st) < 5 || st[len(st)-1] != "TASK_STATE_COMPLETED" || st[len(st)-2] != "artifact" {
				t.Errorf("slow stream states %v", st)
			}
			progress := 0
			for _, e := range steps[3].Events {
				if e.Kind == "status" && e.State == "TASK_STATE_WORKING" && strings.Contains(text(e.Message), "%") {
					progress++
				}
			}
			if progress != 3 {
				t.Errorf("slow stream had %d progress updates, want 3", progress)
			}
			ask := steps[4].Events
			if len(ask) == 0 || ask[len(ask)-1].State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(text(ask[len(ask)-1].Message), "Which unit?") {
				t.Errorf("ask stream: %+v", ask)
			}
			if ans := states(steps[5].Events); len(ans) == 0 || ans[len(ans)-1] != "TASK_STATE_COMPLETED" {
				t.Errorf("answer stream %v", ans)
			}
			if g := steps[6].Task; g == nil || g.State != "TASK_STATE_COMPLETED" || len(g.Artifacts) != 1 {
				t.Errorf("get after answer: %+v", g)
			}
			if w := steps[7].Task; w == nil || (w.State != "TASK_STATE_SUBMITTED" && w.State != "TASK_STATE_WORKING") {
				t.Errorf("non-blocking send: %+v", w)
			}
			if c := steps[8].Task; c == nil || c.State != "TASK_STATE_CANCELED" {
				t.Errorf("cancel: %+v", c)
			}
			if f := steps[9].Task; f == nil || f.State != "TASK_STATE_FAILED" || !strings.Contains(text(f.Message), "com.example:broken") {
				t.Errorf("fail: %+v", f)
			}

			// ListTasks with cursor paging, two at a time, each page from a
			// new client process: the five tasks of this context, newest
			// update first, each exactly once.
			seen := map[string]bool{}
			token := ""
			pages := 0
			for {
				l := x.runProto(t, proto, nil, map[string]any{"op": "list", "jid": weather, "contextId": ctxID, "pageSize": 2, "pageToken": token})[0]
				noError(t, l)
				if l.List == nil {
					t.Fatalf("list: %+v", l)
				}
				pages++
				if len(l.List.Tasks) > 2 || l.List.TotalSize != 5 {
					t.Errorf("page %d: %d tasks, total %d", pages, len(l.List.Tasks), l.List.TotalSize)
				}
				for _, tk := range l.List.Tasks {
					if seen[tk.ID] {
						t.Errorf("task %s listed twice", tk.ID)
					}
					seen[tk.ID] = true
					if tk.ContextID != ctxID || len(tk.Artifacts) != 0 {
						t.Errorf("listed task %+v", tk)
					}
				}
				token = l.List.NextPageToken
				if token == "" || pages > 5 {
					break
				}
			}
			if len(seen) != 5 || pages != 3 || !seen[e1.ID] {
				t.Errorf("paged listing saw %d tasks in %d pages, want 5 in 3", len(seen), pages)
			}

			// Subscribe from a new client to a running task, cancelled by a
			// third: the subscription streams it to canceled.
			w := x.runProto(t, proto, nil, map[string]any{"op": "send", "jid": weather, "skill": "wait", "data": map[string]any{}, "blocking": false})[0]
			noError(t, w)
			resub := make(chan []step, 1)
			streaming := make(chan struct{})
			go func() {
				resub <- x.runProto(t, proto, streaming, map[string]any{"op": "resubscribe", "jid": weather, "taskId": w.Task.ID, "signal": "first-event"})
			}()
			select {
			case <-streaming:
			case rs := <-resub:
				resub <- rs
			case <-time.After(2 * time.Minute):
				t.Fatal("the subscription never streamed")
			}
			x.runProto(t, proto, nil, map[string]any{"op": "cancel", "jid": weather, "taskId": w.Task.ID})
			rs := <-resub
			noError(t, rs[0])
			if st := states(rs[0].Events); len(st) < 2 || st[0] != "TASK_STATE_WORKING" || st[len(st)-1] != "TASK_STATE_CANCELED" {
				t.Errorf("subscribe to a running task: %v", st)
			}
		})
	}
	n := 0
	for _, ex := range x.weather.Calls() {
		if ex.Tool == "echo" {
			n++
		}
	}
	if n != echoes {
		t.Errorf("echo executed %d times for %d distinct messageIds", n, echoes)
	}

	// A 0.3 client on the same front, same run.
	old := x.run(t, map[string]any{"op": "send", "jid": weather, "skill": "echo", "data": map[string]any{"message": "still 0.3"}})
	noError(t, old[0])
	if o := old[0].Task; o == nil || o.State != "TASK_STATE_COMPLETED" {
		t.Errorf("0.3 client after 1.0: %+v", old[0])
	}
}

// Version negotiation and bad input on the 1.0 interfaces: clear errors
// that never echo the payload.
func TestA2AFront10BadInput(t *testing.T) {
	t.Parallel()
	x := start(t, false)
	weather := "weather@" + x.env.Domain
	const marker = "ZZECHOZZ"
	v1 := map[string]string{"A2A-Version": "1.0"}
	cases := []struct {
		name     string
		step     map[string]any
		wantCode string
	}{
		{"unsupported version", map[string]any{"headers": map[string]string{"A2A-Version": "9.9"}, "body": `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"` + marker + `"}}`}, "-32009"},
		{"1.0 method under 0.3", map[string]any{"body": `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`}, "-32601"},
		{"not json", map[string]any{"headers": v1, "body": `{` + marker}, "-32700"},
		{"unknown method", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"` + marker + `"}`}, "-32601"},
		{"bad part", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"` + marker + `":1}]}}}`}, "-32602"},
		{"wrong type", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":{"` + marker + `":1}}}`}, "-32602"},
		{"unknown task", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"` + marker + `<>"}}`}, "-32001"},
		{"bad page token", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageToken":"` + marker + `"}}`}, "-32602"},
		{"bad status", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"status":"` + marker + `"}}`}, "-32602"},
		{"huge page", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":100000}}`}, "-32602"},
		{"stream bad task", map[string]any{"headers": v1, "body": `{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":"` + marker + `!"}}`}, "-32001"},
		{"rest bad task id", map[string]any{"method": "GET", "path": "/rest/tasks/" + marker + "%3Cscript%3E", "headers": v1}, "404"},
		{"rest bad body", map[string]any{"path": "/rest/message:send", "headers": v1, "body": `{"message":{"parts":[{"` + marker + `":1}]}}`}, "400"},
		{"rest unsupported version", map[string]any{"method": "GET", "path": "/rest/tasks/abc", "headers": map[string]string{"A2A-Version": "2.1"}}, "400"},
	}
	var steps []map[string]any
	for _, c := range cases {
		s := map[string]any{"op": "raw", "jid": weather}
		for k, v := range c.step {
			s[k] = v
		}
		steps = append(steps, s)
	}
	res := x.runProto(t, "0.3", nil, steps...)
	for i, c := range cases {
		r := res[i]
		var body string // the raw op returns the body as text
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("%s: %v %s", c.name, err, r.Body)
		}
		var got string
		if strings.HasPrefix(c.wantCode, "-") {
			var resp struct {
				Error struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			// A body may be the JSON or an SSE frame holding it.
			_ = json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(body), "data: ")), &resp)
			got = fmt.Sprint(resp.Error.Code)
		} else {
			got = fmt.Sprint(r.Status)
		}
		if got != c.wantCode {
			t.Errorf("%s: got %s, want %s (status %d, body %s)", c.name, got, c.wantCode, r.Status, body)
		}
		if strings.Contains(body, marker) {
			t.Errorf("%s: the answer echoes the payload: %s", c.name, body)
		}
	}
}
