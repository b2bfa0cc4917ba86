package adhoc

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// inputReq is a task's input_required payload.
type inputReq struct {
	RequestID string          `json:"requestId"`
	Question  string          `json:"question"`
	Schema    json.RawMessage `json:"inputSchema"`
	ExpiresAt string          `json:"expiresAt"`
}

func pendingInput(snap *tasks.Snapshot) (inputReq, bool) {
	var in inputReq
	if snap.State != agentproto.StateInputRequired || len(snap.PendingInput) == 0 {
		return in, false
	}
	if err := json.Unmarshal(snap.PendingInput, &in); err != nil || in.RequestID == "" {
		return in, false
	}
	return in, true
}

// An input stage's hidden StageVar is "input:<request-id>:<revision>", the
// exact tuple the answer is sent with, so a re-submission replays it.
func inputStage(reqID string, rev int64) string {
	return "input:" + reqID + ":" + strconv.FormatInt(rev, 10)
}

func parseInputStage(st string) (string, int64, bool) {
	rest, ok := strings.CutPrefix(st, "input:")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 {
		return "", 0, false
	}
	rev, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || rev < 0 {
		return "", 0, false
	}
	return rest[:i], rev, true
}

// inputSchema finds the schema of input request reqID: the pending one, or
// an answered one's from its input_required event.
func (s *Service) inputSchema(ctx context.Context, snap *tasks.Snapshot, reqID string) ([]byte, bool) {
	if in, ok := pendingInput(snap); ok && in.RequestID == reqID {
		return in.Schema, true
	}
	evs, err := s.d.Engine.Events(ctx, snap.TaskID)
	if err != nil {
		return nil, false
	}
	for _, ev := range evs {
		if ev.Type != agentproto.EventInputRequired {
			continue
		}
		var in inputReq
		if json.Unmarshal(ev.Payload, &in) == nil && in.RequestID == reqID {
			return in.Schema, true
		}
	}
	return nil, false
}

// render turns the task's committed state into the next stage.
func (s *Service) render(ctx context.Context, caller, ep, node, sid string, snap *tasks.Snapshot) (*xmltree.Element, error) {
	switch {
	case snap.State == agentproto.StateInputRequired:
		in, ok := pendingInput(snap)
		if !ok {
			break
		}
		fs := buildForm(in.Schema)
		f := dataform.Form{Type: dataform.TypeForm, Title: "Input requested", Instructions: strings.Split(in.Question, "\n")}
		f.Fields = append([]dataform.Field{{Var: StageVar, Type: dataform.FieldHidden, Values: []string{inputStage(in.RequestID, snap.Revision)}}}, fs.fields...)
		el := stage(node, sid, "executing").Add(actionsEl("complete", "complete"))
		msg := "The task asks for input."
		if in.ExpiresAt != "" {
			msg += " The request expires at " + in.ExpiresAt + "."
		}
		return el.Add(note("info", msg), f.Element()), nil
	case snap.State.Terminal():
		res, err := s.d.Engine.Result(ctx, caller, ep, snap.TaskID)
		if err != nil {
			return nil, s.mapError(err)
		}
		return terminalStage(node, sid, snap, res.Payload), nil
	}
	// accepted, running or cancelling: the state and progress, both in a
	// note and in the instructions of a form, since clients such as
	// Converse.js show an executing stage's form but not its notes. The client refreshes with next (or execute), with no form,
	// an empty one or this one (its hidden field names the refresh).
	text := s.progressText(ctx, snap)
	f := dataform.Form{Type: dataform.TypeForm, Title: "Task " + stateText(snap.State), Instructions: []string{text},
		Fields: []dataform.Field{{Var: StageVar, Type: dataform.FieldHidden, Values: []string{refreshStage}}}}
	return stage(node, sid, "executing").Add(actionsEl("next", "next"),
		note("info", text), f.Element()), nil
}

// progressText is the "executing" note: the state and the last progress.
func (s *Service) progressText(ctx context.Context, snap *tasks.Snapshot) string {
	text := "Task " + snap.TaskID + " is " + stateText(snap.State) + "."
	if p := s.lastProgress(ctx, snap.TaskID); p != "" {
		text += " Progress: " + p + "."
	}
	return text + " Send next to refresh, or cancel."
}

// Limits of a reported table.
const (
	maxColumns = 32
	maxRows    = 1024
)

// terminalStage renders completed, failed and cancelled tasks.
func terminalStage(node, sid string, snap *tasks.Snapshot, payload []byte) *xmltree.Element {
	switch snap.State {
	case agentproto.StateFailed:
		var p struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(payload, &p)
		return stage(node, sid, "completed").Add(note("error", "Task "+snap.TaskID+" failed: "+p.Error.Message+" ("+p.Error.Code+")"))
	case agentproto.StateCancelled:
		return stage(node, sid, "canceled").Add(note("info", "Task "+snap.TaskID+" was cancelled."))
	}
	var p struct {
		Result struct {
			Content           []json.RawMessage `json:"content"`
			StructuredContent json.RawMessage   `json:"structuredContent"`
			IsError           bool              `json:"isError"`
		} `json:"result"`
	}
	_ = json.Unmarshal(payload, &p)
	el := stage(node, sid, "completed").Add(note("info", "Task "+snap.TaskID+" completed."))
	if p.Result.IsError {
		el.Add(note("error", "The tool reported an error: "+firstLine(contentText(p.Result.Content))))
	}
	f := dataform.Form{Type: dataform.TypeResult, Title: "Result"}
	if text := contentText(p.Result.Content); text != "" {
		f.Fields = append(f.Fields, dataform.Field{Var: "text", Type: dataform.FieldTextMulti, Label: "Result", Values: strings.Split(text, "\n")})
	}
	if sc := p.Result.StructuredContent; len(sc) > 0 && string(sc) != "null" && string(sc) != "{}" {
		rep, items, ok := table(sc)
		if ok {
			f.Reported, f.Items = rep, items
		} else {
			f.Fields = append(f.Fields, dataform.Field{Var: "structuredContent", Type: dataform.FieldTextMulti,
				Label: "Structured result (JSON)", Values: []string{string(sc)}})
		}
	}
	if len(f.Fields) == 0 && len(f.Reported) == 0 {
		return el
	}
	return el.Add(f.Element())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return s
}

// contentText joins text content and names the other items.
func contentText(content []json.RawMessage) string {
	var parts []string
	for _, c := range content {
		var it struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MimeType string `json:"mimeType"`
			URI      string `json:"uri"`
			Resource *struct {
				URI  string `json:"uri"`
				Text string `json:"text"`
			} `json:"resource"`
		}
		if json.Unmarshal(c, &it) != nil {
			continue
		}
		switch it.Type {
		case "text":
			parts = append(parts, it.Text)
		case "resource":
			if it.Resource != nil && it.Resource.Text != "" {
				parts = append(parts, it.Resource.Text)
			} else if it.Resource != nil {
				parts = append(parts, "[resource "+it.Resource.URI+"]")
			}
		case "resource_link":
			parts = append(parts, "[link "+it.URI+"]")
		default:
			parts = append(parts, "["+it.Type+" "+it.MimeType+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// table renders structured content as a reported table: an object is one
// row, an array of objects one row each. Nested values are shown as JSON.
func table(sc json.RawMessage) ([]dataform.Field, [][]dataform.Field, bool) {
	var rows []map[string]json.RawMessage
	var one map[string]json.RawMessage
	if json.Unmarshal(sc, &one) == nil && one != nil {
		rows = []map[string]json.RawMessage{one}
	} else if json.Unmarshal(sc, &rows) != nil || len(rows) == 0 || len(rows) > maxRows {
		return nil, nil, false
	}
	colSet := map[string]bool{}
	for _, r := range rows {
		if r == nil {
			return nil, nil, false
		}
		for k := range r {
			colSet[k] = true
		}
	}
	if len(colSet) == 0 || len(colSet) > maxColumns {
		return nil, nil, false
	}
	cols := make([]string, 0, len(colSet))
	for k := range colSet {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	rep := make([]dataform.Field, len(cols))
	for i, c := range cols {
		rep[i] = dataform.Field{Var: c, Label: c}
	}
	items := make([][]dataform.Field, len(rows))
	for i, r := range rows {
		row := make([]dataform.Field, len(cols))
		for j, c := range cols {
			row[j] = dataform.Field{Var: c, Values: []string{cellText(r[c])}}
		}
		items[i] = row
	}
	return rep, items, true
}

func cellText(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
