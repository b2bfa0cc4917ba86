package dirxmpp

import (
	"crypto/sha1" // #nosec G505 -- XEP-0115 fixes sha-1 for the verification string
	"encoding/base64"
	"sort"
	"strings"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/dataform"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// CapsNode is the XEP-0115 node of endpoint presence: it names the
// software, and <CapsNode>#<ver> is answered like the node-less disco#info.
const CapsNode = "https://agentgw.dev/caps"

// CapsVer is the XEP-0115 verification string (section 5.1, sha-1) of a
// disco#info answer: identities, features and extended forms, each sorted.
// The endpoint's answer does not depend on the requester, so one ver fits
// every subscriber and changes exactly when the answer does (a new
// version, manifest hash or feature).
func CapsVer(q *xmltree.Element) string {
	var ids, feats []string
	type form struct {
		typ    string
		fields []string
	}
	var forms []form
	for _, c := range q.Children {
		switch {
		case c.Is(ns.DiscoInfo, "identity"):
			ids = append(ids, c.AttrValue("category")+"/"+c.AttrValue("type")+"/"+langOf(c)+"/"+c.AttrValue("name"))
		case c.Is(ns.DiscoInfo, "feature"):
			feats = append(feats, c.AttrValue("var"))
		case c.Is(ns.Data, "x"):
			f, err := dataform.Parse(c)
			if err != nil || f.FormType == "" {
				continue
			}
			fl := append([]dataform.Field(nil), f.Fields...)
			sort.Slice(fl, func(i, j int) bool { return fl[i].Var < fl[j].Var })
			var fields []string
			for _, x := range fl {
				vals := append([]string(nil), x.Values...)
				sort.Strings(vals)
				fields = append(fields, x.Var)
				fields = append(fields, vals...)
			}
			forms = append(forms, form{f.FormType, fields})
		}
	}
	sort.Strings(ids)
	sort.Strings(feats)
	sort.Slice(forms, func(i, j int) bool { return forms[i].typ < forms[j].typ })
	var b strings.Builder
	for _, s := range ids {
		b.WriteString(s + "<")
	}
	for _, s := range feats {
		b.WriteString(s + "<")
	}
	for _, f := range forms {
		b.WriteString(f.typ + "<")
		for _, fl := range f.fields {
			b.WriteString(fl + "<")
		}
	}
	sum := sha1.Sum([]byte(b.String())) // #nosec G401 -- XEP-0115
	return base64.StdEncoding.EncodeToString(sum[:])
}

func langOf(e *xmltree.Element) string {
	l, _ := e.Lang()
	return l
}

// caps is the <c/> of endpoint ep's presence, nil when it has no active
// version.
func (s *service) caps(ep string) *xmltree.Element {
	m, ok := s.Reader.Active(ep)
	if !ok {
		return nil
	}
	return xmltree.New(ns.Caps, "c", "hash", "sha-1", "node", CapsNode, "ver", CapsVer(s.endpointInfoReply(ep, m)))
}
