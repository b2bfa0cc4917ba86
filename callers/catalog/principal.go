package catalog

import (
	"context"
	"encoding/json"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient"
)

// As returns a view of c whose every request names principal as the
// requester (agentclient.WithPrincipal): what a front serving many users
// through one trusted account gives each user's catalog and calls. The
// view is not a catalog-change watcher (the gateway's pushes are computed
// for the subscriber, the front's own account), so its catalog polls.
func As(c Client, principal jid.JID) Client {
	return asPrincipal{c: c, p: principal.Bare()}
}

type asPrincipal struct {
	c Client
	p jid.JID
}

var _ Client = asPrincipal{}

func (a asPrincipal) ctx(ctx context.Context) context.Context {
	return agentclient.WithPrincipal(ctx, a.p)
}

// JID is the front's own connection (gateways are found from its server).
func (a asPrincipal) JID() jid.JID { return a.c.JID() }

// PrincipalOf returns whom c acts for: the principal of an As view, or
// the bare JID of c's own account.
func PrincipalOf(c Client) jid.JID {
	if a, ok := c.(asPrincipal); ok {
		return a.p
	}
	return c.JID().Bare()
}

func (a asPrincipal) FindGateways(ctx context.Context, server jid.JID) ([]jid.JID, error) {
	return a.c.FindGateways(a.ctx(ctx), server)
}

func (a asPrincipal) AllItems(ctx context.Context, to jid.JID, node string, pageSize int) ([]agentclient.Item, error) {
	return a.c.AllItems(a.ctx(ctx), to, node, pageSize)
}

func (a asPrincipal) Endpoint(ctx context.Context, ep jid.JID) (*agentclient.EndpointInfo, error) {
	return a.c.Endpoint(a.ctx(ctx), ep)
}

func (a asPrincipal) GetManifest(ctx context.Context, ep jid.JID, version string) (*agentclient.Manifest, error) {
	return a.c.GetManifest(a.ctx(ctx), ep, version)
}

func (a asPrincipal) Invoke(ctx context.Context, ep jid.JID, req *agentclient.InvokeRequest) (*agentclient.Accepted, error) {
	return a.c.Invoke(a.ctx(ctx), ep, req)
}

func (a asPrincipal) Follow(ctx context.Context, ep jid.JID, acc *agentclient.Accepted, opts agentclient.CallOptions) (*agentclient.Outcome, error) {
	return a.c.Follow(a.ctx(ctx), ep, acc, opts)
}

// Subscribe watches events the gateway routes to the front's connection;
// task ids are unguessable and the gateway checks ownership on every
// request, so the shared event stream is safe.
func (a asPrincipal) Subscribe(ep jid.JID, taskID string) (<-chan agentclient.Event, func()) {
	return a.c.Subscribe(ep, taskID)
}

func (a asPrincipal) State(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskState, error) {
	return a.c.State(a.ctx(ctx), ep, taskID)
}

func (a asPrincipal) Result(ctx context.Context, ep jid.JID, taskID string) (*agentclient.TaskResult, error) {
	return a.c.Result(a.ctx(ctx), ep, taskID)
}

func (a asPrincipal) Cancel(ctx context.Context, ep jid.JID, taskID string, expectedRevision int64, reason *string) (int64, error) {
	return a.c.Cancel(a.ctx(ctx), ep, taskID, expectedRevision, reason)
}

func (a asPrincipal) ProvideInput(ctx context.Context, ep jid.JID, taskID, requestID string, expectedRevision int64, input json.RawMessage) (int64, error) {
	return a.c.ProvideInput(a.ctx(ctx), ep, taskID, requestID, expectedRevision, input)
}
