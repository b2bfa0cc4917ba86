package connectorbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/agentgw/agentgw/connectorbridge/transport"
	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// authAck is the payload of auth.start.ack and auth.status.ack (§8.8).
type authAck struct {
	ConnectorChannelID   string          `json:"connector_channel_id"`
	FlowID               string          `json:"flow_id"`
	AuthSessionID        string          `json:"auth_session_id"`
	Status               string          `json:"status"`
	QRCodeText           string          `json:"qr_code_text"`
	QRCodeImage          string          `json:"qr_code_image"`
	ExpiresAt            int64           `json:"expires_at"`
	PollIntervalMillis   int64           `json:"poll_interval_millis"`
	Message              string          `json:"message"`
	ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
}

// Flows returns the Card's authentication flows (after Open).
func (c *Client) Flows() []wire.AuthFlow {
	card := c.Card()
	if card == nil {
		return nil
	}
	return append([]wire.AuthFlow(nil), card.AuthFlows...)
}

// pickFlow resolves flowID; "" is allowed when the Card has one flow.
func pickFlow(card *wire.Card, flowID string) (*wire.AuthFlow, error) {
	if flowID == "" {
		if len(card.AuthFlows) == 1 {
			return &card.AuthFlows[0], nil
		}
		ids := make([]string, len(card.AuthFlows))
		for i, f := range card.AuthFlows {
			ids[i] = f.ID
		}
		if len(ids) == 0 {
			return nil, errors.New("the connector declares no authentication flow")
		}
		return nil, fmt.Errorf("choose a flow with --flow: %s", strings.Join(ids, ", "))
	}
	f, ok := card.Flow(flowID)
	if !ok {
		return nil, errors.New("the connector declares no authentication flow with that id")
	}
	return f, nil
}

// checkFields validates form input against the flow. Errors name fields,
// never values.
func checkFields(f *wire.AuthFlow, fields map[string]string) error {
	if f.Type != "form" {
		if len(fields) > 0 {
			return fmt.Errorf("flow %s (%s) takes no fields", f.ID, f.Type)
		}
		return nil
	}
	known := map[string]bool{}
	for _, fl := range f.Fields {
		known[fl.Name] = true
		if fl.Required && fields[fl.Name] == "" {
			return fmt.Errorf("flow %s needs field %s (%s)", f.ID, fl.Name, safeLabel(fl.Label))
		}
	}
	var unknown []string
	for k := range fields {
		if !known[k] {
			if wire.ValidCode(k) {
				unknown = append(unknown, k)
			} else {
				unknown = append(unknown, "(malformed name)")
			}
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("flow %s has no field named %s", f.ID, strings.Join(unknown, ", "))
	}
	return nil
}

// Auth runs one authentication flow on the agent's channel and, on
// success, persists the binding so that the running gateway picks it up.
// Form input goes only into auth.start; sensitive values are never
// printed or logged. A qr_login flow prints qr_code_text (and, through
// Options.ShowQR, a terminal QR code), polls auth.status at poll_interval_millis and refreshes the
// code on qr_refresh_required. Cancelling ctx sends auth.cancel.
func (c *Client) Auth(ctx context.Context, flowID string, fields map[string]string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	s, chID, card, _ := c.live()
	if s == nil {
		if err := c.Open(ctx); err != nil {
			return err
		}
		s, chID, card, _ = c.live()
	}
	if s == nil || chID == "" {
		return errors.New("no open connector channel")
	}
	flow, err := pickFlow(card, flowID)
	if err != nil {
		return err
	}
	if err := checkFields(flow, fields); err != nil {
		return err
	}
	for _, fl := range flow.Fields {
		if fl.Sensitive() {
			c.red.Add(fields[fl.Name])
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.AuthTimeout)
	defer cancel()

	start := map[string]any{"flow_id": flow.ID}
	if flow.Type == "form" {
		start["input"] = fields
	}
	fmt.Fprintf(out, "Starting %s flow %q: %s\n", flow.Type, flow.ID, displayText(c.red, flow.Title, 200))
	ack, err := s.Request(ctx, wire.TypeAuthStart, true, chID, start)
	if err != nil {
		return fmt.Errorf("auth.start: %w", err)
	}
	st, err := c.parseAuthAck(ack, chID)
	if err != nil {
		return err
	}
	sessionID := st.AuthSessionID
	lastQR := ""
	for {
		if st.AuthSessionID != "" {
			sessionID = st.AuthSessionID
		}
		if st.Message != "" {
			fmt.Fprintf(out, "Status: %s — %s\n", st.Status, displayText(c.red, st.Message, 300))
		} else {
			fmt.Fprintf(out, "Status: %s\n", st.Status)
		}
		if st.QRCodeText != "" && st.QRCodeText != lastQR {
			lastQR = st.QRCodeText
			text := displayText(c.red, st.QRCodeText, 2048)
			fmt.Fprintf(out, "Scan this QR code with the target app (raw text: %s)\n", text)
			if c.o.ShowQR != nil {
				c.o.ShowQR(out, text)
			}
		}
		if st.QRCodeImage != "" && (strings.HasPrefix(st.QRCodeImage, "https://") || strings.HasPrefix(st.QRCodeImage, "http://")) {
			fmt.Fprintf(out, "QR image: %s\n", displayText(c.red, st.QRCodeImage, 2048))
		}
		refresh := false
		switch st.Status {
		case "authenticated":
			return c.finishAuth(ctx, s, card, chID, st, out)
		case "failed", "expired", "unauthenticated":
			return fmt.Errorf("authentication %s", st.Status)
		case "qr_refresh_required":
			refresh = true
		default: // pending, scanned
			if !c.sleep(ctx, pollInterval(st.PollIntervalMillis)) {
				c.cancelAuth(s, chID, sessionID, out)
				return fmt.Errorf("authentication interrupted: %w", context.Cause(ctx))
			}
		}
		if sessionID == "" {
			return errors.New("connector returned no auth_session_id to poll")
		}
		ack, err = s.Request(ctx, wire.TypeAuthStatus, true, chID, map[string]any{
			"flow_id": flow.ID, "auth_session_id": sessionID, "refresh": refresh,
		})
		if err != nil {
			if ctx.Err() != nil {
				c.cancelAuth(s, chID, sessionID, out)
			}
			return fmt.Errorf("auth.status: %w", err)
		}
		if st, err = c.parseAuthAck(ack, chID); err != nil {
			return err
		}
	}
}

// pollInterval bounds the connector's suggestion to [250ms, 10s].
func pollInterval(ms int64) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms <= 0:
		return 2 * time.Second
	case d < 250*time.Millisecond:
		return 250 * time.Millisecond
	case d > 10*time.Second:
		return 10 * time.Second
	}
	return d
}

func (c *Client) parseAuthAck(ack *wire.Packet, chID string) (*authAck, error) {
	var a authAck
	if err := json.Unmarshal(ack.Payload, &a); err != nil {
		return nil, fmt.Errorf("%s: payload is not a valid object", ack.Type)
	}
	if a.ConnectorChannelID != "" && a.ConnectorChannelID != chID {
		return nil, fmt.Errorf("%s: connector_channel_id does not match the channel", ack.Type)
	}
	if !wire.KnownAuthStatus(a.Status) {
		return nil, fmt.Errorf("%s: status is not a supported value", ack.Type)
	}
	if a.AuthSessionID != "" && !wire.ValidWireID(a.AuthSessionID) {
		return nil, fmt.Errorf("%s: auth_session_id is malformed", ack.Type)
	}
	return &a, nil
}

// finishAuth validates the authenticated descriptor (from the ack or a
// descriptor.get) and persists the binding.
func (c *Client) finishAuth(ctx context.Context, s *transport.Session, card *wire.Card, chID string, st *authAck, out io.Writer) error {
	var desc *wire.Descriptor
	var err error
	if len(st.ConnectionDescriptor) > 0 && string(st.ConnectionDescriptor) != "null" {
		var dropped []string
		desc, dropped, err = wire.ParseDescriptor(st.ConnectionDescriptor, card, chID)
		c.logDropped(dropped)
	} else {
		desc, err = c.getDescriptor(ctx, s, card, chID)
	}
	if err != nil {
		return fmt.Errorf("authenticated, but the descriptor is unusable: %w", err)
	}
	if !desc.Authenticated() {
		return fmt.Errorf("authenticated, but the descriptor reports status %s", desc.Connection.Status)
	}
	c.mu.Lock()
	if c.sess == s && c.chanID == chID {
		c.desc, c.projDesc = desc, desc
		c.notifyLocked()
	}
	c.mu.Unlock()
	c.bindChannel(ctx, card, true, chID, chID, desc)
	var tools []string
	avail := desc.AvailableTools()
	for _, t := range card.Tools {
		if avail[t.ToolID] {
			tools = append(tools, t.ToolID)
		}
	}
	who := displayText(c.red, desc.Target.DisplayName, 120)
	if who == "" {
		who = displayText(c.red, desc.Target.Provider, 60)
	}
	fmt.Fprintf(out, "Authenticated as %s; channel %s bound (%s). Tools available: %s\n",
		who, chID, desc.Connection.Status, strings.Join(tools, ", "))
	return nil
}

// cancelAuth sends auth.cancel for an unfinished session (§8.11).
func (c *Client) cancelAuth(s *transport.Session, chID, sessionID string, out io.Writer) {
	if sessionID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ack, err := s.Request(ctx, wire.TypeAuthCancel, true, chID, map[string]any{"auth_session_id": sessionID})
	if err != nil {
		fmt.Fprintln(out, "auth.cancel was not acknowledged")
		return
	}
	var a struct {
		Status string `json:"status"`
	}
	json.Unmarshal(ack.Payload, &a)
	fmt.Fprintf(out, "Authentication cancelled (%s)\n", wire.SafeCode(a.Status))
}

// CancelAuth cancels an unfinished authentication session by id.
func (c *Client) CancelAuth(ctx context.Context, authSessionID string) error {
	s, chID, _, _ := c.live()
	if s == nil {
		return errors.New("no open connector channel")
	}
	_, err := s.Request(ctx, wire.TypeAuthCancel, true, chID, map[string]any{"auth_session_id": authSessionID})
	return err
}

// Logout signs the bound channel out of the target system (auth.logout).
// The binding is kept and marked unauthenticated; the running gateway
// withdraws the tools.
func (c *Client) Logout(ctx context.Context, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	s, chID, card, _ := c.live()
	if s == nil {
		if err := c.Open(ctx); err != nil {
			return err
		}
		s, chID, card, _ = c.live()
	}
	c.mu.Lock()
	bound := c.bind.ChannelID
	c.mu.Unlock()
	if s == nil || chID == "" || bound == "" || bound != chID {
		return errors.New("the agent has no bound connector channel to sign out")
	}
	ack, err := s.Request(ctx, wire.TypeAuthLogout, true, chID, struct{}{})
	if err != nil {
		return fmt.Errorf("auth.logout: %w", err)
	}
	var pl struct {
		Status               string          `json:"status"`
		ConnectionDescriptor json.RawMessage `json:"connection_descriptor"`
	}
	if json.Unmarshal(ack.Payload, &pl) != nil {
		return errors.New("auth.logout.ack: payload is not a valid object")
	}
	// The binding is marked unauthenticated whatever the descriptor says;
	// the running gateway reads the channel's state itself.
	if len(pl.ConnectionDescriptor) > 0 && string(pl.ConnectionDescriptor) != "null" && string(pl.ConnectionDescriptor) != "{}" {
		if _, _, err := wire.ParseDescriptor(pl.ConnectionDescriptor, card, chID); err != nil {
			c.log.Warn("auth.logout.ack descriptor is invalid", "reason", err.Error())
		}
	}
	if _, err := c.st.setChannel(ctx, card.ConnectorCardID, chID, false); err != nil {
		return err
	}
	c.mu.Lock()
	c.bind.Authenticated = false
	c.mu.Unlock()
	fmt.Fprintf(out, "Signed out; channel %s kept, now unauthenticated (%s)\n", chID, wire.SafeCode(pl.Status))
	return nil
}
