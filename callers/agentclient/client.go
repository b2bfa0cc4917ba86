// Package agentclient is the caller side of the XMPP Agent Gateway
// protocol: gateway discovery, RSM-paged directory listing and search,
// endpoint and tool information, pinned manifests and schemas with hash
// checks, invocation with identical-request-id retry, lifecycle events, and
// recovery through task-state. The CLI, the MCP front and the end-to-end
// tests all use it.
package agentclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/backoff"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Conn is the XMPP connection the client uses; *xmppclient.Client
// satisfies it.
type Conn interface {
	SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error)
	OnMessage(func(*xmltree.Element))
	JID() jid.JID
}

// Client speaks the protocol over one connection.
type Client struct {
	conn Conn
	log  *slog.Logger

	// IQTimeout bounds each IQ attempt; Retries is how often an invoke is
	// re-sent with the identical request-id after a timeout.
	IQTimeout time.Duration
	Retries   int
	// ConstraintRetries is how often an IQ refused with a temporary
	// resource-constraint (a rate limit, full task capacity) is sent again,
	// after a jittered backoff growing from ConstraintBackoff to
	// ConstraintBackoffMax; 0 gives up at once. Resending is safe: the
	// refusal came before any processing, and invoke, input and cancel are
	// idempotent by their identifiers anyway.
	ConstraintRetries    int
	ConstraintBackoff    time.Duration
	ConstraintBackoffMax time.Duration

	mu     sync.Mutex
	tasks  map[taskKey]*taskEvents
	recent []taskKey // insertion order, to bound tasks

	catalogMu sync.Mutex
	onCatalog func(CatalogChange)
}

type taskKey struct{ endpoint, taskID string }

// Condition returns the stanza error condition of err, or "". An error
// reply is an *agentproto.StanzaError, read by agentproto.ParseError with
// the remote text.
func Condition(err error) agentproto.Condition {
	var se *agentproto.StanzaError
	if errors.As(err, &se) {
		return se.Condition
	}
	return ""
}

// ErrHashMismatch means received JSON does not match its advertised hash.
var ErrHashMismatch = errors.New("agentclient: received JSON does not match its advertised sha-256 hash")

// New wraps a connection and starts watching its messages for events.
func New(conn Conn, log *slog.Logger) *Client {
	if log == nil {
		log = slog.Default()
	}
	c := &Client{conn: conn, log: log, IQTimeout: 30 * time.Second, Retries: 3,
		ConstraintRetries: 6, ConstraintBackoff: 250 * time.Millisecond, ConstraintBackoffMax: 8 * time.Second,
		tasks: map[taskKey]*taskEvents{}}
	conn.OnMessage(c.handleMessage)
	return c
}

// JID is the connection's own full JID.
func (c *Client) JID() jid.JID { return c.conn.JID() }

// iq sends an IQ and returns the payload of its result, or an
// *agentproto.StanzaError.
// A temporary resource-constraint is retried with backoff, bounded by
// ConstraintRetries and ctx.
func (c *Client) iq(ctx context.Context, typ string, to jid.JID, payload *xmltree.Element) (*xmltree.Element, error) {
	var bo *backoff.Backoff
	for attempt := 0; ; attempt++ {
		p, err := c.iqOnce(ctx, typ, to, payload)
		var se *agentproto.StanzaError
		if err == nil || !errors.As(err, &se) || !temporaryConstraint(se) {
			return p, err
		}
		if attempt >= c.ConstraintRetries {
			if attempt == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("agentclient: %s still refused after %d attempts: %w", payloadName(payload), attempt+1, err)
		}
		if bo == nil {
			bo = backoff.New(c.ConstraintBackoff, c.ConstraintBackoffMax)
		}
		d := bo.Next()
		c.log.Info("request refused for now; retrying", "request", payloadName(payload), "to", to.String(), "err", err, "attempt", attempt+1, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// temporaryConstraint: RFC 6120 gives resource-constraint the type wait,
// "retry after waiting"; the gateway uses it for rate limits and full
// capacity.
func temporaryConstraint(se *agentproto.StanzaError) bool {
	return se.Condition == agentproto.CondResourceConstraint && se.Type == agentproto.TypeWait
}

func payloadName(p *xmltree.Element) string {
	if p == nil {
		return "IQ"
	}
	return p.Name.Local
}

// principalKey carries the principal of WithPrincipal.
type principalKey struct{}

// WithPrincipal returns ctx under which every IQ the client sends names
// principal's bare JID as the requester (urn:agentgw:principal:0, inside
// the payload): the way a front serving many users acts for each as
// themselves. The gateway accepts it only from an account listed in its
// [policy] trusted_fronts and refuses it with forbidden from anyone else.
func WithPrincipal(ctx context.Context, principal jid.JID) context.Context {
	return context.WithValue(ctx, principalKey{}, principal.Bare())
}

// PrincipalOf returns the principal ctx names, if any.
func PrincipalOf(ctx context.Context) (jid.JID, bool) {
	p, ok := ctx.Value(principalKey{}).(jid.JID)
	return p, ok && p.String() != ""
}

// iqOnce sends one IQ attempt.
func (c *Client) iqOnce(ctx context.Context, typ string, to jid.JID, payload *xmltree.Element) (*xmltree.Element, error) {
	el := xmltree.New("jabber:client", "iq", "type", typ, "id", ids.New("q-"), "to", to.String())
	if p, ok := PrincipalOf(ctx); ok && payload != nil {
		// On a copy: the caller's payload is sent again on a retry.
		cp := *payload
		cp.Children = append(slices.Clip(payload.Children), xmltree.New(ns.Principal, "on-behalf-of", "jid", p.String()))
		payload = &cp
	}
	el.Add(payload)
	ctx, cancel := context.WithTimeout(ctx, c.IQTimeout)
	defer cancel()
	reply, err := c.conn.SendIQ(ctx, el)
	if err != nil {
		return nil, err
	}
	return resultPayload(reply)
}

func resultPayload(reply *xmltree.Element) (*xmltree.Element, error) {
	switch reply.AttrValue("type") {
	case "result":
		if len(reply.Children) == 0 {
			return nil, nil
		}
		return reply.Children[0], nil
	case "error":
		return nil, agentproto.ParseError(reply)
	}
	return nil, fmt.Errorf("agentclient: unexpected IQ reply type %q", reply.AttrValue("type"))
}

// DiscoInfo is a disco#info result.
type DiscoInfo struct {
	Identities []Identity
	Features   map[string]bool
	Forms      map[string]map[string][]string // FORM_TYPE → var → values
}

// Identity is a disco identity.
type Identity struct{ Category, Type, Name string }

// HasIdentity reports whether an identity with category and type exists.
func (d *DiscoInfo) HasIdentity(category, typ string) bool {
	for _, i := range d.Identities {
		if i.Category == category && i.Type == typ {
			return true
		}
	}
	return false
}

// Info queries disco#info of to, at node when not empty.
func (c *Client) Info(ctx context.Context, to jid.JID, node string) (*DiscoInfo, error) {
	q := xmltree.New(ns.DiscoInfo, "query")
	if node != "" {
		q.SetAttr("node", node)
	}
	p, err := c.iq(ctx, "get", to, q)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errors.New("agentclient: empty disco#info result")
	}
	info := &DiscoInfo{Features: map[string]bool{}, Forms: map[string]map[string][]string{}}
	for _, ch := range p.Children {
		switch {
		case ch.Is(ns.DiscoInfo, "identity"):
			info.Identities = append(info.Identities, Identity{ch.AttrValue("category"), ch.AttrValue("type"), ch.AttrValue("name")})
		case ch.Is(ns.DiscoInfo, "feature"):
			info.Features[ch.AttrValue("var")] = true
		case ch.Is(ns.Data, "x"):
			fields := formFields(ch)
			if ft := fields["FORM_TYPE"]; len(ft) == 1 {
				info.Forms[ft[0]] = fields
			}
		}
	}
	return info, nil
}

func formFields(x *xmltree.Element) map[string][]string {
	out := map[string][]string{}
	for _, f := range x.ChildrenNamed(ns.Data, "field") {
		v := f.AttrValue("var")
		vals := []string{}
		for _, val := range f.ChildrenNamed(ns.Data, "value") {
			vals = append(vals, val.Text)
		}
		out[v] = vals
	}
	return out
}

// Item is a disco#items item.
type Item struct{ JID, Node, Name string }

// Page is one RSM page of items.
type Page struct {
	Items       []Item
	First, Last string
	Count       int // -1 when the responder sent none
}

// Items queries disco#items of to at node, with RSM max and after (after
// "" asks for the first page).
func (c *Client) Items(ctx context.Context, to jid.JID, node string, max int, after string) (*Page, error) {
	q := xmltree.New(ns.DiscoItems, "query")
	if node != "" {
		q.SetAttr("node", node)
	}
	if max > 0 || after != "" {
		q.Add(rsmRequest(max, after))
	}
	p, err := c.iq(ctx, "get", to, q)
	if err != nil {
		return nil, err
	}
	page := &Page{Count: -1}
	if p == nil {
		return page, nil
	}
	for _, ch := range p.Children {
		if ch.Is(ns.DiscoItems, "item") {
			page.Items = append(page.Items, Item{ch.AttrValue("jid"), ch.AttrValue("node"), ch.AttrValue("name")})
		}
	}
	parseRSMResult(p.Child(ns.RSM, "set"), page)
	return page, nil
}

func rsmRequest(max int, after string) *xmltree.Element {
	set := xmltree.New(ns.RSM, "set")
	if max > 0 {
		set.Add(xmltree.New(ns.RSM, "max").WithText(strconv.Itoa(max)))
	}
	if after != "" {
		set.Add(xmltree.New(ns.RSM, "after").WithText(after))
	}
	return set
}

func parseRSMResult(set *xmltree.Element, page *Page) {
	if set == nil {
		return
	}
	if f := set.Child(ns.RSM, "first"); f != nil {
		page.First = f.Text
	}
	if l := set.Child(ns.RSM, "last"); l != nil {
		page.Last = l.Text
	}
	if n := set.Child(ns.RSM, "count"); n != nil {
		if v, err := strconv.Atoi(n.Text); err == nil {
			page.Count = v
		}
	}
}

// AllItems walks every RSM page. It stops after maxPages pages as a guard
// against a responder that never ends.
func (c *Client) AllItems(ctx context.Context, to jid.JID, node string, pageSize int) ([]Item, error) {
	const maxPages = 10000
	var all []Item
	after := ""
	for i := 0; i < maxPages; i++ {
		page, err := c.Items(ctx, to, node, pageSize, after)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if len(page.Items) == 0 || page.Last == "" || (page.Count >= 0 && len(all) >= page.Count) {
			return all, nil
		}
		after = page.Last
	}
	return all, errors.New("agentclient: directory did not end after 10000 pages")
}
