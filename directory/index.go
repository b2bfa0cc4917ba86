package directory

import (
	"sort"
	"strings"

	"golang.org/x/text/cases"
)

// Page sizes of List and Search.
const (
	DefaultPageSize = 50  // when the request has no <max/>
	MaxPageSize     = 100 // larger requests are cut to this
)

// snapshot is an immutable view of the directory. Readers load it with one
// atomic pointer read and never lock; writers build a new one and swap it.
//
// It is compact on purpose (issue 23, directory scale): per version only
// the key, hash, agent name and title; the parsed manifest only where the
// driver cannot read one version back (m != nil), otherwise it is loaded
// on demand through the Registry's bounded cache.
type snapshot struct {
	gen       int64
	endpoints map[string]*endpointIndex

	// Endpoints with an active version, ordered octetwise by bare JID
	// (Go string order), as parallel slices for a tight scan.
	jids    []string
	actives []*verRef
	entries []Entry
	folds   [][3]string // case-folded localpart, agent.name, agent.title
}

// verRef is one registered version in the index.
type verRef struct {
	version, hash string
	name, title   string    // agent.name, agent.title
	m             *Manifest // resident manifest; nil when loaded on demand
}

func (v *verRef) displayName() string {
	if v.title != "" {
		return v.title
	}
	return v.name
}

type endpointIndex struct {
	versions []*verRef // few per endpoint: a scan beats a map
	active   *verRef
}

func (e *endpointIndex) version(v string) *verRef {
	for _, r := range e.versions {
		if r.version == v {
			return r
		}
	}
	return nil
}

var emptySnapshot = &snapshot{endpoints: map[string]*endpointIndex{}}

// buildList fills the ordered slices, reusing old's folded strings for
// unchanged active versions.
func (s *snapshot) buildList(old *snapshot) {
	for jid, e := range s.endpoints {
		if e.active != nil {
			s.jids = append(s.jids, jid)
		}
	}
	sort.Strings(s.jids)
	n := len(s.jids)
	s.actives = make([]*verRef, n)
	s.entries = make([]Entry, n)
	s.folds = make([][3]string, n)
	folder := cases.Fold()
	fold := func(x string) string {
		// Share the string when folding leaves it as it is (the usual
		// lower-case localpart and name).
		if f := folder.String(x); f != x {
			return f
		}
		return x
	}
	for i, jid := range s.jids {
		v := s.endpoints[jid].active
		s.actives[i] = v
		s.entries[i] = Entry{JID: jid, Name: v.displayName()}
		if j := old.find(jid); j >= 0 && old.actives[j] == v {
			s.folds[i] = old.folds[j]
			continue
		}
		local, _, _ := strings.Cut(jid, "@")
		s.folds[i] = [3]string{fold(local), fold(v.name), fold(v.title)}
	}
}

func (s *snapshot) find(jid string) int {
	i := sort.SearchStrings(s.jids, jid)
	if i < len(s.jids) && s.jids[i] == jid {
		return i
	}
	return -1
}

func pageSize(max int) int {
	switch {
	case max <= 0:
		return DefaultPageSize
	case max > MaxPageSize:
		return MaxPageSize
	}
	return max
}

// page answers an XEP-0059 request over the listed endpoints that match.
// Every listed endpoint is tested exactly once, because Count covers all
// pages; cursors are positioned by binary search on the ordering, so a
// cursor naming a removed or hidden endpoint still pages correctly and
// reveals nothing.
func (s *snapshot) page(match func(i int) bool, q PageQuery) Page {
	size := pageSize(q.Max)
	n := len(s.jids)
	var (
		items []int
		count int
		first int // ordinal of the first returned item among matches
	)
	switch {
	case q.After != "":
		start := sort.SearchStrings(s.jids, q.After)
		if start < n && s.jids[start] == q.After {
			start++
		}
		for i := 0; i < n; i++ {
			if !match(i) {
				continue
			}
			if i < start {
				first++
			} else if len(items) < size {
				items = append(items, i)
			}
			count++
		}
	case q.HasBefore:
		end := n
		if q.Before != "" {
			end = sort.SearchStrings(s.jids, q.Before)
		}
		// The last size matches before end, kept in a ring.
		ring := make([]int, size)
		seen := 0
		for i := 0; i < n; i++ {
			if !match(i) {
				continue
			}
			if i < end {
				ring[seen%size] = i
				seen++
			}
			count++
		}
		k := min(seen, size)
		items = make([]int, k)
		for j := range k {
			items[j] = ring[(seen-k+j)%size]
		}
		first = seen - k
	default:
		skip := max(q.Index, 0)
		ord := 0
		for i := 0; i < n; i++ {
			if !match(i) {
				continue
			}
			if ord >= skip && len(items) < size {
				items = append(items, i)
			}
			ord++
			count++
		}
		first = skip
	}
	p := Page{Count: count, FirstIndex: first}
	if len(items) == 0 {
		return p
	}
	p.Items = make([]Entry, len(items))
	for j, i := range items {
		p.Items[j] = s.entries[i]
	}
	p.First = p.Items[0].JID
	p.Last = p.Items[len(items)-1].JID
	return p
}

func (s *snapshot) list(visible func(string) bool, q PageQuery) Page {
	if visible == nil {
		return s.page(func(int) bool { return true }, q)
	}
	return s.page(func(i int) bool { return visible(s.jids[i]) }, q)
}

// search matches nick as a case-folded substring of the localpart,
// agent.name or agent.title. Folding is Unicode full case folding
// (golang.org/x/text/cases.Fold, not locale-tailored), so "WEATHER" finds
// "weather" and "STRASSE" finds "Straße" (ß folds to "ss"). No Unicode
// normalization is applied. An empty nick matches every endpoint.
func (s *snapshot) search(visible func(string) bool, nick string, q PageQuery) Page {
	if nick == "" {
		return s.list(visible, q)
	}
	needle := cases.Fold().String(nick)
	return s.page(func(i int) bool {
		f := &s.folds[i]
		if !strings.Contains(f[0], needle) && !strings.Contains(f[1], needle) && !strings.Contains(f[2], needle) {
			return false
		}
		return visible == nil || visible(s.jids[i])
	}, q)
}
