package admincmd

import (
	"context"
	"errors"

	"github.com/agentgw/agentgw/xep/dataform"
)

// Outcome is what one admin command did, for callers other than XMPP (the
// web console): OK false with Note a fixed refusal sentence, as the
// command's completed stage would carry.
type Outcome struct {
	OK   bool
	Note string
	Form *dataform.Form // the reads' result table; nil otherwise
}

// ErrUnknownCommand is Exec's error for a name the service does not offer.
var ErrUnknownCommand = errors.New("admincmd: no such command")

// Exec runs the command name (such as "trust-grant" or "ban") for admin
// with the submitted values, exactly as its ad-hoc command does, so the
// console and XMPP clients share one code path. A submission the command
// cannot read returns an error whose text is a fixed sentence; a refusal
// by the stores is an Outcome with OK false. admin must pass IsAdmin.
func (s *Service) Exec(ctx context.Context, admin, name string, v map[string][]string) (Outcome, error) {
	if !s.d.IsAdmin(admin) {
		return Outcome{}, ErrUnknownCommand
	}
	c := s.lookup(NodePrefix + name)
	if c == nil {
		return Outcome{}, ErrUnknownCommand
	}
	res, err := c.run(withAdmin(ctx, admin, "console"), v)
	var bad badInput
	switch {
	case errors.As(err, &bad):
		return Outcome{}, bad
	case err != nil:
		s.d.Log.Info("admin command refused", "command", c.name, "admin", admin, "via", "console", "err", err)
		return Outcome{Note: refusal(err)}, nil
	}
	s.d.Log.Info("admin command", "command", c.name, "admin", admin, "via", "console")
	return Outcome{OK: true, Note: res.note, Form: res.form}, nil
}

// Offered reports whether the command name is offered (its store is
// configured).
func (s *Service) Offered(name string) bool { return s.lookup(NodePrefix+name) != nil }
