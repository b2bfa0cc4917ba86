package taskxmpp

import (
	"context"
	"strconv"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/xmltree"
	"github.com/agentgw/agentgw/xep/xmpptime"
)

// Lister is the task engine's listing of a requester's own tasks.
type Lister interface {
	List(ctx context.Context, caller string, q tasks.ListQuery) (*tasks.ListPage, error)
}

// registerList installs the task-list extension (ns.TaskList): an IQ get
// to the gateway domain, answered for the requester's own tasks only.
func (h *Handlers) registerList(r *component.Router) {
	if h.Lister == nil {
		return
	}
	r.HandleGatewayIQ(component.IQGet, ns.TaskList, "list", component.IQHandlerFunc(h.list))
}

// Bounds of the request's attributes before they are looked at further.
const maxCursorAttr = 256

func (h *Handlers) list(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	p := iq.Payload
	q := tasks.ListQuery{After: p.AttrValue("after"), State: agentproto.State(p.AttrValue("state")), TaskID: p.AttrValue("task-id")}
	if len(q.After) > maxCursorAttr {
		return nil, agentproto.ErrBadRequest("after is not a cursor this gateway issued")
	}
	if m := p.AttrValue("max"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > tasks.MaxListPage {
			return nil, agentproto.ErrBadRequest("max must be an integer from 1 to " + strconv.Itoa(tasks.MaxListPage))
		}
		q.Max = n
	}
	if q.State != "" && !q.State.Known() {
		return nil, agentproto.ErrBadRequest("state must be one of the protocol's task states")
	}
	page, err := h.Lister.List(ctx, requester(iq), q)
	if err != nil {
		return nil, h.mapError(err, "task-list")
	}
	out := xmltree.New(ns.TaskList, "list")
	if page.More {
		out.SetAttr("more", "true")
	}
	for _, t := range page.Tasks {
		el := xmltree.New(ns.TaskList, "task",
			"task-id", t.TaskID, "endpoint", t.Endpoint, "tool", t.Tool, "api-version", t.APIVersion,
			"state", string(t.State), "revision", strconv.FormatInt(t.Revision, 10),
			"created", xmpptime.Format(t.Created), "updated", xmpptime.Format(t.Updated),
			"retain-until", xmpptime.Format(t.RetainUntil),
			"result-available", strconv.FormatBool(t.ResultAvailable), "cursor", t.Cursor)
		if t.CancelRevision > 0 {
			el.SetAttr("cancel-revision", strconv.FormatInt(t.CancelRevision, 10))
		}
		out.Add(el)
	}
	return out, nil
}
