package mcpbridge

// MCP Tasks, 2026-07-28 extension form (io.modelcontextprotocol/tasks,
// SEP-2663; docs/mcp-bridge.md, "Tasks"). Not wire-compatible with
// 2025-11-25: the client declares the extension in each request's
// capabilities and the server decides per call whether to answer with a
// task (resultType "task", the Task members inline); tasks/get returns a
// DetailedTask whose inputRequests carry the task's questions and whose
// result or error is the outcome; tasks/update answers the questions;
// tasks/cancel is acknowledged (cooperative). There is no tasks/result,
// no related-task metadata and no progress for tasks. The bridge commits
// the handle exactly as for 2025-11-25 (taskcall.go), so a gateway that
// restarts re-attaches by tasks/get: 2026-07-28 has no sessions, the
// task id alone names the task.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
)

const extTasks = "io.modelcontextprotocol/tasks"

// maxInputRequests bounds the input requests of one poll the bridge looks
// at; maxInputKey bounds a key.
const (
	maxInputRequests = 8
	maxInputKey      = 256
)

// extMeta is the per-request _meta of the extension form (SEP-2575): the
// revision and the client's capabilities, which declare the extension.
func extMeta(protocol string) map[string]any {
	return map[string]any{
		mcp.MetaKeyProtocolVersion: protocol,
		mcp.MetaKeyClientCapabilities: map[string]any{
			"elicitation": map[string]any{"form": map[string]any{}},
			"extensions":  map[string]any{extTasks: map[string]any{}},
		},
		mcp.MetaKeyClientInfo: map[string]any{"name": "agentgw", "version": "1"},
	}
}

// withExtMeta adds extMeta to params (a map), keeping members it has.
func withExtMeta(params any, protocol string) any {
	m, ok := params.(map[string]any)
	if !ok {
		return params
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	meta := extMeta(protocol)
	if old, ok := m["_meta"].(map[string]any); ok {
		for k, v := range old {
			meta[k] = v
		}
	}
	out["_meta"] = meta
	return out
}

// extWire is a stdio wire speaking the extension form.
type extWire struct {
	w        taskWire
	protocol string
}

func (e extWire) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return e.w.request(ctx, method, withExtMeta(params, e.protocol))
}

// waitTaskExt polls tasks/get until the task ends, answering its input
// requests with tasks/update (each key once), until the caller cancels,
// the deadline or the task's ttl passes, or ctx ends (shutdown: the task
// stays for Resume).
func (b *Backend) waitTaskExt(ctx context.Context, tc *taskCall) {
	st, run := tc.st, tc.st.run
	go func() {
		select {
		case <-run.CancelRequested():
			st.cancelRequested.Store(true)
			st.cancel()
		case <-st.ctx.Done():
		}
	}()
	poll := time.Duration(tc.state.Poll) * time.Millisecond
	poll = min(max(poll, minPoll), maxPoll)
	if poll == minPoll && tc.state.Poll == 0 {
		poll = time.Second
	}
	answered := map[string]bool{}
	failures := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-st.ctx.Done():
			b.endTask(ctx, tc)
			return
		case <-timer.C:
		}
		if b.stopPastTTL(tc) {
			return
		}
		gctx, gcancel := context.WithTimeout(st.ctx, 10*time.Second)
		t, err := b.getTask(gctx, tc)
		gcancel()
		if err != nil {
			if st.ctx.Err() != nil {
				continue
			}
			var rerr *jsonrpc.Error
			if errors.As(err, &rerr) || errors.Is(err, errSessionGone) || errors.Is(err, errWireClosed) {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server no longer knows its task.", Retryable: true}))
				st.cancel()
				return
			}
			if failures++; failures >= maxPollFailures {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeUnavailable, Message: "The MCP server stopped answering about its task.", Retryable: true}))
				st.cancel()
				return
			}
			timer.Reset(poll)
			continue
		}
		failures = 0
		if p := t.poll(); p != nil && *p > 0 {
			poll = min(max(time.Duration(*p)*time.Millisecond, minPoll), maxPoll)
		}
		switch t.Status {
		case "completed":
			if len(t.Result) == 0 {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "The MCP server's completed task carries no result."}))
			} else {
				b.finishTask(tc, t.Result)
			}
			st.cancel()
			return
		case "failed":
			werr := t.Error
			if werr == nil {
				werr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError}
			}
			b.settle(run.Fail(b.rpcFailure(st, werr)))
			st.cancel()
			return
		case "cancelled":
			if st.cancelRequested.Load() {
				b.settle(run.Cancelled("Cancelled at the caller's request; the MCP server cancelled its task."))
			} else {
				b.settle(run.Fail(tasks.Failure{Code: agentproto.CodeInternalError, Message: "The MCP server cancelled its task."}))
			}
			st.cancel()
			return
		case "input_required":
			b.answerInputs(tc, t, answered)
		default:
			b.relayStatus(tc, t)
		}
		timer.Reset(poll)
	}
}

// answerInputs asks the XMPP caller each outstanding elicitation of t not
// answered yet and sends the answers with tasks/update. Keys are unique
// over a task's lifetime (SEP-2663), so a key is answered once. Requests
// other than form elicitation are answered with a JSON-RPC error inline
// (sampling, roots: the gateway has neither).
func (b *Backend) answerInputs(tc *taskCall, t *remoteTask, answered map[string]bool) {
	keys := make([]string, 0, len(t.InputRequests))
	for k := range t.InputRequests {
		if !answered[k] && len(k) <= maxInputKey {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > maxInputRequests {
		keys = keys[:maxInputRequests]
	}
	st := tc.st
	for _, k := range keys {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		answered[k] = true
		if json.Unmarshal(t.InputRequests[k], &req) != nil {
			continue
		}
		var resp any
		switch req.Method {
		case "elicitation/create":
			var p mcp.ElicitParams
			if json.Unmarshal(req.Params, &p) != nil {
				continue
			}
			p.Meta = nil // attribution is the task's, not metadata's
			res, err := b.elicit(st.ctx, nil, st, &p)
			if err != nil {
				var rerr *jsonrpc.Error
				if !errors.As(err, &rerr) {
					return // the call ended meanwhile
				}
				resp = map[string]any{"error": rerr}
			} else {
				resp = res
			}
		case "sampling/createMessage":
			b.recordLoss(st, agentproto.CodeUnsupportedSampling)
			resp = map[string]any{"error": &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "agentgw does not support sampling"}}
		case "roots/list":
			b.recordLoss(st, agentproto.CodeUnsupportedRoots)
			resp = map[string]any{"error": &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "agentgw does not support roots"}}
		default:
			resp = map[string]any{"error": &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not supported"}}
		}
		uctx, cancel := context.WithTimeout(st.ctx, 30*time.Second)
		_, err := tc.wire.request(uctx, "tasks/update", map[string]any{"taskId": tc.state.TaskID, "inputResponses": map[string]any{k: resp}})
		cancel()
		if err != nil && st.ctx.Err() == nil {
			b.log.Warn("tasks/update failed; the task's question stays unanswered", slog.String("error", safeText(b.red, err.Error(), 256)))
		}
	}
}

// trackExtCall makes a call's progress token known while its tools/call
// is in flight: a server that runs the call synchronously reports its
// progress on the answer's stream.
func (b *Backend) trackExtCall(st *callState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.extCalls == nil {
		b.extCalls = map[string]*callState{}
	}
	b.extCalls[st.token] = st
}

func (b *Backend) untrackExtCall(st *callState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.extCalls, st.token)
}

func (b *Backend) extCall(token string) *callState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.extCalls[token]
}
