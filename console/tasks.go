package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/tasks/taskdb"
)

func (s *Server) taskRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /tasks", s.authed(s.taskList))
	m.HandleFunc("GET /tasks/{id}", s.authed(s.taskPage))
	m.HandleFunc("GET /tasks/{id}/state", s.authed(s.taskState))
	m.HandleFunc("GET /tasks/{id}/live", s.authed(s.taskLive))
	m.HandleFunc("POST /tasks/{id}/cancel", s.authed(s.taskCancel))
	m.HandleFunc("POST /tasks/{id}/input", s.authed(s.taskInput))
	m.HandleFunc("POST /agents/{endpoint}/run", s.authed(s.run))
}

// taskPageSize bounds the tasks listed at once.
const taskPageSize = 50

// taskList shows the tasks newest first, live, settled or all, filtered by
// the search box (task ID, endpoint, tool or caller), a page at a time, and
// jumps to a task by its ID.
func (s *Server) taskList(w http.ResponseWriter, r *http.Request, ss *session) {
	if s.d.Tasks == nil {
		http.Error(w, "No task store.", http.StatusNotFound)
		return
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > 256 {
		q = q[:256]
	}
	if ids.Valid(q) {
		if t, err := s.d.Tasks.Task(r.Context(), q); err == nil && t != nil {
			http.Redirect(w, r, "/tasks/"+url.PathEscape(t.ID), http.StatusSeeOther)
			return
		}
	}
	show := r.URL.Query().Get("show")
	if show != "live" && show != "settled" {
		show = "all"
	}
	var rows []taskdb.Task
	var page pageInfo
	var more bool
	if l, ok := s.d.Tasks.(taskdb.Lister); ok {
		page, _ = pageOf(r, 1<<30, taskPageSize)
		got, err := l.Recent(r.Context(), taskdb.RecentQuery{Search: q, Live: show == "live", Settled: show == "settled", Offset: page.From, Limit: taskPageSize + 1})
		if err != nil {
			s.d.Log.Warn("console: recent tasks", "err", err)
			http.Error(w, "The tasks could not be read; the gateway's log has the reason.", http.StatusInternalServerError)
			return
		}
		more = len(got) > taskPageSize
		rows = got[:min(len(got), taskPageSize)]
		page.To, page.Total = page.From+len(rows), -1
	} else {
		live, err := s.d.Tasks.Unsettled(r.Context())
		if err != nil {
			http.Error(w, "The tasks could not be read; the gateway's log has the reason.", http.StatusInternalServerError)
			return
		}
		lq := strings.ToLower(q)
		for _, t := range live {
			if q == "" || strings.Contains(strings.ToLower(t.ID+" "+t.Endpoint+" "+t.Tool+" "+t.Caller), lq) {
				rows = append(rows, t)
			}
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Created.After(rows[j].Created) })
		page, more = pageOf(r, len(rows), taskPageSize)
		rows = rows[page.From:page.To]
	}
	s.render(w, r, ss, "tasks", map[string]any{"Rows": rows, "Q": q, "Show": show, "Page": page, "More": more})
}

// taskView is a task as the task page and its polling script read it.
type taskView struct {
	ID, Endpoint, Tool, Caller, State, Created, Updated string
	Revision                                            int64
	Terminal                                            bool
	Failure                                             string `json:",omitempty"`
	Result                                              string `json:",omitempty"`
	Input                                               *inputView
	Events                                              []eventView
}

type inputView struct {
	RequestID, Request string
}

type eventView struct {
	Revision         int64
	Type, At, Detail string
}

func (s *Server) loadTask(r *http.Request) (*taskView, *taskdb.Task, *taskdb.Input, int) {
	id := r.PathValue("id")
	if s.d.Tasks == nil || !ids.Valid(id) {
		return nil, nil, nil, http.StatusNotFound
	}
	t, in, err := s.d.Tasks.TaskState(r.Context(), id)
	if err != nil {
		s.d.Log.Warn("console: task state", "task", id, "err", err)
		return nil, nil, nil, http.StatusInternalServerError
	}
	if t == nil {
		return nil, nil, nil, http.StatusNotFound
	}
	evs, err := s.d.Tasks.Events(r.Context(), id)
	if err != nil {
		s.d.Log.Warn("console: task events", "task", id, "err", err)
		return nil, nil, nil, http.StatusInternalServerError
	}
	v := &taskView{ID: t.ID, Endpoint: t.Endpoint, Tool: t.Tool, Caller: t.Caller, State: string(t.State),
		Created: t.Created.UTC().Format("2006-01-02 15:04:05Z"), Updated: t.Updated.UTC().Format("2006-01-02 15:04:05Z"),
		Revision: t.Revision, Terminal: t.State.Terminal()}
	if v.Terminal && len(t.Result) > 0 {
		v.Result = prettyJSON(t.Result)
		var f struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
			Code string `json:"code"`
		}
		if json.Unmarshal(t.Result, &f) == nil {
			v.Failure = f.Error.Code
			if v.Failure == "" {
				v.Failure = f.Code
			}
		}
	}
	if in != nil && t.InputRequest != "" && in.Status == "pending" {
		v.Input = &inputView{RequestID: in.RequestID, Request: prettyJSON(in.Request)}
	}
	// The newest events, oldest first, at most 200.
	if len(evs) > 200 {
		evs = evs[len(evs)-200:]
	}
	for _, e := range evs {
		d := string(e.Payload)
		if len(d) > 2000 {
			d = d[:2000] + "…"
		}
		v.Events = append(v.Events, eventView{Revision: e.Revision, Type: string(e.Type), At: e.Created.UTC().Format("15:04:05.000"), Detail: d})
	}
	return v, t, in, 0
}

func (s *Server) taskPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v, _, _, code := s.loadTask(r)
	if code != 0 {
		http.Error(w, http.StatusText(code), code)
		return
	}
	s.render(w, r, ss, "task", v)
}

// taskState is the task page's polling fallback (for a browser without
// EventSource, or a refused stream): JSON, which the script puts into the
// page as text.
func (s *Server) taskState(w http.ResponseWriter, r *http.Request, ss *session) {
	s.live.polls.Add(1)
	v, _, _, code := s.loadTask(r)
	if code != 0 {
		http.Error(w, http.StatusText(code), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) taskCancel(w http.ResponseWriter, r *http.Request, ss *session) {
	_, t, _, code := s.loadTask(r)
	if code != 0 || s.d.Engine == nil {
		http.Error(w, http.StatusText(max(code, http.StatusNotFound)), max(code, http.StatusNotFound))
		return
	}
	// The operator cancels on the caller's behalf, by the code the admin
	// command runs too.
	_, err := s.d.Engine.CancelAsOperator(r.Context(), t.ID, ss.user, "console")
	if err != nil {
		s.flash(ss, "The task was not canceled: "+rejectText(err), false)
	} else {
		s.flash(ss, "Cancellation requested.", true)
	}
	http.Redirect(w, r, "/tasks/"+url.PathEscape(t.ID), http.StatusSeeOther)
}

func (s *Server) taskInput(w http.ResponseWriter, r *http.Request, ss *session) {
	_, t, in, code := s.loadTask(r)
	if code != 0 || s.d.Engine == nil {
		http.Error(w, http.StatusText(max(code, http.StatusNotFound)), max(code, http.StatusNotFound))
		return
	}
	raw := strings.TrimSpace(r.PostFormValue("input"))
	switch {
	case in == nil || in.RequestID != r.PostFormValue("request"):
		s.flash(ss, "That input request is no longer pending.", false)
	case !json.Valid([]byte(raw)):
		s.flash(ss, "The input must be JSON.", false)
	default:
		_, _, err := s.d.Engine.ProvideInput(r.Context(), tasks.InputSubmission{Caller: t.Caller, Endpoint: t.Endpoint, TaskID: t.ID,
			RequestID: in.RequestID, ExpectedRevision: t.Revision, MediaType: ns.MediaJSON, Input: []byte(raw)})
		s.d.Log.Info("console input", "operator", ss.user, "task", t.ID, "err", err)
		if err != nil {
			s.flash(ss, "The input was refused: "+rejectText(err), false)
		} else {
			s.flash(ss, "Input sent.", true)
		}
	}
	http.Redirect(w, r, "/tasks/"+url.PathEscape(t.ID), http.StatusSeeOther)
}

// run invokes a tool as the operator, through the task engine like an
// invoke from that admin's XMPP account, and opens the task's page.
func (s *Server) run(w http.ResponseWriter, r *http.Request, ss *session) {
	ep, ok := bareJID(r.PathValue("endpoint"))
	if !ok || s.d.Engine == nil || ss.user == "" {
		http.Error(w, "No such agent, or running tools is off for this login.", http.StatusNotFound)
		return
	}
	back := "/agents/" + url.PathEscape(ep)
	m, ok := s.d.Directory.Active(ep)
	if !ok {
		s.flash(ss, "The agent has no active version.", false)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	args := strings.TrimSpace(r.PostFormValue("arguments"))
	if r.PostFormValue("form") == "fields" {
		// The fields of the tool's schema in the active manifest, built
		// again here: the browser's idea of the form is not trusted.
		var fields []formField
		ok := false
		for _, t := range m.Tools {
			if t.Name == r.PostFormValue("tool") {
				fields, ok = fieldsOf(t.InputSchema)
			}
		}
		if !ok {
			s.flash(ss, "The tool's form changed (a new version?): reload the page.", false)
			http.Redirect(w, r, back, http.StatusSeeOther)
			return
		}
		b, err := argumentsOf(fields, r.PostForm)
		if err != nil {
			s.flash(ss, "The arguments were not sent: "+err.Error()+".", false)
			http.Redirect(w, r, back, http.StatusSeeOther)
			return
		}
		args = string(b)
	}
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		s.flash(ss, "The arguments must be a JSON object.", false)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	acc, err := s.d.Engine.Admit(r.Context(), tasks.Invocation{Caller: ss.user, Route: ss.user + "/" + s.d.RouteResource,
		Endpoint: ep, RequestID: ids.New("console-"), Tool: r.PostFormValue("tool"), APIVersion: m.Version,
		ManifestHash: m.Hash, Arguments: []byte(args), MediaType: ns.MediaJSON})
	s.d.Log.Info("console run", "operator", ss.user, "endpoint", ep, "err", err)
	if err != nil {
		s.flash(ss, "The gateway refused the invocation: "+rejectText(err), false)
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/tasks/"+url.PathEscape(acc.TaskID), http.StatusSeeOther)
}

// rejectText names an engine refusal by its condition, never quoting input.
func rejectText(err error) string {
	for _, c := range []struct {
		err  error
		text string
	}{{tasks.ErrBadRequest, "bad request"}, {tasks.ErrNotFound, "not found (or not permitted)"}, {tasks.ErrConflict, "conflict (the task changed, or the input is stale)"},
		{tasks.ErrNotAcceptable, "not acceptable (the JSON does not match the schema)"}, {tasks.ErrResourceConstraint, "resource constraint (a quota or limit)"},
		{tasks.ErrServiceUnavailable, "service unavailable (no running backend)"}} {
		if errors.Is(err, c.err) {
			return c.text + "."
		}
	}
	return "see the gateway's log."
}
