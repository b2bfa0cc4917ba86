// Package admincmd offers the gateway's administration as XEP-0050 ad-hoc
// commands on the gateway's own JID, with XEP-0004 forms, so that an
// operator can administer from any XMPP client (Gajim, Converse.js,
// Psi): register, activate, deactivate and inspect manifests, grant,
// revoke and list federation trust, ban and unban self-registered
// endpoints, and look a task up.
//
// Every command runs the code the CLI and the admin IQs run (the
// directory's Admin, the grant store, the self-registration store, the
// task store); this package only renders forms. Commands are one stage
// each and keep no session state: the submitted form carries everything,
// so any cluster member can take the submission. Only administrators
// ([xmpp] admins) see or run them; to anyone else the commands node and
// every command node answer exactly as a node that does not exist.
package admincmd

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/directory/selfregdb"
	"github.com/agentgw/agentgw/federation"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks/taskdb"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// NodePrefix starts every admin command node.
const NodePrefix = "urn:agentgw:admin#"

// FormType is the FORM_TYPE of the admin command forms.
const FormType = "urn:agentgw:admin"

// Deps is what the commands act on. Admin and IsAdmin are required; a
// command whose store is nil is not offered.
type Deps struct {
	IsAdmin func(principal string) bool
	Admin   directory.Admin
	Grants  federation.GrantStore
	SelfReg selfregdb.Driver
	Tasks   taskdb.Driver
	// Cancel cancels a task on its caller's behalf for the admin
	// (tasks.Engine.CancelAsOperator, which the console calls too); the
	// task-cancel command is offered only with it.
	Cancel func(ctx context.Context, taskID, operator, via string) (int64, error)
	// IsLocal tells local principals, which grants do not govern.
	IsLocal func(principal string) bool
	Log     *slog.Logger
	Now     func() time.Time
}

// Service serves the admin commands.
type Service struct {
	d    Deps
	cmds []*command
}

// New makes the service; Register installs its IQ handler.
func New(d Deps) *Service {
	if d.IsAdmin == nil || d.Admin == nil {
		panic("admincmd: New needs IsAdmin and Admin")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.IsLocal == nil {
		d.IsLocal = func(string) bool { return false }
	}
	s := &Service{d: d}
	for _, c := range table(s) {
		if c.offered == nil || c.offered() {
			s.cmds = append(s.cmds, c)
		}
	}
	return s
}

// Register installs the command IQ at the gateway's JID.
func (s *Service) Register(r *component.Router) {
	r.HandleGatewayIQ(component.IQSet, ns.Commands, "command", component.IQHandlerFunc(s.command))
}

// Features are the gateway features the commands add for requester.
func (s *Service) Features(requester string) []string {
	if !s.d.IsAdmin(requester) {
		return nil
	}
	return []string{ns.Commands}
}

// NodeItems lists the commands at the commands node, for administrators;
// ok false (item-not-found) for anyone else and for other nodes.
func (s *Service) NodeItems(requester, gateway, node string) (*xmltree.Element, bool) {
	if !s.d.IsAdmin(requester) {
		return nil, false
	}
	if node != ns.Commands {
		if s.lookup(node) == nil {
			return nil, false
		}
		return xmltree.New(ns.DiscoItems, "query", "node", node), true
	}
	q := xmltree.New(ns.DiscoItems, "query", "node", ns.Commands)
	for _, c := range s.cmds {
		q.Add(xmltree.New(ns.DiscoItems, "item", "jid", gateway, "node", NodePrefix+c.name, "name", c.title))
	}
	return q, true
}

// NodeInfo answers disco#info at the commands node and at a command node,
// for administrators.
func (s *Service) NodeInfo(requester, node string) (*xmltree.Element, bool) {
	if !s.d.IsAdmin(requester) {
		return nil, false
	}
	q := xmltree.New(ns.DiscoInfo, "query", "node", node)
	if node == ns.Commands {
		q.Add(xmltree.New(ns.DiscoInfo, "identity", "category", "automation", "type", "command-list", "name", "Commands"))
		q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", ns.DiscoInfo), xmltree.New(ns.DiscoInfo, "feature", "var", ns.DiscoItems))
		return q, true
	}
	c := s.lookup(node)
	if c == nil {
		return nil, false
	}
	q.Add(xmltree.New(ns.DiscoInfo, "identity", "category", "automation", "type", ns.TypeCommand, "name", c.title))
	q.Add(xmltree.New(ns.DiscoInfo, "feature", "var", ns.Commands), xmltree.New(ns.DiscoInfo, "feature", "var", ns.Data))
	return q, true
}

func (s *Service) lookup(node string) *command {
	name, ok := strings.CutPrefix(node, NodePrefix)
	if !ok {
		return nil
	}
	for _, c := range s.cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

// command handles a <command/> set at the gateway. A non-administrator
// gets item-not-found before anything it sent is looked at, as for a node
// that does not exist.
func (s *Service) command(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	requester := iq.From.Bare().String()
	if !s.d.IsAdmin(requester) {
		return nil, agentproto.ErrItemNotFound()
	}
	p := iq.Payload
	node, sid, action := p.AttrValue("node"), p.AttrValue("sessionid"), p.AttrValue("action")
	c := s.lookup(node)
	if c == nil {
		return nil, agentproto.ErrItemNotFound()
	}
	if action == "" {
		action = "execute"
	}
	switch action {
	case "execute", "complete", "next", "prev", "cancel":
	default:
		return nil, cmdError(agentproto.ErrBadRequest("The action is not one of execute, next, prev, complete or cancel."), "malformed-action")
	}
	if sid != "" && !ids.Valid(sid) {
		return nil, cmdError(agentproto.ErrBadRequest("Unknown or expired command session: start the command again."), "bad-sessionid")
	}
	if action == "cancel" {
		if sid == "" {
			return nil, cmdError(agentproto.ErrBadRequest("A command starts with the execute action."), "bad-action")
		}
		return stage(node, sid, "canceled"), nil
	}
	form, err := submitted(p)
	if err != nil {
		return nil, err
	}
	if form == nil {
		if sid == "" {
			sid = ids.New("adm-")
		}
		if len(c.fields) == 0 {
			// Nothing to ask (the lists): run at once.
			return s.run(ctx, requester, c, node, sid, map[string][]string{})
		}
		return stage(node, sid, "executing").Add(
			xmltree.New(ns.Commands, "actions", "execute", "complete").Add(xmltree.New(ns.Commands, "complete")),
			(&dataform.Form{Type: dataform.TypeForm, FormType: FormType, Title: c.title, Instructions: []string{c.help}, Fields: c.fields}).Element()), nil
	}
	if action == "prev" {
		return nil, cmdError(agentproto.ErrBadRequest("This command has one stage."), "bad-action")
	}
	if sid == "" {
		sid = ids.New("adm-")
	}
	return s.run(ctx, requester, c, node, sid, form)
}

// run performs c with the submitted values and renders its outcome: a
// completed stage with a note and, for the reads, a result form. A
// refusal is a completed stage with an error note, so the form stays
// readable in every client; only malformed submissions are IQ errors.
func (s *Service) run(ctx context.Context, requester string, c *command, node, sid string, v map[string][]string) (*xmltree.Element, error) {
	res, err := c.run(withAdmin(ctx, requester, "admin command"), v)
	var bad badInput
	switch {
	case errors.As(err, &bad):
		return nil, cmdError(agentproto.ErrBadRequest(string(bad)), "bad-payload")
	case err != nil:
		s.d.Log.Info("admin command refused", "command", c.name, "admin", requester, "err", err)
		return stage(node, sid, "completed").Add(note("error", refusal(err))), nil
	}
	s.d.Log.Info("admin command", "command", c.name, "admin", requester)
	out := stage(node, sid, "completed").Add(note("info", res.note))
	if res.form != nil {
		res.form.Type, res.form.FormType = dataform.TypeResult, FormType
		out.Add(res.form.Element())
	}
	return out, nil
}

// submitted parses the command's form: nil when none, or of type cancel.
func submitted(c *xmltree.Element) (map[string][]string, error) {
	xs := c.ChildrenNamed(ns.Data, "x")
	if len(xs) == 0 {
		return nil, nil
	}
	if len(xs) > 1 {
		return nil, cmdError(agentproto.ErrBadRequest("A command stage carries at most one data form."), "bad-payload")
	}
	f, err := dataform.Parse(xs[0])
	if errors.Is(err, dataform.ErrLimit) {
		return nil, cmdError(agentproto.ErrBadRequest("The form exceeds the limits: at most 256 fields, 64 values per field, 64 KiB per value and 1 MiB in all."), "bad-payload")
	}
	if err != nil {
		return nil, cmdError(agentproto.ErrBadRequest("The form is not a well-formed data form."), "bad-payload")
	}
	switch {
	case f.Type == dataform.TypeCancel:
		return nil, nil
	case f.Type != dataform.TypeSubmit:
		return nil, cmdError(agentproto.ErrBadRequest("The form must be of type submit."), "bad-payload")
	case f.FormType != "" && f.FormType != FormType:
		return nil, cmdError(agentproto.ErrBadRequest("The form is not an admin command form."), "bad-payload")
	}
	return f.Values(), nil
}

func stage(node, sid, status string) *xmltree.Element {
	return xmltree.New(ns.Commands, "command", "node", node, "sessionid", sid, "status", status)
}

func note(typ, text string) *xmltree.Element {
	return xmltree.New(ns.Commands, "note", "type", typ).WithText(xmltree.Sanitize(text))
}

func cmdError(cond *agentproto.StanzaError, app string) *agentproto.StanzaError {
	cond.App = xmltree.New(ns.Commands, app)
	return cond
}

type adminKey struct{}

type adminCtx struct{ admin, via string }

// withAdmin carries who runs a command, and from where, to the commands
// that record it (task-cancel).
func withAdmin(ctx context.Context, admin, via string) context.Context {
	return context.WithValue(ctx, adminKey{}, adminCtx{admin, via})
}

func adminFrom(ctx context.Context) (admin, via string) {
	a, _ := ctx.Value(adminKey{}).(adminCtx)
	return a.admin, a.via
}
