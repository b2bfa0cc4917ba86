package console

import (
	"bytes"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/adhoc/admincmd"
	"github.com/agentgw/agentgw/federation"
)

func parseTemplates() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"scope":    federation.ScopeString,
		"pretty":   prettyJSON,
		"toolform": formOf,
	}
	pages, err := fs.Glob(webFS, "web/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "web/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(webFS, "web/layout.html", p)
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// prettyJSON indents a schema for reading; it stays text.
func prettyJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// view is what every page's layout reads.
type view struct {
	Title    string
	Operator string
	CSRF     string
	Nav      string
	Flash    string
	FlashOK  bool
	Data     any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, ss *session, page string, data any) {
	t := s.tmpl[page]
	v := view{Title: page, Nav: page, Data: data}
	if ss != nil {
		v.Operator, v.CSRF = ss.user, ss.csrf
		if ss.byToken {
			v.Operator += " (token)"
		}
	}
	if ss != nil {
		// The outcome of the last action, kept in the session (never in
		// the URL, so no link can make the console say something).
		v.Flash, v.FlashOK = s.takeFlash(r.Context(), ss)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", v); err != nil {
		s.d.Log.Error("console page", "page", page, "err", err)
		http.Error(w, "The page could not be rendered; the gateway's log has the reason.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", s.static)
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.authed(s.logout))
	m.HandleFunc("GET /{$}", s.authed(func(w http.ResponseWriter, r *http.Request, ss *session) {
		http.Redirect(w, r, "/agents", http.StatusSeeOther)
	}))
	m.HandleFunc("GET /agents", s.authed(s.agents))
	m.HandleFunc("GET /agents/{endpoint}", s.authed(s.agent))
	m.HandleFunc("GET /grants", s.authed(s.grants))
	m.HandleFunc("POST /grants/{op}", s.authed(s.grantOp))
	m.HandleFunc("GET /selfreg", s.authed(s.selfreg))
	m.HandleFunc("POST /selfreg/{op}", s.authed(s.selfregOp))
	m.HandleFunc("GET /bridges", s.authed(s.bridges))
	s.taskRoutes(m)
	s.mux = m
}

type agentRow struct {
	Endpoint, Name, Active, Health string
	Tools                          int
}

// agentPageSize bounds the agents listed at once.
const agentPageSize = 100

func (s *Server) agents(w http.ResponseWriter, r *http.Request, ss *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > 256 {
		q = q[:256]
	}
	var rows []agentRow
	for _, ev := range s.d.Directory.Endpoints() {
		row := agentRow{Endpoint: ev.Endpoint, Active: ev.Active, Health: "none"}
		if m, ok := s.d.Directory.Active(ev.Endpoint); ok {
			row.Name, row.Tools = m.Agent.Name, len(m.Tools)
			if m.Agent.Title != "" {
				row.Name = m.Agent.Title
			}
		}
		if q != "" && !strings.Contains(strings.ToLower(row.Endpoint+" "+row.Name), strings.ToLower(q)) {
			continue
		}
		if s.d.Health != nil {
			row.Health = s.d.Health(ev.Endpoint)
		}
		rows = append(rows, row)
	}
	page, more := pageOf(r, len(rows), agentPageSize)
	rows = rows[page.From:page.To]
	s.render(w, r, ss, "agents", map[string]any{"Rows": rows, "Q": q, "Page": page, "More": more})
}

type pageInfo struct{ N, From, To, Prev, Next, Total int }

func pageOf(r *http.Request, total, size int) (pageInfo, bool) {
	n := 0
	if v := r.URL.Query().Get("page"); v != "" {
		for _, c := range v {
			if c < '0' || c > '9' || n > 1e6 {
				n = 0
				break
			}
			n = n*10 + int(c-'0')
		}
	}
	p := pageInfo{N: n, From: n * size, Total: total, Prev: n - 1, Next: n + 1}
	if p.From > total {
		p.From = total
	}
	p.To = min(p.From+size, total)
	return p, p.To < total
}

func (s *Server) agent(w http.ResponseWriter, r *http.Request, ss *session) {
	ep, ok := bareJID(r.PathValue("endpoint"))
	if !ok || !s.d.Directory.Exists(ep) {
		http.Error(w, "No such agent.", http.StatusNotFound)
		return
	}
	st, err := s.d.Directory.Status(r.Context(), ep)
	if err != nil {
		http.Error(w, "The agent's status could not be read; the gateway's log has the reason.", http.StatusInternalServerError)
		s.d.Log.Warn("console: status", "endpoint", ep, "err", err)
		return
	}
	data := map[string]any{"Endpoint": ep, "Status": st, "Health": "none", "CanRun": s.d.Engine != nil && ss.user != ""}
	if s.d.Health != nil {
		data["Health"] = s.d.Health(ep)
	}
	if m, ok := s.d.Directory.Active(ep); ok {
		data["Manifest"] = m
	}
	s.render(w, r, ss, "agent", data)
}

func bareJID(s string) (string, bool) {
	if s == "" || len(s) > 3071 {
		return "", false
	}
	j, err := jid.Parse(s)
	if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return "", false
	}
	return j.String(), true
}

func (s *Server) grants(w http.ResponseWriter, r *http.Request, ss *session) {
	data := map[string]any{"Enabled": s.d.Grants != nil}
	if s.d.Grants != nil {
		gs, err := s.d.Grants.List(r.Context())
		if err != nil {
			http.Error(w, "The grants could not be read; the gateway's log has the reason.", http.StatusInternalServerError)
			return
		}
		data["Grants"] = gs
	}
	s.render(w, r, ss, "grants", data)
}

// exec runs an admin command as the session's operator and redirects
// back to page with its note.
func (s *Server) exec(w http.ResponseWriter, r *http.Request, ss *session, page, name string, fields ...string) {
	v := map[string][]string{}
	for _, f := range fields {
		if vals := r.PostForm[f]; len(vals) > 0 {
			v[f] = vals
		}
	}
	out, err := s.d.Admin.Exec(r.Context(), ss.user, name, v)
	if err == admincmd.ErrUnknownCommand {
		http.Error(w, "That operation is not available here.", http.StatusNotFound)
		return
	}
	if err != nil {
		// A fixed sentence from the command table, never the input.
		s.flash(ss, err.Error(), false)
	} else {
		s.flash(ss, out.Note, out.OK)
	}
	http.Redirect(w, r, page, http.StatusSeeOther)
}

func (s *Server) grantOp(w http.ResponseWriter, r *http.Request, ss *session) {
	switch r.PathValue("op") {
	case "grant":
		s.exec(w, r, ss, "/grants", "trust-grant", "principal", "scope", "endpoint")
	case "revoke":
		s.exec(w, r, ss, "/grants", "trust-revoke", "principal", "scope", "endpoint")
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) selfreg(w http.ResponseWriter, r *http.Request, ss *session) {
	data := map[string]any{"Enabled": s.d.SelfReg != nil}
	if s.d.SelfReg != nil {
		recs, err := s.d.SelfReg.Records(r.Context())
		if err != nil {
			http.Error(w, "The self-registrations could not be read; the gateway's log has the reason.", http.StatusInternalServerError)
			return
		}
		bans, err := s.d.SelfReg.Bans(r.Context())
		if err != nil {
			http.Error(w, "The bans could not be read; the gateway's log has the reason.", http.StatusInternalServerError)
			return
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].Endpoint < recs[j].Endpoint })
		data["Records"], data["Bans"] = recs, bans
	}
	s.render(w, r, ss, "selfreg", data)
}

func (s *Server) selfregOp(w http.ResponseWriter, r *http.Request, ss *session) {
	switch r.PathValue("op") {
	case "ban":
		s.exec(w, r, ss, "/selfreg", "ban", "endpoint", "reason")
	case "unban":
		s.exec(w, r, ss, "/selfreg", "unban", "endpoint")
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) bridges(w http.ResponseWriter, r *http.Request, ss *session) {
	data := map[string]any{}
	if s.d.Bridges != nil {
		rows := s.d.Bridges(r.Context())
		sort.SliceStable(rows, func(i, j int) bool {
			if rows[i].Kind != rows[j].Kind {
				return rows[i].Kind < rows[j].Kind
			}
			return rows[i].Endpoint < rows[j].Endpoint
		})
		data["Rows"] = rows
	}
	if s.d.Cluster != nil {
		v, err := s.d.Cluster(r.Context())
		if err != nil {
			s.d.Log.Warn("console: cluster", "err", err)
			data["ClusterError"] = "The cluster's members or leases could not be read; the gateway's log has the reason."
		}
		data["Cluster"] = v
		if v != nil {
			// Each member with the named leases it holds.
			held := map[string][]string{}
			for _, l := range v.Leases {
				if l.Live {
					held[l.Holder] = append(held[l.Holder], l.Name)
				}
			}
			data["Held"] = held
		}
	}
	s.render(w, r, ss, "bridges", data)
}
