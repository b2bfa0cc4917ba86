package oanbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/oanbridge/oandb"
	"github.com/agentgw/agentgw/oanbridge/wire"
	"github.com/agentgw/agentgw/tasks"
)

// Tool names (DESIGN.md).
const (
	ToolCreateGofer = "create_gofer"
	ToolListGofers  = "list_gofers"
	ToolChat        = "chat"
	ToolEscalations = "escalations"
	ToolSendDirect  = "send_direct"
)

// Input schemas (docs/oan-bridge.md).
const (
	schemaCreate = `{"type":"object","properties":{"locale":{"type":"string","minLength":2,"maxLength":35,"pattern":"^[A-Za-z0-9-]+$"},"human_review_triggers":{"type":"array","maxItems":20,"items":{"type":"string","minLength":1,"maxLength":500}}},"additionalProperties":false}`
	schemaList   = `{"type":"object","properties":{},"additionalProperties":false}`
	schemaChat   = `{"type":"object","properties":{"gofer_id":{"type":"string","minLength":1,"maxLength":128,"pattern":"^[A-Za-z0-9_.:-]+$"},"message":{"type":"string","minLength":1,"maxLength":8000}},"required":["message"],"additionalProperties":false}`
	schemaEsc    = `{"type":"object","properties":{"idle_seconds":{"type":"integer","minimum":0,"maximum":86400}},"additionalProperties":false}`
	schemaDirect = `{"type":"object","properties":{"conversation_id":{"type":"string","minLength":1,"maxLength":128,"pattern":"^[A-Za-z0-9_.:-]+$"},"message":{"type":"string","minLength":1,"maxLength":8000}},"required":["conversation_id","message"],"additionalProperties":false}`
)

type toolDef struct {
	name, title, desc, schema string
	input                     bool
}

var toolDefs = []toolDef{
	{ToolCreateGofer, "Create a Gofer", "Creates a Gofer on the OAN account and returns its greeting. Owner only.", schemaCreate, false},
	{ToolListGofers, "List Gofers", "Lists the account's Gofers and their discovery status.", schemaList, false},
	{ToolChat, "Chat with a Gofer", "Sends a message to a Gofer's role-chat and completes with its reply; a Gofer question becomes an input request. Owner only. A message OAN accepted is never re-sent: no reply within the timeout fails the task.", schemaChat, true},
	{ToolEscalations, "Answer escalations", "Puts each pending match request, pairing proposal and Gofer question to the owner, one input request each (accept, decline or defer); a decision is sent to OAN exactly once. Owner only.", schemaEsc, true},
	{ToolSendDirect, "Send a direct message", "Sends a message, attributed to the owner, on a matched conversation. Owner only.", schemaDirect, false},
}

func (b *Backend) manifest() ([]byte, string) {
	local := b.o.Endpoint
	if i := strings.IndexByte(local, '@'); i > 0 {
		local = local[:i]
	}
	doc := backendkit.ManifestDoc{ManifestSpecVersion: "0", Tools: []backendkit.ManifestTool{}}
	doc.Agent.JID = b.o.Endpoint
	doc.Agent.Name = first(b.o.Name, local)
	doc.Agent.Title = first(b.o.Title, "OpenAgentNetwork Gofers")
	doc.Agent.Description = first(b.o.Description, "An OpenAgentNetwork account: create Gofers, chat with them, answer their escalations.")
	for _, d := range toolDefs {
		doc.Tools = append(doc.Tools, backendkit.ManifestTool{
			Name: d.name, Title: d.title, Description: d.desc, InputSchema: json.RawMessage(d.schema),
			Ext: &backendkit.ToolExt{SupportsProgress: true, SupportsCancellation: true, SupportsInput: d.input},
		})
	}
	raw, _ := backendkit.Stamp(&doc, first(b.o.Version, "1.0.0"), []byte(fmt.Sprint(wire.ProtocolVersion)))
	return raw, doc.Agent.Version
}

func first(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// Execute runs one tool call.
func (b *Backend) Execute(ctx context.Context, call tasks.Call, run tasks.Run) {
	owner := b.isOwner(call.Caller)
	switch call.Tool {
	case ToolListGofers:
		b.listGofers(ctx, run)
		return
	case ToolCreateGofer, ToolChat, ToolEscalations, ToolSendDirect:
		// These act for the owner (§7): whatever invocable_by says.
		if !owner {
			b.fail(run, tasks.Failure{Code: agentproto.CodeOANNotOwner, Message: "only the OAN account's configured owner may use this tool"})
			return
		}
	default:
		b.fail(run, tasks.Failure{Code: agentproto.CodeInternalError, Message: "unknown tool"})
		return
	}
	if f := b.usable(); f != nil {
		b.fail(run, *f)
		return
	}
	switch call.Tool {
	case ToolCreateGofer:
		b.createGofer(ctx, call, run)
	case ToolChat:
		b.chatTool(ctx, call, run)
	case ToolEscalations:
		b.escalations(ctx, call, run)
	case ToolSendDirect:
		b.sendDirect(ctx, call, run)
	}
}

// usable fails a call fast while the key is revoked or the account
// banned.
func (b *Backend) usable() *tasks.Failure {
	b.mu.Lock()
	st, key := b.status, b.key
	b.mu.Unlock()
	switch {
	case st == oandb.StatusRevoked:
		return &tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the OAN API key was revoked; the operator must pair the endpoint again", Retryable: true}
	case st == oandb.StatusBanned:
		return &tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the OAN account is banned", Retryable: true}
	case key == "":
		return &tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the endpoint has no usable OAN API key yet", Retryable: true}
	}
	return nil
}

func (b *Backend) fail(run tasks.Run, f tasks.Failure) {
	if err := run.Fail(f); err != nil && !errors.Is(err, tasks.ErrSettled) {
		b.log.Warn("cannot settle a failed task", "error", err)
	}
}

// failAPI maps a REST failure.
func (b *Backend) failAPI(ctx context.Context, run tasks.Run, what string, err error) {
	var he *HTTPError
	switch {
	case errors.Is(err, ErrRevoked):
		b.recheck()
		b.fail(run, tasks.Failure{Code: agentproto.CodeUnavailable, Message: "OAN rejected the API key; the endpoint must be paired again", Retryable: true})
	case errors.Is(err, ErrBanned):
		b.recheck()
		b.fail(run, tasks.Failure{Code: agentproto.CodeUnavailable, Message: "the OAN account is banned", Retryable: true})
	case errors.Is(err, ErrRedirect):
		b.fail(run, tasks.Failure{Code: agentproto.CodeOANRefused, Message: what + ": OAN answered with a redirect, which is never followed"})
	case errors.As(err, &he) && he.Temporary():
		b.fail(run, tasks.Failure{Code: agentproto.CodeUnavailable, Message: what + ": " + he.Error(), Retryable: true})
	case errors.As(err, &he):
		b.fail(run, tasks.Failure{Code: agentproto.CodeOANRefused, Message: what + ": " + he.Error()})
	default:
		b.fail(run, tasks.Failure{Code: agentproto.CodeUnavailable, Message: what + ": OAN could not be reached", Retryable: true})
	}
}

// recheck asks the session loop to probe the key: a 401 seen by a tool
// means the same as a forced disconnect.
func (b *Backend) recheck() {
	select {
	case b.probe <- struct{}{}:
	default:
	}
}

func (b *Backend) complete(run tasks.Run, v any) {
	data, err := ijson.MarshalNoEscape(v)
	if err != nil {
		b.fail(run, tasks.Failure{Code: agentproto.CodeInternalError, Message: "cannot encode the result"})
		return
	}
	clean, _, _ := b.red.ScrubJSON(data)
	text, _ := ijson.MarshalNoEscape(string(clean))
	r := tasks.ToolResult{Content: json.RawMessage(`[{"type":"text","text":` + string(text) + `}]`), StructuredContent: clean}
	if err := run.Complete(r); err != nil && !errors.Is(err, tasks.ErrSettled) {
		b.log.Warn("cannot settle a completed task", "error", err)
	}
}

func (b *Backend) listGofers(ctx context.Context, run tasks.Run) {
	if f := b.usable(); f != nil {
		b.fail(run, *f)
		return
	}
	var gs []map[string]any
	if _, err := b.api.do(ctx, http.MethodGet, "/gofers", nil, nil, &gs); err != nil {
		b.failAPI(ctx, run, "listing the Gofers", err)
		return
	}
	out := []map[string]any{}
	for _, g := range gs {
		id := wire.Str(g, "goferId", wire.MaxIDBytes)
		if !wire.ValidID(id) {
			continue
		}
		e := map[string]any{
			"gofer_id": id, "name": wire.Str(g, "name", 200), "description": wire.Str(g, "description", 2000),
			"discovery_status": wire.Str(g, "discoveryStatus", 32), "created_at": wire.Str(g, "createdAt", 64),
		}
		if u := wire.Str(g, "webUrl", 1000); u != "" {
			e["web_url"] = u
		}
		out = append(out, e)
		if len(out) >= 500 {
			break
		}
	}
	b.complete(run, map[string]any{"gofers": out})
}

func (b *Backend) createGofer(ctx context.Context, call tasks.Call, run tasks.Run) {
	var a struct {
		Locale   string   `json:"locale"`
		Triggers []string `json:"human_review_triggers"`
	}
	json.Unmarshal(call.Arguments, &a)
	body := map[string]any{}
	if a.Locale != "" {
		body["locale"] = a.Locale
	}
	if len(a.Triggers) > 0 {
		body["humanReviewTriggers"] = a.Triggers
	}
	var r map[string]any
	if _, err := b.api.do(ctx, http.MethodPost, "/gofers", nil, body, &r); err != nil {
		b.failAPI(ctx, run, "creating a Gofer", err)
		return
	}
	id := wire.Str(r, "goferId", wire.MaxIDBytes)
	if !wire.ValidID(id) {
		b.fail(run, tasks.Failure{Code: agentproto.CodeInvalidOutput, Message: "OAN's answer has no valid goferId"})
		return
	}
	b.mu.Lock()
	b.lastGofer = id
	b.mu.Unlock()
	out := map[string]any{"gofer_id": id, "chat_id": wire.Str(r, "chatId", wire.MaxIDBytes), "greeting": wire.Str(r, "greeting", maxShown), "source": wire.SourceOwnGofer}
	if u := wire.Str(r, "webUrl", 1000); u != "" {
		out["web_url"] = u
	}
	b.complete(run, out)
}

func (b *Backend) sendDirect(ctx context.Context, call tasks.Call, run tasks.Run) {
	var a struct {
		ConversationID string `json:"conversation_id"`
		Message        string `json:"message"`
	}
	json.Unmarshal(call.Arguments, &a)
	if !wire.ValidID(a.ConversationID) {
		b.fail(run, tasks.Failure{Code: agentproto.CodeOANRefused, Message: "conversation_id is malformed"})
		return
	}
	if _, ok, err := b.st.Conversation(ctx, b.o.Endpoint, a.ConversationID); err != nil || !ok {
		b.fail(run, tasks.Failure{Code: agentproto.CodeOANRefused, Message: "not a matched conversation of this account (the gateway learns them from match_decided events)"})
		return
	}
	rel, _ := seg("conversations", a.ConversationID, "messages")
	var r map[string]any
	if _, err := b.api.do(ctx, http.MethodPost, rel, nil, map[string]any{"content": a.Message}, &r); err != nil {
		b.failAPI(ctx, run, "sending the direct message", err)
		return
	}
	b.complete(run, map[string]any{"conversation_id": a.ConversationID, "message_id": wire.Str(r, "id", wire.MaxIDBytes), "created_at": wire.Str(r, "createdAt", 64)})
}

// resolveGofer picks the Gofer a call or chat names, else the only one.
func (b *Backend) resolveGofer(ctx context.Context, id string) (string, error) {
	if id != "" {
		if !wire.ValidID(id) {
			return "", errors.New("gofer_id is malformed")
		}
		return id, nil
	}
	var gs []map[string]any
	if _, err := b.api.do(ctx, http.MethodGet, "/gofers", nil, nil, &gs); err != nil {
		return "", err
	}
	var ids []string
	for _, g := range gs {
		if id := wire.Str(g, "goferId", wire.MaxIDBytes); wire.ValidID(id) {
			ids = append(ids, id)
		}
	}
	switch len(ids) {
	case 0:
		return "", errors.New("the account has no Gofer yet: call create_gofer first")
	case 1:
		return ids[0], nil
	}
	b.mu.Lock()
	last := b.lastGofer
	b.mu.Unlock()
	for _, i := range ids {
		if i == last {
			return last, nil
		}
	}
	return "", fmt.Errorf("the account has %d Gofers: name one with gofer_id", len(ids))
}

// postReply POSTs an answer to a checked reply path.
func (b *Backend) postReply(ctx context.Context, it oandb.Item, body any) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err := b.api.do(ctx, http.MethodPost, it.ReplyPath, nil, body, nil)
	return err
}
