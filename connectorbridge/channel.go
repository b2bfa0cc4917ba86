package connectorbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// openChannel sends channel.open (empty id the first time, the persisted
// one later) and validates the ack (§8.4).
func (c *Client) openChannel(ctx context.Context, s *transport.Session, card *wire.Card, want string) (string, *wire.Descriptor, error) {
	ack, err := s.Request(ctx, wire.TypeChannelOpen, true, want, struct{}{})
	if err != nil {
		return "", nil, fmt.Errorf("channel.open: %w", err)
	}
	var pl struct {
		ConnectorChannelID   string          `json:"connector_channel_id"`
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	if err := json.Unmarshal(ack.Payload, &pl); err != nil {
		return "", nil, errors.New("channel.open.ack: payload is not a valid object")
	}
	if !wire.ValidWireID(ack.ConnectorChannelID) || pl.ConnectorChannelID != ack.ConnectorChannelID {
		return "", nil, errors.New("channel.open.ack: connector_channel_id is missing or differs between envelope and payload")
	}
	desc, dropped, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, ack.ConnectorChannelID)
	if err != nil {
		return "", nil, fmt.Errorf("channel.open.ack: %w", err)
	}
	c.logDropped(dropped)
	return ack.ConnectorChannelID, desc, nil
}

func (c *Client) logDropped(dropped []string) {
	if len(dropped) > 0 {
		c.log.Warn("connection descriptor lists tools absent from the Card (or twice); ignored", "tools", strings.Join(dropped, ","))
	}
}

// bindChannel applies the persistence rules: a new channel is persisted
// only once authenticated (§5.3); the bound channel is updated in place
// when the connector assigned a new id or its auth state changed. wasBound
// tells whether the channel was opened from the stored binding.
func (c *Client) bindChannel(ctx context.Context, card *wire.Card, wasBound bool, want, got string, desc *wire.Descriptor) {
	if wasBound && want != "" && got != want {
		c.log.Info("connector did not recognise the bound channel and assigned a new one; updating the binding")
	}
	auth := desc.Authenticated()
	if !auth && !wasBound {
		c.log.Info("connector channel is not authenticated; tools stay hidden until `agentgw connector auth` succeeds")
		return
	}
	c.mu.Lock()
	bound := c.bind
	c.mu.Unlock()
	if bound.ChannelID == got && bound.Authenticated == auth {
		return
	}
	g, err := c.st.setChannel(ctx, card.ConnectorCardID, got, auth)
	if err != nil {
		c.log.Error("cannot store the channel binding", "error", err)
		return
	}
	c.mu.Lock()
	c.bind.ChannelID, c.bind.Authenticated = got, auth
	if c.st != nil {
		c.bind.Generation = g
	}
	c.mu.Unlock()
	if auth {
		c.log.Info("connector channel bound", "connector_channel_id", got, "status", desc.Connection.Status)
	} else if bound.Authenticated {
		c.log.Warn("connector channel is no longer authenticated; its tools are withdrawn", "status", desc.Connection.Status)
	}
}

// onDescriptorPush validates a pushed descriptor and ignores any identity
// mismatch (§8.17).
func (c *Client) onDescriptorPush(s *transport.Session, p *wire.Packet) {
	c.mu.Lock()
	ok := c.sess == s && p.ConnectorChannelID == c.chanID && c.card != nil
	card := c.card
	c.mu.Unlock()
	if !ok {
		c.log.Debug("connection.descriptor.push for a channel not open here ignored")
		return
	}
	var pl struct {
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	json.Unmarshal(p.Payload, &pl)
	desc, dropped, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, p.ConnectorChannelID)
	if err != nil {
		c.log.Warn("ignoring an invalid connection.descriptor.push", "reason", err.Error())
		return
	}
	c.logDropped(dropped)
	c.applyDescriptor(s, p.ConnectorChannelID, desc)
}

// applyDescriptor installs a fresh descriptor for the open channel and
// persists an auth-state change off the read loop.
func (c *Client) applyDescriptor(s *transport.Session, chID string, desc *wire.Descriptor) {
	c.mu.Lock()
	if c.sess != s || c.chanID != chID {
		c.mu.Unlock()
		return
	}
	c.desc, c.projDesc = desc, desc
	card := c.card
	wasBound := c.bind.ChannelID == chID
	c.notifyLocked()
	c.mu.Unlock()
	// Off the read loop: both may wait on the network.
	go func() {
		c.bindChannel(context.Background(), card, wasBound, chID, chID, desc)
		if !desc.Authenticated() {
			ctx, cancel := context.WithTimeout(context.Background(), c.o.RequestTimeout)
			defer cancel()
			c.releaseSignedOut(ctx, s, chID)
		}
	}()
}

// refreshDescriptor asks for the open channel's descriptor (§8.15).
func (c *Client) refreshDescriptor(ctx context.Context) {
	c.mu.Lock()
	s, chID, card := c.sess, c.chanID, c.card
	c.mu.Unlock()
	if s == nil || chID == "" || card == nil {
		return
	}
	desc, err := c.getDescriptor(ctx, s, card, chID)
	if err != nil {
		c.log.Warn("connection.descriptor.get failed", "error", err)
		return
	}
	c.applyDescriptor(s, chID, desc)
}

func (c *Client) getDescriptor(ctx context.Context, s *transport.Session, card *wire.Card, chID string) (*wire.Descriptor, error) {
	ack, err := s.Request(ctx, wire.TypeDescriptorGet, true, chID, struct{}{})
	if err != nil {
		return nil, err
	}
	var pl struct {
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	if json.Unmarshal(ack.Payload, &pl) != nil {
		return nil, errors.New("connection.descriptor.get.ack: payload is not a valid object")
	}
	desc, dropped, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, chID)
	if err != nil {
		return nil, fmt.Errorf("connection.descriptor.get.ack: %w", err)
	}
	c.logDropped(dropped)
	return desc, nil
}

// closeChannel sends channel.close; it keeps the binding (§8.5).
func (c *Client) closeChannel(ctx context.Context, s *transport.Session, chID string) {
	if _, err := s.Request(ctx, wire.TypeChannelClose, true, chID, struct{}{}); err != nil {
		c.log.Debug("channel.close not acknowledged", "error", err)
	}
}

// switchChannel moves the live session to the bound channel, closing the
// temporary or stale one.
func (c *Client) switchChannel(ctx context.Context, b binding) {
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	c.mu.Lock()
	s, cur, card := c.sess, c.chanID, c.card
	c.mu.Unlock()
	if s == nil || card == nil || b.ChannelID == "" {
		return
	}
	if b.ChannelID == cur {
		c.refreshDescriptor(ctx)
		c.releaseLocked(ctx, s, cur)
		return
	}
	chID, desc, err := c.openChannel(ctx, s, card, b.ChannelID)
	if err != nil {
		c.log.Warn("reopening the bound channel failed", "error", err)
		return
	}
	c.mu.Lock()
	if c.sess == s {
		c.chanID, c.desc, c.projDesc = chID, desc, desc
		c.notifyLocked()
	}
	c.mu.Unlock()
	if cur != "" && cur != chID {
		c.closeChannel(ctx, s, cur)
	}
	c.bindChannel(ctx, card, true, b.ChannelID, chID, desc)
	c.releaseLocked(ctx, s, chID)
}

// releaseSignedOut removes the gateway's route to a channel that is not
// signed in: the gateway cannot use it, and only `agentgw connector auth`
// (which changes the stored binding and so makes the gateway reopen it)
// can sign it in. The binding is kept (§8.13, architecture §5.7). A
// connector without auth flows keeps its route, since its channel can only
// become ready on its own.
func (c *Client) releaseSignedOut(ctx context.Context, s *transport.Session, chID string) {
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	c.releaseLocked(ctx, s, chID)
}

// releaseLocked is releaseSignedOut with chanMu held.
func (c *Client) releaseLocked(ctx context.Context, s *transport.Session, chID string) {
	if !c.supervised || chID == "" {
		return
	}
	c.mu.Lock()
	out := c.sess == s && c.chanID == chID && !c.desc.Authenticated() && c.card != nil && len(c.card.AuthFlows) > 0
	if out {
		c.chanID, c.desc = "", nil
		c.notifyLocked()
	}
	c.mu.Unlock()
	if out {
		c.closeChannel(ctx, s, chID)
		c.log.Info("connector channel not signed in; route closed until `agentgw connector auth` binds it (binding kept)")
	}
}
