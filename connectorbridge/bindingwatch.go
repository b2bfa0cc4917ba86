package connectorbridge

import "context"

// runBindingWatch notices bindings written by `agentgw connector auth` (or
// logout) in another process and reopens the channel.
func (c *Client) runBindingWatch(ctx context.Context) {
	for {
		if !c.sleep(ctx, c.o.BindingPollInterval) {
			return
		}
		c.mu.Lock()
		cardID, known := c.claimed, c.bind.Generation
		c.mu.Unlock()
		if cardID == "" || c.st == nil {
			continue
		}
		g, err := c.st.generation(ctx, cardID)
		if err != nil || g == known {
			continue
		}
		b, err := c.st.load(ctx, cardID)
		if err != nil {
			continue
		}
		c.mu.Lock()
		c.bind = b
		c.mu.Unlock()
		c.log.Info("connector channel binding changed in the store; reopening the channel")
		c.switchChannel(ctx, b)
	}
}
