package a2afront

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

// rpcOps maps A2A JSON-RPC methods (0.3 and 1.0 names) to the operation
// classes whose scopes they need (--scope-for; docs/oauth.md).
var rpcOps = map[string]oauthrs.Op{
	"message/send":                       oauthrs.OpInvoke,
	"message/stream":                     oauthrs.OpInvoke,
	"SendMessage":                        oauthrs.OpInvoke,
	"SendStreamingMessage":               oauthrs.OpInvoke,
	"tasks/get":                          oauthrs.OpRead,
	"tasks/list":                         oauthrs.OpRead,
	"tasks/resubscribe":                  oauthrs.OpRead,
	"agent/getAuthenticatedExtendedCard": oauthrs.OpRead,
	"GetTask":                            oauthrs.OpRead,
	"ListTasks":                          oauthrs.OpRead,
	"SubscribeToTask":                    oauthrs.OpRead,
	"GetExtendedAgentCard":               oauthrs.OpRead,
	"tasks/cancel":                       oauthrs.OpSteer,
	"CancelTask":                         oauthrs.OpSteer,
}

// rpcOp is the operation of a JSON-RPC method; push-notification config
// methods (any verb) steer; an unknown method counts as every operation.
func rpcOp(method string) []oauthrs.Op {
	if op, ok := rpcOps[method]; ok {
		return []oauthrs.Op{op}
	}
	if strings.HasPrefix(method, "tasks/pushNotificationConfig/") || strings.HasSuffix(method, "TaskPushNotificationConfig") || strings.HasSuffix(method, "TaskPushNotificationConfigs") {
		return []oauthrs.Op{oauthrs.OpSteer}
	}
	return oauthrs.Ops
}

// restOp is the operation of an HTTP+JSON request under
// /agents/{jid}/rest/ (rest is the path after it; 0.3's "v1/" prefix
// is dropped).
func restOp(method, rest string) []oauthrs.Op {
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if len(segs) > 0 && segs[0] == "v1" {
		segs = segs[1:]
	}
	switch {
	case len(segs) == 0:
	case strings.HasPrefix(segs[0], "message:"):
		return []oauthrs.Op{oauthrs.OpInvoke}
	case segs[0] == "tasks" && len(segs) >= 3:
		return []oauthrs.Op{oauthrs.OpSteer} // push notification configs
	case segs[0] == "tasks" && len(segs) == 2:
		_, action, _ := strings.Cut(segs[1], ":")
		switch action {
		case "cancel":
			return []oauthrs.Op{oauthrs.OpSteer}
		case "", "subscribe":
			return []oauthrs.Op{oauthrs.OpRead}
		}
	case method == http.MethodGet:
		return []oauthrs.Op{oauthrs.OpRead} // ListTasks, the cards
	}
	return oauthrs.Ops
}

// scoped lets a request through only when its token carries the scopes of
// its operation: GETs of cards and lists read; a JSON-RPC POST's method is
// read from its body (bounded by max), a REST request's from its path.
func scoped(g *oauthrs.Gate, max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const agents = "/agents/"
		path := r.URL.Path
		var ops []oauthrs.Op
		switch {
		case strings.HasPrefix(path, agents) && strings.Contains(strings.TrimPrefix(path, agents), "/rest/"):
			_, rest, _ := strings.Cut(strings.TrimPrefix(path, agents), "/rest/")
			ops = restOp(r.Method, rest)
		case r.Method == http.MethodPost && r.Body != nil:
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
			if err != nil {
				rpcError(w, nil, -32600, "invalid request: the body could not be read or is too large")
				return
			}
			var req struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &req) != nil {
				ops = oauthrs.Ops
			} else {
				ops = rpcOp(req.Method)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			ops = []oauthrs.Op{oauthrs.OpRead}
		default:
			ops = oauthrs.Ops
		}
		if g.Allow(w, r, ops...) {
			next.ServeHTTP(w, r)
		}
	})
}
