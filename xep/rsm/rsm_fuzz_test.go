package rsm

import (
	"slices"
	"testing"

	"github.com/agentgw/agentgw/xep/xmltree"
)

// FuzzRSMParse feeds XML documents (seeds in testdata/fuzz/FuzzRSMParse)
// to Parse and ParseResult. Rejections are exactly ErrInvalid with the None
// query; accepted queries keep the documented invariants, survive a
// round trip through Request, and select a window inside any key list.
func FuzzRSMParse(f *testing.F) {
	keys := []string{"alpha@a", "calendar@a", "mail@a", "weather@a", "zulu@a"}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := xmltree.Parse(data, xmltree.DefaultLimits)
		if err != nil {
			return
		}
		if r, err := ParseResult(set); err != nil {
			if err != ErrInvalid {
				t.Fatalf("ParseResult error %v is not ErrInvalid", err)
			}
		} else if r.Count < -1 || r.FirstIndex < -1 {
			t.Fatalf("ParseResult = %+v", r)
		}
		q, err := Parse(set)
		if err != nil {
			if err != ErrInvalid || q != None {
				t.Fatalf("Parse = %+v, %v; want None, ErrInvalid", q, err)
			}
			return
		}
		positions := 0
		for _, b := range []bool{q.HasAfter, q.HasBefore, q.Index >= 0} {
			if b {
				positions++
			}
		}
		switch {
		case q.Max < -1 || q.Index < -1 || positions > 1:
			t.Fatalf("accepted %+v", q)
		case q.HasAfter && (q.After == "" || len(q.After) > MaxIDBytes):
			t.Fatalf("accepted an after of %d bytes", len(q.After))
		case !q.HasAfter && q.After != "", !q.HasBefore && q.Before != "", len(q.Before) > MaxIDBytes:
			t.Fatalf("accepted %+v", q)
		}
		again, err := xmltree.Parse([]byte(Request(q).String()), xmltree.DefaultLimits)
		if err != nil {
			t.Fatalf("Request output does not parse: %v", err)
		}
		if q2, err := Parse(again); err != nil || q2 != q {
			t.Fatalf("round trip: %+v, %v; want %+v", q2, err, q)
		}
		for _, n := range []int{0, 1, len(keys)} {
			ks := keys[:n]
			for _, limit := range []int{q.Limit(2, 3), 0, 1} {
				lo, hi := q.Window(ks, limit)
				if lo < 0 || lo > hi || hi > len(ks) || hi-lo > limit {
					t.Fatalf("Window(%d keys, %d) = [%d, %d) for %+v", n, limit, lo, hi, q)
				}
				if q.HasAfter && lo < hi && !(ks[lo] > q.After) {
					t.Fatalf("window starts at %q, not after %q", ks[lo], q.After)
				}
				if q.HasBefore && q.Before != "" && lo < hi && !(ks[hi-1] < q.Before) {
					t.Fatalf("window ends at %q, not before %q", ks[hi-1], q.Before)
				}
			}
		}
		if !slices.IsSorted(keys) {
			t.Fatal("keys mutated")
		}
	})
}
