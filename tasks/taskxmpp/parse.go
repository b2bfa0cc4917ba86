package taskxmpp

import (
	"strconv"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// MaxToolNameBytes bounds tool names on the wire; the manifest limits
// apply as well.
const MaxToolNameBytes = 1024

// ParseInvoke checks an <invoke/> against the XML Schema and the identifier
// grammar. Caller, route and endpoint are filled in by the handler.
func ParseInvoke(p *xmltree.Element) (tasks.Invocation, error) {
	var inv tasks.Invocation
	inv.RequestID = p.AttrValue("request-id")
	if !ids.Valid(inv.RequestID) {
		return inv, agentproto.ErrBadRequest("request-id is missing or not a valid identifier")
	}
	inv.Tool = p.AttrValue("tool")
	if inv.Tool == "" || len(inv.Tool) > MaxToolNameBytes {
		return inv, agentproto.ErrBadRequest("tool is missing or too long")
	}
	inv.APIVersion = p.AttrValue("api-version")
	if !ids.ValidVersion(inv.APIVersion) {
		return inv, agentproto.ErrBadRequest("api-version is missing or invalid")
	}
	var seenHash, seenArgs, seenDeadline, seenDelegation bool
	for _, c := range p.Children {
		if c.Is(ns.Delegation, "delegation") {
			// agentgw's extension (advertised as the ns.Delegation feature):
			// how many gateway hops this invocation is below a direct call.
			if seenDelegation || len(c.Children) > 0 {
				return inv, agentproto.ErrBadRequest("at most one empty delegation element")
			}
			seenDelegation = true
			d, err := parseDelegationDepth(c.AttrValue("depth"))
			if err != nil {
				return inv, err
			}
			inv.DelegationDepth = d
			inv.Extensions = map[string]string{ns.Delegation + "#depth": strconv.Itoa(d)}
			continue
		}
		if c.Name.Space != ns.Task {
			return inv, agentproto.ErrBadRequest("unexpected child element in invoke")
		}
		switch c.Name.Local {
		case "manifest-hash":
			if seenHash {
				return inv, agentproto.ErrBadRequest("duplicate manifest-hash")
			}
			seenHash = true
			h, err := parseHashContainer(c)
			if err != nil {
				return inv, err
			}
			inv.ManifestHash = h
		case "arguments":
			if seenArgs {
				return inv, agentproto.ErrBadRequest("duplicate arguments")
			}
			seenArgs = true
			// Simple content: a child element would splice the JSON text.
			if len(c.Children) > 0 {
				return inv, agentproto.ErrBadRequest("arguments must be text")
			}
			mt, ok := c.LookupAttr("media-type")
			if !ok {
				return inv, agentproto.ErrBadRequest("arguments need media-type='application/json'")
			}
			inv.MediaType = mt
			inv.Arguments = []byte(c.Text)
		case "deadline":
			if seenDeadline {
				return inv, agentproto.ErrBadRequest("duplicate deadline")
			}
			seenDeadline = true
			if len(c.Children) > 0 {
				return inv, agentproto.ErrBadRequest("deadline must be text")
			}
			if _, err := xmpptimeParse(c.Text); err != nil {
				return inv, agentproto.ErrBadRequest("deadline is not an XEP-0082 date-time")
			}
			inv.Deadline = c.Text
		default:
			return inv, agentproto.ErrBadRequest("unexpected child element in invoke")
		}
	}
	if !seenHash || !seenArgs {
		return inv, agentproto.ErrBadRequest("invoke needs manifest-hash and arguments")
	}
	return inv, nil
}

// ParseProvideInput checks a <provide-input/>.
func ParseProvideInput(p *xmltree.Element) (tasks.InputSubmission, error) {
	var in tasks.InputSubmission
	in.TaskID = p.AttrValue("task-id")
	in.RequestID = p.AttrValue("request-id")
	if !ids.Valid(in.TaskID) || !ids.Valid(in.RequestID) {
		return in, agentproto.ErrBadRequest("task-id or request-id is missing or not a valid identifier")
	}
	rev, err := parseRevision(p.AttrValue("expected-revision"))
	if err != nil {
		return in, err
	}
	in.ExpectedRevision = rev
	if len(p.Children) != 1 || !p.Children[0].Is(ns.Task, "input") {
		return in, agentproto.ErrBadRequest("provide-input needs exactly one input element")
	}
	c := p.Children[0]
	if len(c.Children) > 0 {
		return in, agentproto.ErrBadRequest("input must be text")
	}
	mt, ok := c.LookupAttr("media-type")
	if !ok {
		return in, agentproto.ErrBadRequest("input needs media-type='application/json'")
	}
	in.MediaType = mt
	in.Input = []byte(c.Text)
	return in, nil
}

// ParseCancel checks a <cancel/>. The reason's parsed character data is
// kept byte for byte: it is part of the cancellation's replay identity.
func ParseCancel(p *xmltree.Element) (tasks.CancelRequest, error) {
	var c tasks.CancelRequest
	c.TaskID = p.AttrValue("task-id")
	if !ids.Valid(c.TaskID) {
		return c, agentproto.ErrBadRequest("task-id is missing or not a valid identifier")
	}
	rev, err := parseRevision(p.AttrValue("expected-revision"))
	if err != nil {
		return c, err
	}
	c.ExpectedRevision = rev
	for _, ch := range p.Children {
		if !ch.Is(ns.Task, "reason") || c.HasReason {
			return c, agentproto.ErrBadRequest("cancel allows one optional reason element only")
		}
		if len(ch.Children) > 0 {
			return c, agentproto.ErrBadRequest("reason must be text")
		}
		c.HasReason = true
		c.Reason = ch.Text
	}
	if len(c.Reason) > 4096 {
		return c, agentproto.ErrBadRequest("reason is longer than 4096 bytes")
	}
	return c, nil
}

// MaxDelegationDepthValue bounds the depth attribute; gateways bound the
// depth far below it.
const MaxDelegationDepthValue = 1000

func parseDelegationDepth(s string) (int, error) {
	bad := agentproto.ErrBadRequest("delegation depth must be an integer from 1 to 1000")
	if s == "" || len(s) > 4 {
		return 0, bad
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > MaxDelegationDepthValue {
		return 0, bad
	}
	return n, nil
}

func parseRevision(s string) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, agentproto.ErrBadRequest("expected-revision is missing or invalid")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, agentproto.ErrBadRequest("expected-revision is missing or invalid")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, agentproto.ErrBadRequest("expected-revision is missing or invalid")
	}
	return n, nil
}

// parseHashContainer returns the base64 value of the single sha-256 hash in
// a hashContainer element.
func parseHashContainer(c *xmltree.Element) (string, error) {
	if len(c.Children) != 1 || !c.Children[0].Is(ns.Hashes, "hash") {
		return "", agentproto.ErrBadRequest("manifest-hash needs exactly one urn:xmpp:hashes:2 hash")
	}
	h := c.Children[0]
	if len(h.Children) > 0 {
		return "", agentproto.ErrBadRequest("manifest hash must be text")
	}
	if h.AttrValue("algo") != ns.HashAlgo {
		return "", agentproto.ErrBadRequest("only sha-256 manifest hashes are supported")
	}
	v := h.Text
	if len(v) != 44 {
		return "", agentproto.ErrBadRequest("manifest hash is not a base64 sha-256 value")
	}
	return v, nil
}
