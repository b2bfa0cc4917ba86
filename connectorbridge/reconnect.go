package connectorbridge

import (
	"context"
	"errors"
	"time"

	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
	"github.com/agentgw/agentgw/internal/backoff"
)

// connect dials, says hello with the last connector_id and opens the
// agent's channel, then publishes the new session, replacing the old
// runtime instance atomically.
func (c *Client) connect(ctx context.Context) (*transport.Session, error) {
	c.mu.Lock()
	card := c.card
	prev := c.lastConnectorID
	c.mu.Unlock()
	if card == nil {
		return nil, errors.New("no Connector Card yet")
	}
	s, err := c.dataPlane().Dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Hello(ctx, card, prev, c.o.SupportedProfiles); err != nil {
		s.Close("hello failed")
		return nil, err
	}
	if prev != "" && s.ConnectorID() != prev {
		c.log.Info("connector issued a new connector_id; replacing the runtime instance (the previous one expired or was rebuilt)",
			"connector_id", s.ConnectorID())
	}
	if err := c.st.setConnectorID(ctx, card.ConnectorCardID, s.ConnectorID()); err != nil {
		c.log.Warn("cannot store the connector_id", "error", err)
	}
	c.chanMu.Lock()
	defer c.chanMu.Unlock()
	c.mu.Lock()
	want := c.bind.ChannelID
	c.mu.Unlock()
	chID, desc, err := c.openChannel(ctx, s, card, want)
	if err != nil {
		s.Close("channel.open failed")
		return nil, err
	}
	// Persist first, so that whoever sees the new session sees the
	// binding it implies.
	c.bindChannel(ctx, card, want != "", want, chID, desc)
	c.mu.Lock()
	old := c.sess
	c.sess = s
	c.lastConnectorID = s.ConnectorID()
	c.chanID, c.desc, c.projDesc = chID, desc, desc
	c.everOpened = true
	c.dataErr = ""
	c.notifyLocked()
	c.mu.Unlock()
	if old != nil && old != s {
		old.Close("replaced by a new runtime instance")
	}
	return s, nil
}

// detach forgets a session that ended.
func (c *Client) detach(s *transport.Session) {
	c.mu.Lock()
	if c.sess == s {
		c.sess = nil
		c.chanID = ""
		c.desc = nil
		c.dataErr = s.Reason()
		c.notifyLocked()
	}
	c.mu.Unlock()
}

// reconnectBackoff is the data plane's reconnect delay: backendkit's one
// policy, with full jitter so that many gateways do not reconnect in step.
// Its loop waits on connector health between attempts, so it uses the
// policy directly rather than backendkit.Supervisor.Run.
func (c *Client) reconnectBackoff() *backoff.Backoff {
	return backendkit.Supervisor{Min: c.o.ReconnectMin, Max: c.o.ReconnectMax}.Backoff()
}

func (c *Client) canDial() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.card != nil && c.fatal == nil && c.health.usable()
}

func (c *Client) runDataPlane(ctx context.Context) {
	fails := 0
	bo := c.reconnectBackoff()
	for ctx.Err() == nil {
		if !c.canDial() {
			select {
			case <-c.kick:
			case <-ctx.Done():
				return
			}
			continue
		}
		s, err := c.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			c.mu.Lock()
			c.dataErr = err.Error()
			c.mu.Unlock()
			c.log.Warn("connector data plane connect failed", "error", err, "attempt", fails)
			if transport.IsAuthFailure(err) {
				c.setHealth(HealthUnauthorized, err.Error())
			}
			if fails >= c.o.MaxReconnectFailures {
				c.log.Warn("connector data plane: pausing reconnection until the next successful health probe", "failures", fails)
				select {
				case <-c.kick: // drain a stale kick
				default:
				}
				select {
				case <-c.kick:
				case <-ctx.Done():
					return
				}
				fails = 0
				bo.Reset()
				continue
			}
			if !c.sleep(ctx, bo.Next()) {
				return
			}
			continue
		}
		fails = 0
		bo.Reset()
		c.log.Info("connector data plane up", "connector_id", s.ConnectorID(), "connector_channel_id", c.ChannelID())
		c.releaseSignedOut(ctx, s, c.ChannelID())
		pingDone := make(chan struct{})
		go func() { defer close(pingDone); c.pingLoop(ctx, s) }()
		select {
		case <-s.Done():
		case <-ctx.Done():
			c.shutdown(s)
			<-pingDone
			return
		}
		<-pingDone
		c.detach(s)
		c.log.Warn("connector data plane lost; reconnecting", "reason", s.Reason())
		if !c.sleep(ctx, bo.Next()) {
			return
		}
	}
}

// shutdown closes the channel route and the data plane.
func (c *Client) shutdown(s *transport.Session) {
	c.mu.Lock()
	chID := c.chanID
	c.mu.Unlock()
	if chID != "" && s.Alive() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.closeChannel(ctx, s, chID)
		cancel()
	}
	s.Close("gateway shutting down")
	c.detach(s)
}

func (c *Client) pingLoop(ctx context.Context, s *transport.Session) {
	for {
		ch := make(chan struct{})
		t := c.clock.AfterFunc(c.o.PingInterval, func() { close(ch) })
		select {
		case <-ch:
		case <-s.Done():
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		if _, err := s.Request(ctx, wire.TypePing, false, "", nil); err != nil {
			var re *transport.RemoteError
			if errors.As(err, &re) || !s.Alive() || ctx.Err() != nil {
				continue
			}
			c.log.Warn("connector did not answer ping; closing the data plane", "error", err)
			s.Close("ping timeout")
			return
		}
	}
}
