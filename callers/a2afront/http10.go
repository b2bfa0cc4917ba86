package a2afront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// codeVersionNotSupported is A2A 1.0's VersionNotSupportedError.
const codeVersionNotSupported = -32009

type protoVersion int

const (
	versionUnsupported protoVersion = iota
	version03
	version10
)

// requestVersion is the A2A version a request asks for: its A2A-Version
// header, else the A2A-Version query parameter; empty is 0.3 (A2A 1.0
// §3.6.2). Only Major.Minor counts.
func requestVersion(r *http.Request) protoVersion {
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get("A2A-Version"))
	}
	if v == "" {
		return version03
	}
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	switch major + "." + minor {
	case "0.3":
		return version03
	case "1.0":
		return version10
	}
	return versionUnsupported
}

// params10 is the request type of each A2A 1.0 JSON-RPC method, decoded
// here first so a malformed request gets a fixed message (the SDK's own
// decode errors quote field names and values).
var params10 = map[string]func() any{
	"SendMessage":                      func() any { return new(a2a.SendMessageRequest) },
	"SendStreamingMessage":             func() any { return new(a2a.SendMessageRequest) },
	"GetTask":                          func() any { return new(a2a.GetTaskRequest) },
	"ListTasks":                        func() any { return new(a2a.ListTasksRequest) },
	"CancelTask":                       func() any { return new(a2a.CancelTaskRequest) },
	"SubscribeToTask":                  func() any { return new(a2a.SubscribeToTaskRequest) },
	"GetTaskPushNotificationConfig":    func() any { return new(a2a.GetTaskPushConfigRequest) },
	"CreateTaskPushNotificationConfig": func() any { return new(a2a.PushConfig) },
	"ListTaskPushNotificationConfigs":  func() any { return new(a2a.ListTaskPushConfigRequest) },
	"DeleteTaskPushNotificationConfig": func() any { return new(a2a.DeleteTaskPushConfigRequest) },
	"GetExtendedAgentCard":             func() any { return new(a2a.GetExtendedAgentCardRequest) },
}

// serveJSONRPC10 serves one A2A 1.0 JSON-RPC request.
func (f *Front) serveJSONRPC10(w http.ResponseWriter, r *http.Request, bare string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		rpcError(w, nil, -32600, fmt.Sprintf("invalid request: larger than %d bytes", f.opts.MaxRequestBytes))
		return
	case err != nil:
		rpcError(w, nil, -32700, "parse error: the body could not be read")
		return
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		rpcError(w, nil, -32700, "parse error: the body is not a JSON-RPC request object")
		return
	}
	var id any
	if len(req.ID) > 0 && json.Unmarshal(req.ID, &id) != nil {
		id = nil
	}
	switch v := id.(type) {
	case nil, float64:
	case string:
		if len(v) > 128 {
			rpcError(w, nil, -32600, "invalid request: id longer than 128 bytes")
			return
		}
	default:
		rpcError(w, nil, -32600, "invalid request: id must be a string, a number or null")
		return
	}
	if req.JSONRPC != "2.0" {
		rpcError(w, id, -32600, "invalid request: jsonrpc must be \"2.0\"")
		return
	}
	mk, known := params10[req.Method]
	if !known {
		rpcError(w, id, -32601, "method not found: A2A 1.0 methods are SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, the push-notification config methods and GetExtendedAgentCard")
		return
	}
	if len(req.Params) > 0 && !bytes.Equal(bytes.TrimSpace(req.Params), []byte("null")) {
		if json.Unmarshal(req.Params, mk()) != nil {
			rpcError(w, id, -32602, "invalid params: not the A2A 1.0 request of "+req.Method+" (unknown part kind or wrong field type)")
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	w.Header().Set("Content-Type", "application/json")
	h := a2asrv.NewJSONRPCHandler(v1handler{h: handler{f: f, bare: bare}})
	if req.Method == "SendStreamingMessage" || req.Method == "SubscribeToTask" {
		ds := &deferredStream{ResponseWriter: w}
		h.ServeHTTP(ds, r)
		ds.decide()
		return
	}
	h.ServeHTTP(w, r)
}

// serveREST serves one HTTP+JSON request: A2A 1.0 paths (/message:send,
// /tasks/{id}...) with A2A-Version 1.0, 0.3's (/v1/...) without.
func (f *Front) serveREST(w http.ResponseWriter, r *http.Request, bare string) {
	ver := requestVersion(r)
	if ver == versionUnsupported {
		restError(w, http.StatusBadRequest, "FAILED_PRECONDITION", "version not supported: this agent speaks A2A 0.3 and 1.0 (A2A-Version header)")
		return
	}
	path := "/" + r.PathValue("rest")
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) > 0 && segs[0] == "v1" {
		segs = segs[1:]
	}
	if len(segs) >= 2 && segs[0] == "tasks" {
		id, _, _ := strings.Cut(segs[1], ":")
		if !validTaskPath(id) {
			restError(w, http.StatusNotFound, "NOT_FOUND", "task not found")
			return
		}
	}
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.opts.MaxRequestBytes))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			restError(w, http.StatusRequestEntityTooLarge, "INVALID_ARGUMENT", fmt.Sprintf("invalid request: larger than %d bytes", f.opts.MaxRequestBytes))
			return
		case err != nil:
			restError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the body could not be read")
			return
		}
		if ver == version10 && (strings.HasSuffix(path, "/message:send") || strings.HasSuffix(path, "/message:stream")) {
			if json.Unmarshal(body, new(a2a.SendMessageRequest)) != nil {
				restError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid params: not an A2A 1.0 SendMessageRequest (unknown part kind or wrong field type)")
				return
			}
		} else if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
			restError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the body is not JSON")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = path, ""
	v1 := v1handler{h: handler{f: f, bare: bare}}
	if ver == version10 {
		a2asrv.NewRESTHandler(v1).ServeHTTP(w, r2)
		return
	}
	a2av0.NewRESTHandler(v1).ServeHTTP(w, r2)
}

// restError writes an HTTP+JSON error (google.rpc.Status shape) with a
// fixed, safe message.
func restError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": status, "status": code, "message": msg}})
}
