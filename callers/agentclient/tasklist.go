package agentclient

import (
	"context"
	"errors"
	"strconv"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// TaskListQuery asks a gateway for a page of the account's own tasks
// (agentgw's task-list extension, docs/task-list.md).
type TaskListQuery struct {
	After  string           // the Cursor of the previous page's last task
	State  agentproto.State // only tasks in this state, when set
	TaskID string           // only this task, when set
	Max    int              // page size, 1..50 (0: the gateway's 50)
}

// ListedTask is one task of a page.
type ListedTask struct {
	TaskID, Tool, APIVersion      string
	Endpoint                      jid.JID
	State                         agentproto.State
	Revision                      int64
	Created, Updated, RetainUntil string // XEP-0082
	ResultAvailable               bool
	// CancelRevision is the revision at which the gateway accepted a
	// cancellation of the task, 0 if it never did.
	CancelRevision int64
	Cursor         string
}

// TaskList is one page, newest first; More says a further page may hold
// tasks (ask again with After set to the last task's Cursor).
type TaskList struct {
	Tasks []ListedTask
	More  bool
}

// maxListed bounds what a reply may carry, whatever the gateway sends.
const maxListed = 100

// ListTasks asks gateway (a gateway domain JID) for the account's own
// tasks there. A gateway without the extension answers with a stanza
// error (service-unavailable or feature-not-implemented). Tasks whose
// endpoint is not on the gateway's domain, or whose ids are malformed,
// are dropped: a gateway lists only its own endpoints.
func (c *Client) ListTasks(ctx context.Context, gateway jid.JID, q TaskListQuery) (*TaskList, error) {
	el := xmltree.New(ns.TaskList, "list")
	if q.After != "" {
		el.SetAttr("after", q.After)
	}
	if q.State != "" {
		el.SetAttr("state", string(q.State))
	}
	if q.TaskID != "" {
		el.SetAttr("task-id", q.TaskID)
	}
	if q.Max > 0 {
		el.SetAttr("max", strconv.Itoa(q.Max))
	}
	p, err := c.iq(ctx, "get", gateway.Domain(), el)
	if err != nil {
		return nil, err
	}
	if !p.Is(ns.TaskList, "list") {
		return nil, errors.New("agentclient: task list result has no list element")
	}
	out := &TaskList{More: p.AttrValue("more") == "true", Tasks: []ListedTask{}}
	for _, t := range p.Children {
		if !t.Is(ns.TaskList, "task") {
			continue
		}
		if len(out.Tasks) == maxListed {
			break
		}
		ep, err := jid.Parse(t.AttrValue("endpoint"))
		if err != nil || ep.Localpart() == "" || ep.Domainpart() != gateway.Domainpart() || !ids.Valid(t.AttrValue("task-id")) {
			continue
		}
		lt := ListedTask{
			TaskID: t.AttrValue("task-id"), Tool: t.AttrValue("tool"), APIVersion: t.AttrValue("api-version"),
			Endpoint: ep.Bare(), State: agentproto.State(t.AttrValue("state")),
			Created: t.AttrValue("created"), Updated: t.AttrValue("updated"), RetainUntil: t.AttrValue("retain-until"),
			ResultAvailable: t.AttrValue("result-available") == "true", Cursor: t.AttrValue("cursor"),
		}
		lt.Revision, _ = strconv.ParseInt(t.AttrValue("revision"), 10, 64)
		lt.CancelRevision, _ = strconv.ParseInt(t.AttrValue("cancel-revision"), 10, 64)
		out.Tasks = append(out.Tasks, lt)
	}
	return out, nil
}
