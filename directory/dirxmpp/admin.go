package dirxmpp

import (
	"context"
	"errors"
	"strconv"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/internal/ijson"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// adminOps are the Administrative Provisioning IQ children.
var adminOps = []string{"register", "activate", "deactivate", "registration-status", "remove-version", "remove-endpoint"}

// maxJIDBytes bounds a jid attribute (RFC 7622: three parts of 1023 bytes).
const maxJIDBytes = 3071

type admin struct{ s *service }

// handle serves the admin IQs. Only local administrators may use them.
// Everyone else gets forbidden before anything about the named endpoint is
// looked at: the operation is gateway-wide, so the refusal discloses
// nothing about any endpoint. With Self Registration (Deps.SelfRegister) a
// non-admin account of an allowed local domain may register, activate,
// deactivate and inspect its own bare JID; everything else a non-admin
// sends is forbidden as before.
//
// Directory errors map to the spec's table: malformed JSON is bad-request,
// failed validation not-acceptable, a size or complexity limit
// resource-constraint, different content or a wrong hash conflict, and an
// unknown endpoint or version item-not-found; an agent.jid outside the
// component domain is forbidden (registration for another JID). Removing an active or
// still-referenced version is conflict (the state conflicts with the
// request). Error texts are fixed sentences; the manifest is never
// reflected.
func (a *admin) handle(ctx context.Context, iq component.IQ) (*xmltree.Element, error) {
	if !a.s.Policy.IsAdmin(requester(iq)) {
		if sr := a.s.SelfRegister; sr != nil {
			// Self Registration: an account acting on its own JID.
			return sr.handle(ctx, a, iq)
		}
		return nil, agentproto.ErrForbidden("Administrative provisioning requires an administrator.")
	}
	if a.s.Admin == nil {
		return nil, agentproto.ErrServiceUnavailable()
	}
	if iq.Payload.Name.Local == "register" {
		return a.register(ctx, iq.Payload, a.s.Admin.Register)
	}
	return a.serve(ctx, iq.Payload, a.s.Admin)
}

// serve runs one operation other than register through adm, once the
// requester is authorized for it.
func (a *admin) serve(ctx context.Context, p *xmltree.Element, adm directory.Admin) (*xmltree.Element, error) {
	op := p.Name.Local
	// Per the XML Schema only activate carries a child (its hash); the
	// other operations are attributes only.
	if op != "activate" && len(p.Children) > 0 {
		return nil, agentproto.ErrBadRequest("This operation takes no child elements.")
	}
	if op == "activate" && len(p.Children) != 1 {
		return nil, agentproto.ErrBadRequest("Exactly one urn:xmpp:hashes:2 hash is required.")
	}
	ep, err := endpointAttr(p)
	if err != nil {
		return nil, err
	}
	switch op {
	case "activate":
		version, err := versionAttr(p)
		if err != nil {
			return nil, err
		}
		hash, err := parseHash(p)
		if err != nil {
			return nil, err
		}
		if err := adm.Activate(ctx, ep, version, hash); err != nil {
			return nil, a.mapErr(op, err)
		}
		return xmltree.New(ns.API, "active", "jid", ep, "version", version), nil
	case "deactivate":
		if err := adm.Deactivate(ctx, ep); err != nil {
			return nil, a.mapErr(op, err)
		}
		return xmltree.New(ns.API, "deactivated", "jid", ep), nil
	case "registration-status":
		st, err := adm.Status(ctx, ep)
		if err != nil {
			return nil, a.mapErr(op, err)
		}
		reg := xmltree.New(ns.API, "registration", "jid", ep)
		for _, v := range st.Versions {
			reg.Add(xmltree.New(ns.API, "version",
				"id", v.Version,
				"active", strconv.FormatBool(v.Active),
				"removable", strconv.FormatBool(v.Removable),
			).Add(hashElement(v.Hash)))
		}
		return reg, nil
	case "remove-version":
		version, err := versionAttr(p)
		if err != nil {
			return nil, err
		}
		if err := adm.RemoveVersion(ctx, ep, version); err != nil {
			return nil, a.mapErr(op, err)
		}
		return xmltree.New(ns.API, "removed", "jid", ep, "version", version), nil
	case "remove-endpoint":
		if err := adm.RemoveEndpoint(ctx, ep); err != nil {
			return nil, a.mapErr(op, err)
		}
		return xmltree.New(ns.API, "removed", "jid", ep), nil
	}
	return nil, agentproto.ErrServiceUnavailable()
}

func (a *admin) register(ctx context.Context, p *xmltree.Element, reg func(context.Context, []byte) (*directory.Manifest, error)) (*xmltree.Element, error) {
	docs := p.ChildrenNamed(ns.API, "manifest")
	if len(docs) != 1 {
		return nil, agentproto.ErrBadRequest("Exactly one manifest element is required.")
	}
	doc := docs[0]
	// Simple content: a child element would splice the JSON text.
	if len(doc.Children) > 0 {
		return nil, agentproto.ErrBadRequest("The manifest must be text.")
	}
	if doc.AttrValue("media-type") != ns.MediaJSON {
		return nil, agentproto.ErrBadRequest("The manifest media-type must be application/json.")
	}
	raw := []byte(doc.Text)
	// Malformed JSON is a bad request; a document past the limits is a
	// resource constraint; everything else is the validator's to judge.
	if _, err := ijson.Parse(raw, directory.ManifestLimits); err != nil {
		var je *ijson.Error
		switch {
		case ijson.IsLimit(err):
			return nil, agentproto.ErrResourceConstraint("The manifest exceeds a size or complexity limit.")
		case errors.As(err, &je) && je.Kind == ijson.KindSyntax:
			return nil, agentproto.ErrBadRequest("The manifest is not well-formed JSON.")
		}
	}
	m, err := reg(ctx, raw)
	if err != nil {
		return nil, a.mapErr("register", err)
	}
	return xmltree.New(ns.API, "registered", "jid", m.Endpoint, "version", m.Version).Add(hashElement(m.Hash)), nil
}

func (a *admin) mapErr(op string, err error) error {
	var ve *directory.ValidationError
	switch {
	case errors.As(err, &ve):
		return agentproto.ErrNotAcceptable("The manifest failed validation.")
	case errors.Is(err, directory.ErrTooLarge):
		return agentproto.ErrResourceConstraint("The manifest exceeds a size or complexity limit.")
	case errors.Is(err, directory.ErrConflict):
		return agentproto.ErrConflict("The version is already registered with different content.")
	case errors.Is(err, directory.ErrHashMismatch):
		return agentproto.ErrConflict("The hash does not match the registered version.")
	case errors.Is(err, directory.ErrActive):
		return agentproto.ErrConflict("The version is active; deactivate or activate another version first.")
	case errors.Is(err, directory.ErrReferenced):
		return agentproto.ErrConflict("Retained tasks still reference the version.")
	case errors.Is(err, directory.ErrForeignDomain):
		// The spec's error for registration for another JID.
		return agentproto.ErrForbidden("The manifest's agent.jid is outside the domain this gateway answers for.")
	case isNotOwner(err):
		// Self Registration's proof of control.
		return agentproto.ErrForbidden("A manifest may only be registered for the sender's own bare JID.")
	case errors.Is(err, directory.ErrBadEndpoint):
		return agentproto.ErrBadRequest("The jid attribute is not a valid endpoint identifier.")
	case errors.Is(err, directory.ErrNotFound):
		return agentproto.ErrItemNotFound()
	}
	var se *agentproto.StanzaError
	if errors.As(err, &se) {
		return se
	}
	a.s.Log.Error("directory admin operation failed", "op", op, "err", err)
	return agentproto.ErrInternal()
}

// endpointAttr reads and normalizes the required jid attribute: a bare JID
// with a localpart.
func endpointAttr(p *xmltree.Element) (string, error) {
	s, ok := p.LookupAttr("jid")
	if !ok || s == "" {
		return "", agentproto.ErrBadRequest("The jid attribute is required.")
	}
	if len(s) > maxJIDBytes {
		return "", agentproto.ErrBadRequest("The jid attribute is not a valid endpoint identifier.")
	}
	j, err := jid.Parse(s)
	if err != nil || j.Localpart() == "" || j.Resourcepart() != "" {
		return "", agentproto.ErrBadRequest("The jid attribute is not a valid endpoint identifier.")
	}
	return j.String(), nil
}

func versionAttr(p *xmltree.Element) (string, error) {
	v, ok := p.LookupAttr("version")
	if !ok || !ids.ValidVersion(v) {
		return "", agentproto.ErrBadRequest("The version attribute is missing or malformed.")
	}
	return v, nil
}
