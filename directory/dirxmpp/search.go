package dirxmpp

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/directory"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// maxNickBytes bounds the search term; names and titles are at most 256
// characters, so longer terms cannot match anything.
const maxNickBytes = 1024

const searchInstructions = "Enter a nickname to search for matching agents."

// search implements XEP-0055 at the gateway: a get returns the form
// (searchFormIQ), a set runs the search over the endpoints visible to the
// requester. A data-form
// submission gets a data-form result (reported and item only); a legacy
// <nick/> submission gets legacy <item/> results, which is what XEP-0055
// clients without data forms can read. Either way the RSM <set/> sits
// outside any form.
func (s *service) search(_ context.Context, iq component.IQ) (*xmltree.Element, error) {
	nick, useForm, err := parseSearch(iq.Payload)
	if err != nil {
		return nil, err
	}
	rq, err := parseRSM(iq.Payload)
	if err != nil {
		return nil, err
	}
	pq, countOnly := pageQuery(rq)
	page := s.Reader.Search(s.visible(requester(iq)), nick, pq)
	items := page.Items
	if countOnly {
		items = nil
	}
	q := xmltree.New(ns.Search, "query")
	if useForm {
		q.Add(searchResultForm(items).Element())
	} else {
		for _, e := range items {
			q.Add(xmltree.New(ns.Search, "item", "jid", e.JID).Add(xmltree.New(ns.Search, "nick").WithText(xmltree.Sanitize(e.Name))))
		}
	}
	return q.Add(pageSet(page, countOnly)), nil
}

// searchFormIQ answers a XEP-0055 get with the search form.
func searchFormIQ(context.Context, component.IQ) (*xmltree.Element, error) {
	return searchForm(), nil
}

func searchForm() *xmltree.Element {
	form := dataform.Form{
		Type:     dataform.TypeForm,
		Title:    "Agent Directory Search",
		FormType: ns.Search,
		Fields:   []dataform.Field{{Var: "nick", Type: dataform.FieldTextSingle, Label: "Nickname"}},
	}
	return xmltree.New(ns.Search, "query").Add(
		xmltree.New(ns.Search, "instructions").WithText(searchInstructions),
		xmltree.New(ns.Search, "nick"),
		form.Element(),
	)
}

func searchResultForm(items []directory.Entry) *dataform.Form {
	f := &dataform.Form{
		Type: dataform.TypeResult,
		Reported: []dataform.Field{
			{Var: "jid", Type: dataform.FieldJIDSingle, Label: "Jabber ID"},
			{Var: "nick", Type: dataform.FieldTextSingle, Label: "Nickname"},
		},
		Items: make([][]dataform.Field, 0, len(items)),
	}
	for _, e := range items {
		f.Items = append(f.Items, []dataform.Field{
			{Var: "jid", Values: []string{e.JID}},
			{Var: "nick", Values: []string{e.Name}},
		})
	}
	return f
}

// parseSearch reads the search term from a data-form submission or from the
// legacy <nick/> field. Other legacy fields (first, last, email) have no
// meaning for agents and are ignored.
func parseSearch(q *xmltree.Element) (nick string, useForm bool, err error) {
	if x := q.Child(ns.Data, "x"); x != nil {
		values, err := dataform.ParseSubmit(x, ns.Search)
		switch {
		case errors.Is(err, dataform.ErrFormType):
			return "", false, agentproto.ErrBadRequest("The search form has the wrong FORM_TYPE.")
		case errors.Is(err, dataform.ErrLimit):
			return "", false, agentproto.ErrResourceConstraint("The search form exceeds a size limit.")
		case err != nil:
			return "", false, agentproto.ErrBadRequest("The search form is malformed.")
		}
		if v := values["nick"]; len(v) > 1 {
			return "", false, agentproto.ErrBadRequest("The nick field takes one value.")
		} else if len(v) == 1 {
			nick = v[0]
		}
		useForm = true
	} else if n := q.Child(ns.Search, "nick"); n != nil {
		nick = n.Text
	}
	if len(nick) > maxNickBytes || !utf8.ValidString(nick) {
		return "", false, agentproto.ErrBadRequest("The search term is too long.")
	}
	return trimSpace(nick), useForm, nil
}
