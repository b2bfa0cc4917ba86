package mcpfront

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

// mcpOps maps MCP methods to the operation classes whose scopes they need
// (--scope-for; docs/oauth.md). tasks/get and tasks/list read a task's
// state, like A2A's GetTask and ListTasks; tasks/result, tasks/update and
// tasks/cancel act on a running task (its outcome, its input, its end).
var mcpOps = map[string]oauthrs.Op{
	"initialize":               oauthrs.OpRead,
	"ping":                     oauthrs.OpRead,
	"tools/list":               oauthrs.OpRead,
	"resources/list":           oauthrs.OpRead,
	"resources/templates/list": oauthrs.OpRead,
	"resources/read":           oauthrs.OpRead,
	"resources/subscribe":      oauthrs.OpRead,
	"resources/unsubscribe":    oauthrs.OpRead,
	"prompts/list":             oauthrs.OpRead,
	"prompts/get":              oauthrs.OpRead,
	"completion/complete":      oauthrs.OpRead,
	"logging/setLevel":         oauthrs.OpRead,
	"server/discover":          oauthrs.OpRead,
	"tasks/get":                oauthrs.OpRead,
	"tasks/list":               oauthrs.OpRead,
	"tools/call":               oauthrs.OpInvoke,
	"tasks/result":             oauthrs.OpSteer,
	"tasks/update":             oauthrs.OpSteer,
	"tasks/cancel":             oauthrs.OpSteer,
}

// opsOf returns the operations of a POST body: one per JSON-RPC message
// (a batch has several). Notifications and responses (no method, e.g. an
// elicitation's answer) read; a body that is not JSON-RPC, or a method
// not in the table, counts as every operation, so it needs every scope.
func opsOf(body []byte) []oauthrs.Op {
	type msg struct {
		Method *string `json:"method"`
	}
	var msgs []msg
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil || len(msgs) == 0 {
			return oauthrs.Ops
		}
	} else {
		var m msg
		if json.Unmarshal(body, &m) != nil {
			return oauthrs.Ops
		}
		msgs = []msg{m}
	}
	var ops []oauthrs.Op
	for _, m := range msgs {
		switch {
		case m.Method == nil:
			ops = append(ops, oauthrs.OpRead)
		case strings.HasPrefix(*m.Method, "notifications/"):
			ops = append(ops, oauthrs.OpRead)
		default:
			op, ok := mcpOps[*m.Method]
			if !ok {
				return oauthrs.Ops
			}
			ops = append(ops, op)
		}
	}
	return ops
}

// scoped lets a request through only when its token carries the scopes of
// its operations: a POST's JSON-RPC method(s) read from the body (bounded
// like the task shim's), GET (the SSE stream) and DELETE (end of session)
// read.
func scoped(g *oauthrs.Gate, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			if g.Allow(w, r, oauthrs.OpRead) {
				next.ServeHTTP(w, r)
			}
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxShimBody+1))
		_ = r.Body.Close()
		if err != nil {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
			return
		}
		if len(body) > maxShimBody {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if !g.Allow(w, r, opsOf(body)...) {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}
