package component

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// In a cluster several members hold a session for the same component
// domain, and the server (ejabberd) hands every stanza for the domain,
// the results of a member's own IQs included, to any of them. So that each
// answer still reaches the member waiting for it, a member with a Relay
// tags the id of every IQ it sends with its instance name
// ("<instance>~<random>"); a member that reads an answer for an id tagged
// with another instance forwards it over the Relay to that instance, which
// completes its pending wait. An answer is forwarded at most once (what
// arrives over the Relay is only ever resolved locally), its payload is
// bounded, and an answer nobody waits for is dropped.

// Relay carries IQ answers between the members of a cluster; cluster.Bus
// (store/pg over LISTEN/NOTIFY) implements it. Publish must not block for
// long; Subscribe's fn runs on the relay's delivery goroutine.
type Relay interface {
	Publish(ctx context.Context, channel string, payload []byte) error
	Subscribe(channel string, fn func(payload []byte)) (stop func())
}

// ErrAnswerTooLarge is SendIQ's error when the answer reached another
// member and was too large to forward to this one.
var ErrAnswerTooLarge = errors.New("component: the IQ answer reached another cluster member and is too large to forward")

// idTagSep separates the instance tag from the rest of an IQ id. It is in
// the id alphabet but never in an instance name ([A-Za-z0-9._-]) nor in a
// random id (base64url).
const idTagSep = '~'

// relayChannelPrefix + instance is the Relay channel of one member.
const relayChannelPrefix = "agentgw.iq."

// relayQueue bounds the answers waiting to be forwarded; more are dropped
// (their waiters time out).
const relayQueue = 256

// relayMsg is one forwarded answer. XML is the answer as read; TooLarge
// replaces it when it exceeds the payload bound, so the waiter fails at
// once with ErrAnswerTooLarge instead of timing out.
type relayMsg struct {
	ID       string `json:"id"`
	From     string `json:"from,omitempty"`
	XML      string `json:"xml,omitempty"`
	TooLarge bool   `json:"too_large,omitempty"`
}

type forwardItem struct {
	owner string
	el    *xmltree.Element
}

// tagID makes id carry this member's instance, so that an answer read by
// another member can be forwarded here. Outside a cluster it is id.
func (c *Component) tagID(id string) string {
	if c.cfg.Relay == nil {
		return id
	}
	prefix := c.cfg.Instance + string(idTagSep)
	if strings.HasPrefix(id, prefix) {
		return id
	}
	if id == "" {
		return ids.New(prefix)
	}
	return prefix + id
}

// idOwner is the instance an IQ id is tagged with, "" when untagged.
func idOwner(id string) string {
	i := strings.IndexByte(id, idTagSep)
	if i <= 0 || i > 64 {
		return ""
	}
	owner := id[:i]
	for j := 0; j < len(owner); j++ {
		switch b := owner[j]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-':
		default:
			return ""
		}
	}
	return owner
}

// unmatched handles an IQ answer that no request of this member waits for:
// one tagged with another member's instance is queued for forwarding; any
// other is dropped. It never blocks the reader.
func (c *Component) unmatched(el *xmltree.Element) {
	if c.cfg.Relay == nil {
		c.log.Debug("component: dropped an IQ answer nobody waits for")
		return
	}
	owner := idOwner(el.AttrValue("id"))
	if owner == "" || owner == c.cfg.Instance {
		c.dropAnswer("nobody waits for it")
		return
	}
	select {
	case c.forwardQ <- forwardItem{owner: owner, el: el}:
	default:
		c.dropAnswer("the forwarding queue is full")
	}
}

// forwarder publishes queued answers to their members until ctx ends.
func (c *Component) forwarder(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-c.forwardQ:
			msg := relayMsg{ID: it.el.AttrValue("id"), From: it.el.AttrValue("from"), XML: it.el.String()}
			payload, _ := json.Marshal(msg)
			if len(payload) > c.cfg.RelayMaxBytes {
				msg.XML, msg.TooLarge = "", true
				payload, _ = json.Marshal(msg)
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.cfg.Relay.Publish(pctx, relayChannelPrefix+it.owner, payload)
			cancel()
			if err != nil {
				c.dropAnswer("forwarding it failed")
				continue
			}
			c.forwarded.Add(1)
		}
	}
}

// relayed completes a wait with an answer another member forwarded. What
// arrives here is never forwarded again.
func (c *Component) relayed(payload []byte) {
	if len(payload) > c.cfg.RelayMaxBytes {
		c.dropAnswer("a forwarded answer exceeds the payload bound")
		return
	}
	var msg relayMsg
	if err := json.Unmarshal(payload, &msg); err != nil || idOwner(msg.ID) != c.cfg.Instance {
		c.dropAnswer("a forwarded answer is malformed or not ours")
		return
	}
	from, err := c.parseFrom(msg.From)
	if err != nil {
		c.dropAnswer("a forwarded answer has a malformed 'from'")
		return
	}
	if msg.TooLarge {
		if !c.pending.fail(msg.ID, from, ErrAnswerTooLarge) {
			c.dropAnswer("nobody waits for it (forwarded)")
		}
		return
	}
	el, err := xmltree.Parse([]byte(msg.XML), c.limits)
	if err != nil || el.Name.Local != "iq" || (el.Name.Space != "" && el.Name.Space != NSComponent) ||
		el.AttrValue("id") != msg.ID || el.AttrValue("from") != msg.From {
		c.dropAnswer("a forwarded answer is malformed")
		return
	}
	if t := el.AttrValue("type"); t != "result" && t != "error" {
		c.dropAnswer("a forwarded stanza is not an IQ answer")
		return
	}
	if !c.pending.resolve(msg.ID, from, el) {
		c.dropAnswer("nobody waits for it (forwarded)")
		return
	}
	c.relayedIn.Add(1)
}

// dropLog reports dropped IQ answers: the first at once, then at most one
// line a minute with the count, so a flood cannot flood the log.
type dropLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (c *Component) dropAnswer(why string) {
	c.droppedAnswers.Add(1)
	d := &c.drops
	d.mu.Lock()
	now := time.Now()
	if !d.last.IsZero() && now.Sub(d.last) < time.Minute {
		d.suppressed++
		d.mu.Unlock()
		return
	}
	n := d.suppressed
	d.last, d.suppressed = now, 0
	d.mu.Unlock()
	c.log.Warn("component: dropped an IQ answer", "why", why, "more_dropped_since_last_line", n)
}
