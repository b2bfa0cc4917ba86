package endpointhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// retryRegistration is how long the host waits before trying a failed
// self-registration again (a new login or a new manifest try at once).
const retryRegistration = 15 * time.Second

// registrationLoop keeps the gateway's registration current: after every
// login and every manifest change it registers the active version and
// activates it there. Both operations are idempotent at the gateway, so
// repeating them after a reconnect is harmless.
func (h *Host) registrationLoop(ctx context.Context) {
	if h.gateway.Domainpart() == "" {
		return
	}
	var (
		doneFor  *xmppclient.Client // the session the last success was on
		doneHash string
	)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.sync:
		case <-retry.C:
		}
		m, ok := h.Registry.Active(h.account.String())
		c := h.sender.cur.Load()
		if !ok || c == nil || (c == doneFor && m.Hash == doneHash) {
			continue
		}
		err := h.selfRegister(ctx, m)
		if err == nil {
			doneFor, doneHash = c, m.Hash
			h.log.Info("host: registered at the gateway", "gateway", h.gateway.String(), "version", m.Version, "hash", m.Hash)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		var se *agentproto.StanzaError
		if errors.As(err, &se) && se.Condition == agentproto.CondForbidden {
			// A refusal is policy: asking again every few seconds changes
			// nothing; the next login or manifest change tries again.
			h.log.Error("host: the gateway refused the self-registration; is this account's domain in the gateway's [xmpp] self_register_domains, and is the endpoint banned? (tried again at the next login or manifest change)",
				"gateway", h.gateway.String(), "err", err)
			continue
		}
		h.log.Warn("host: self-registration at the gateway failed; retrying", "gateway", h.gateway.String(), "err", err, "retry_in", retryRegistration)
		retry.Reset(retryRegistration)
	}
}

// selfRegister registers m at the gateway and activates it.
func (h *Host) selfRegister(ctx context.Context, m *directory.Manifest) error {
	reg := xmltree.New(ns.API, "register").Add(
		xmltree.New(ns.API, "manifest", "media-type", ns.MediaJSON).WithText(string(m.Canonical)))
	res, err := h.gatewayIQ(ctx, reg)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	got := res.Child(ns.API, "registered")
	if got == nil || got.AttrValue("version") != m.Version || hashOf(got) != m.Hash {
		return errors.New("register: the gateway's answer does not confirm this version and hash")
	}
	act := xmltree.New(ns.API, "activate", "jid", m.Endpoint, "version", m.Version).Add(
		xmltree.New(ns.Hashes, "hash", "algo", ns.HashAlgo).WithText(m.Hash))
	if res, err = h.gatewayIQ(ctx, act); err != nil {
		return fmt.Errorf("activate: %w", err)
	}
	if res.Child(ns.API, "active") == nil {
		return errors.New("activate: the gateway's answer is not <active/>")
	}
	return nil
}

func (h *Host) gatewayIQ(ctx context.Context, payload *xmltree.Element) (*xmltree.Element, error) {
	iq := xmltree.New(xmppclient.NS, "iq", "type", "set", "to", h.gateway.String()).Add(payload)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return h.sender.SendIQ(ctx, iq)
}

func hashOf(el *xmltree.Element) string {
	if hs := el.ChildrenNamed(ns.Hashes, "hash"); len(hs) == 1 {
		return hs[0].Text
	}
	return ""
}
