package connectorbridge

import (
	"context"
	"strings"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// HealthState is the connector's system-level state as the gateway sees it.
type HealthState string

// Health states (§4.3). unauthorized is a 401/403 from /health or /ws;
// incompatible is a protocol version outside the admission window or a
// card id mismatch, which cannot stay online.
const (
	HealthUnknown      HealthState = "unknown"
	HealthOK           HealthState = "ok"
	HealthDegraded     HealthState = "degraded"
	HealthOffline      HealthState = "offline"
	HealthUnauthorized HealthState = "unauthorized"
	HealthIncompatible HealthState = "incompatible"
)

// usable reports whether the data plane may be used in this state.
func (h HealthState) usable() bool {
	return h == HealthOK || h == HealthDegraded || h == HealthUnknown
}

// setHealth records a health state and logs transitions only.
func (c *Client) setHealth(h HealthState, reason string) {
	c.mu.Lock()
	old := c.health
	c.health = h
	c.healthErr = reason
	cardID := c.claimed
	if old != h {
		c.notifyLocked()
	}
	sess := c.sess
	c.mu.Unlock()
	if old == h {
		return
	}
	switch h {
	case HealthOK:
		c.log.Info("connector health ok", "was", string(old))
	case HealthDegraded:
		c.log.Warn("connector health degraded", "reason", reason)
	case HealthOffline:
		c.log.Warn("connector offline", "reason", reason)
	case HealthUnauthorized:
		c.log.Error("connector rejected the system API key (authentication failure)", "reason", reason)
	case HealthIncompatible:
		c.log.Error("connector is incompatible and kept offline", "reason", reason)
	}
	if cardID != "" {
		if err := c.st.setHealth(context.Background(), cardID, string(h), reason); err != nil {
			c.log.Warn("cannot store the health state", "error", err)
		}
	}
	if (h == HealthIncompatible || h == HealthUnauthorized) && sess != nil {
		sess.Close("connector " + string(h))
	}
}

// checkHealth performs one probe and applies §4.3: 2xx ok, 401/403 an
// authentication failure, anything else one failure (1-2 degraded, 3+
// offline); version, protocol or build changes refetch Card and Skill.
func (c *Client) checkHealth(ctx context.Context) {
	h, err := c.control().ProbeHealth(ctx)
	if err != nil {
		if transport.IsAuthFailure(err) {
			c.setHealth(HealthUnauthorized, err.Error())
			return
		}
		c.mu.Lock()
		c.healthFails++
		n := c.healthFails
		c.mu.Unlock()
		if n >= 3 {
			c.setHealth(HealthOffline, err.Error())
		} else {
			c.setHealth(HealthDegraded, err.Error())
		}
		return
	}
	c.mu.Lock()
	c.healthFails = 0
	card := c.card
	c.mu.Unlock()
	if card == nil {
		if err := c.discover(ctx); err != nil {
			c.setHealth(HealthDegraded, "Card unavailable: "+err.Error())
			return
		}
		card = c.Card()
	}
	if h.ConnectorCardID != "" && h.ConnectorCardID != card.ConnectorCardID {
		c.setHealth(HealthIncompatible, "/health reports a different connector_card_id")
		return
	}
	if h.ProtocolVersion != "" {
		if err := wire.CheckProtocol("/health", h.ProtocolVersion); err != nil {
			c.setHealth(HealthIncompatible, err.Error())
			return
		}
	}
	if healthDiffers(h, card) {
		c.log.Info("connector version, protocol or build changed; refetching the Card and Skill")
		if err := c.discover(ctx); err != nil {
			c.setHealth(HealthDegraded, "Card refetch failed: "+err.Error())
			return
		}
		card = c.Card()
		if h.ProtocolVersion != "" && !sameProtocol(h.ProtocolVersion, card.ProtocolVersion) {
			c.setHealth(HealthIncompatible, "/health protocol_version does not match the Connector Card")
			return
		}
		if healthDiffers(h, card) {
			c.log.Warn("connector /health still disagrees with its Card after a refetch")
		}
		c.refreshDescriptor(ctx)
	}
	c.mu.Lock()
	was := c.health
	c.mu.Unlock()
	if was == HealthIncompatible {
		// The Card and /health agree again (for example after an upgrade).
		c.log.Info("connector compatible again")
	}
	c.setHealth(HealthOK, "")
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func sameProtocol(a, b string) bool {
	x, err1 := wire.ParseProtocol(a)
	y, err2 := wire.ParseProtocol(b)
	return err1 == nil && err2 == nil && x == y
}

func healthDiffers(h *transport.HealthReply, card *wire.Card) bool {
	if h.ConnectorCardVersion != "" && h.ConnectorCardVersion != card.Connector.Version {
		return true
	}
	if h.ProtocolVersion != "" && !sameProtocol(h.ProtocolVersion, card.ProtocolVersion) {
		return true
	}
	return h.Build != nil && !h.Build.Equal(card.Build)
}

func (c *Client) runHealth(ctx context.Context) {
	for {
		if !c.sleep(ctx, c.o.HealthInterval) {
			return
		}
		c.checkHealth(ctx)
	}
}

var _ backendkit.Describer = (*Backend)(nil)

// BridgeDetails tells the console the agent's channel: its id, the health
// state, the connector's card (name, version, card id) and the channel's
// target as the connector names it. Nothing from the configuration (the
// base URL, the API key) is shown.
func (b *Backend) BridgeDetails() []backendkit.BridgeDetail {
	c := b.c
	d := backendkit.BridgeDetail{Kind: "xagent channel", Name: c.ChannelID(), State: string(c.HealthState())}
	if d.Name == "" {
		d.Name = "(no channel open)"
	}
	var parts []string
	if card := c.Card(); card != nil {
		parts = append(parts, "connector "+card.Connector.Name+" "+card.Connector.Version, "card "+card.ConnectorCardID)
	}
	if desc := c.Descriptor(); desc != nil {
		t := desc.Target.DisplayName
		if t == "" {
			t = desc.Target.Label
		}
		parts = append(parts, strings.TrimSpace("target "+desc.Target.Provider+" "+t))
	}
	if id := c.ConnectorID(); id != "" {
		parts = append(parts, "connector instance "+id)
	}
	d.Detail = strings.Join(parts, ", ")
	return []backendkit.BridgeDetail{d}
}
