// Package rsm implements XEP-0059 Result Set Management: parsing a
// requester's <set/>, choosing the window of an ordered result, and building
// the <set/> that describes a returned page.
//
// It is shared by the gateway's discovery and search handlers and by the
// caller-side client, so both ends spell the protocol the same way.
package rsm

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Limits on what Parse accepts. An item ID is a bare JID (at most 3071
// bytes) or a tool node, whose tool name is bounded only by the stanza size;
// 16 KiB is far beyond any sane name and keeps cursors cheap to compare.
const (
	MaxIDBytes = 16 << 10
	maxDigits  = 9 // keeps <max> and <index> well inside an int
)

// ErrInvalid reports a malformed <set/>. Callers answer it with bad-request;
// the error text never quotes the request.
var ErrInvalid = errors.New("rsm: malformed result set request")

// Query is a parsed request <set/>.
type Query struct {
	Max       int // -1 when absent; 0 asks for the count only
	After     string
	HasAfter  bool
	Before    string
	HasBefore bool // with an empty Before: the last page
	Index     int  // -1 when absent
}

// None is the query of a request that carried no <set/>.
var None = Query{Max: -1, Index: -1}

// Parse reads a request <set/>. A nil set yields None. Unknown children are
// ignored as XEP-0059 asks; duplicated or contradictory ones, non-numeric or
// negative numbers and oversized item IDs are ErrInvalid.
func Parse(set *xmltree.Element) (Query, error) {
	q := None
	if set == nil {
		return q, nil
	}
	if set.Name.Space != ns.RSM || set.Name.Local != "set" {
		return q, ErrInvalid
	}
	seen := map[string]bool{}
	for _, c := range set.Children {
		if c.Name.Space != ns.RSM {
			continue
		}
		switch c.Name.Local {
		case "max", "after", "before", "index":
		default:
			continue
		}
		if seen[c.Name.Local] {
			return None, ErrInvalid
		}
		seen[c.Name.Local] = true
		switch c.Name.Local {
		case "max":
			n, ok := parseNumber(c.Text)
			if !ok {
				return None, ErrInvalid
			}
			q.Max = n
		case "index":
			n, ok := parseNumber(c.Text)
			if !ok {
				return None, ErrInvalid
			}
			q.Index = n
		case "after":
			if c.Text == "" || len(c.Text) > MaxIDBytes {
				return None, ErrInvalid
			}
			q.After, q.HasAfter = c.Text, true
		case "before":
			if len(c.Text) > MaxIDBytes {
				return None, ErrInvalid
			}
			q.Before, q.HasBefore = c.Text, true
		}
	}
	// Only one way of positioning the page makes sense at a time.
	positions := 0
	for _, b := range []bool{q.HasAfter, q.HasBefore, q.Index >= 0} {
		if b {
			positions++
		}
	}
	if positions > 1 {
		return None, ErrInvalid
	}
	return q, nil
}

func parseNumber(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// Limit is the page size to use: def when the requester gave no <max/>,
// never more than ceiling (a responder MAY return fewer than asked), and 0
// for a count-only request.
func (q Query) Limit(def, ceiling int) int {
	n := q.Max
	if n < 0 {
		n = def
	}
	if n > ceiling {
		n = ceiling
	}
	return n
}

// Window selects the page of keys (sorted ascending, octetwise) that q asks
// for with page size limit. It returns the half-open range [lo, hi). After
// and Before are positions in the key space, so a cursor need not name a key
// that still exists: the page simply starts after (or ends before) it.
func (q Query) Window(keys []string, limit int) (lo, hi int) {
	n := len(keys)
	if limit < 0 {
		limit = 0
	}
	switch {
	case q.Index >= 0:
		lo = min(q.Index, n)
		hi = min(lo+limit, n)
	case q.HasBefore:
		hi = n
		if q.Before != "" {
			hi = sort.SearchStrings(keys, q.Before) // first key >= Before
		}
		lo = max(0, hi-limit)
	case q.HasAfter:
		lo = sort.Search(n, func(i int) bool { return keys[i] > q.After })
		hi = min(lo+limit, n)
	default:
		hi = min(limit, n)
	}
	return lo, hi
}

// Element builds the response <set/>. With no items on the page (first ==
// "" and last == "") it carries only <count/>, as XEP-0059 requires.
// firstIndex < 0 leaves out the index attribute; count < 0 leaves out
// <count/>.
func Element(first, last string, firstIndex, count int) *xmltree.Element {
	set := xmltree.New(ns.RSM, "set")
	if first != "" || last != "" {
		f := xmltree.New(ns.RSM, "first").WithText(first)
		if firstIndex >= 0 {
			f.SetAttr("index", strconv.Itoa(firstIndex))
		}
		set.Add(f, xmltree.New(ns.RSM, "last").WithText(last))
	}
	if count >= 0 {
		set.Add(xmltree.New(ns.RSM, "count").WithText(strconv.Itoa(count)))
	}
	return set
}

// Request builds a request <set/> from q, for clients.
func Request(q Query) *xmltree.Element {
	set := xmltree.New(ns.RSM, "set")
	if q.Max >= 0 {
		set.Add(xmltree.New(ns.RSM, "max").WithText(strconv.Itoa(q.Max)))
	}
	if q.HasAfter {
		set.Add(xmltree.New(ns.RSM, "after").WithText(q.After))
	}
	if q.HasBefore {
		set.Add(xmltree.New(ns.RSM, "before").WithText(q.Before))
	}
	if q.Index >= 0 {
		set.Add(xmltree.New(ns.RSM, "index").WithText(strconv.Itoa(q.Index)))
	}
	return set
}

// Result is a parsed response <set/>, for clients.
type Result struct {
	First      string
	FirstIndex int // -1 when absent
	Last       string
	Count      int // -1 when absent
}

// ParseResult reads a response <set/>. A nil set yields an empty Result.
func ParseResult(set *xmltree.Element) (Result, error) {
	r := Result{FirstIndex: -1, Count: -1}
	if set == nil {
		return r, nil
	}
	if set.Name.Space != ns.RSM || set.Name.Local != "set" {
		return r, ErrInvalid
	}
	if f := set.Child(ns.RSM, "first"); f != nil {
		r.First = f.Text
		if v, ok := f.LookupAttr("index"); ok {
			n, ok := parseNumber(v)
			if !ok {
				return r, ErrInvalid
			}
			r.FirstIndex = n
		}
	}
	if l := set.Child(ns.RSM, "last"); l != nil {
		r.Last = l.Text
	}
	if c := set.Child(ns.RSM, "count"); c != nil {
		n, ok := parseNumber(c.Text)
		if !ok {
			return r, ErrInvalid
		}
		r.Count = n
	}
	return r, nil
}
