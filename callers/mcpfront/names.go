package mcpfront

import (
	"crypto/sha256"
	"encoding/base32"
	"sort"
	"strings"
)

// NameStyle selects the character set and length of the MCP tool names the
// front derives from XMPP endpoint and tool names.
type NameStyle int

const (
	// NamesMCP follows the MCP 2025-11-25 tool-name guidance: 1 to 128
	// characters of [A-Za-z0-9_.-]. The separator is ".", as in
	// "weather.forecast.get".
	NamesMCP NameStyle = iota
	// NamesStrict is for hosts and model APIs that reject dots or long
	// names: 1 to 64 characters of [A-Za-z0-9_-], separator "_", as in
	// "weather_forecast_get".
	NamesStrict
)

func (s NameStyle) sep() byte {
	if s == NamesStrict {
		return '_'
	}
	return '.'
}

func (s NameStyle) max() int {
	if s == NamesStrict {
		return 64
	}
	return 128
}

func (s NameStyle) allowed(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		return true
	case r == '.':
		return s != NamesStrict
	}
	return false
}

// toolRef identifies one XMPP tool: an endpoint bare JID and the exact tool
// name in its manifest.
type toolRef struct {
	Endpoint string // bare JID
	Tool     string
}

// suffixLen is the length of the disambiguating hash suffix (base32, 5
// bits per character: 50 bits).
const suffixLen = 10

// assignNames maps every ref to a distinct MCP tool name.
//
// The plain name is localpart + separator + tool. It is used as is when it
// needed no character replaced, fits the length limit, and no other ref
// has the same plain name. Otherwise the name is the cleaned plain name,
// cut to fit, followed by "-" and a hash of the exact endpoint JID and tool
// name. Every member of a colliding group gets a suffix, so the result
// depends only on the set of refs, never on discovery order.
func assignNames(refs []toolRef, style NameStyle) map[toolRef]string {
	type cand struct {
		ref   toolRef
		base  string
		exact bool
	}
	cands := make([]cand, 0, len(refs))
	groups := map[string]int{}
	seen := map[toolRef]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		base, exact := plainName(r, style)
		cands = append(cands, cand{r, base, exact})
		groups[base]++
	}
	out := make(map[toolRef]string, len(cands))
	used := map[string][]toolRef{}
	for _, c := range cands {
		name := c.base
		if !c.exact || groups[c.base] > 1 {
			name = suffixed(c.base, c.ref, style, suffixLen)
		}
		out[c.ref] = name
		used[name] = append(used[name], c.ref)
	}
	// A hashed name can still meet a plain name that happens to look
	// hashed, or (with negligible probability) another hash. Lengthen the
	// suffix of every hashed member of such a group until all are unique.
	for n := suffixLen * 2; n <= 52; n += suffixLen {
		clash := false
		names := make([]string, 0, len(used))
		for name := range used {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			rs := used[name]
			if len(rs) < 2 {
				continue
			}
			clash = true
			delete(used, name)
			for _, r := range rs {
				nn := name
				if base, exact := plainName(r, style); !exact || groups[base] > 1 {
					nn = suffixed(base, r, style, n) // only plain names keep theirs
				}
				out[r] = nn
				used[nn] = append(used[nn], r)
			}
		}
		if !clash {
			break
		}
	}
	return out
}

// plainName is the cleaned localpart.tool and whether no character had to
// be replaced or cut.
func plainName(r toolRef, style NameStyle) (string, bool) {
	local := r.Endpoint
	if i := strings.IndexByte(local, '@'); i >= 0 {
		local = local[:i]
	} else {
		local = ""
	}
	l, okL := clean(local, style)
	t, okT := clean(r.Tool, style)
	if l == "" {
		l, okL = "agent", false
	}
	if t == "" {
		t, okT = "tool", false
	}
	name := l + string(style.sep()) + t
	return name, okL && okT && len(name) <= style.max()
}

// clean replaces every character outside the style's set with "_".
func clean(s string, style NameStyle) (string, bool) {
	var b strings.Builder
	exact := true
	for _, r := range s {
		if style.allowed(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			exact = false
		}
	}
	return b.String(), exact
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func suffixed(base string, r toolRef, style NameStyle, n int) string {
	sum := sha256.Sum256([]byte(r.Endpoint + "\x00" + r.Tool))
	h := strings.ToLower(b32.EncodeToString(sum[:]))
	if n > len(h) {
		n = len(h)
	}
	keep := style.max() - 1 - n
	if len(base) > keep {
		base = base[:keep]
	}
	return base + "-" + h[:n]
}

// validName reports whether name satisfies the style.
func validName(name string, style NameStyle) bool {
	if name == "" || len(name) > style.max() {
		return false
	}
	for _, r := range name {
		if !style.allowed(r) {
			return false
		}
	}
	return true
}
