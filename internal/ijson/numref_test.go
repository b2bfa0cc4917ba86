package ijson

import (
	"math/big"
	"strconv"
	"strings"
)

// refES6 is a second, independent ECMAScript Number::toString used to check
// appendNumber. It does not use strconv's shortest formatting: for each
// digit count p it takes the correctly rounded p-digit decimal from
// math/big and its two neighbours, keeps those that read back as f, and
// picks the one closest to f by exact rational arithmetic (ties to even),
// as ECMA-262 Number::toString and its Note 2 require. The layout is keyed on
// the scientific exponent instead of ECMAScript's n.
func refES6(f float64) string {
	if f == 0 {
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	x := new(big.Float).SetFloat64(f)
	exact, _ := x.Rat(nil)
	for p := 1; p <= 17; p++ {
		s, e := splitSci(x.Text('e', p-1))
		pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p-1)), nil)
		type cand struct {
			s *big.Int
			e int
		}
		cands := []cand{{s, e}, {new(big.Int).Add(s, big.NewInt(1)), e}}
		if s.Cmp(pow) == 0 {
			// 10…0 × 10^e: the next p-digit decimal down is 99…9 × 10^(e-1).
			below := new(big.Int).Mul(pow, big.NewInt(10))
			cands = append(cands, cand{below.Sub(below, big.NewInt(1)), e - 1})
		} else {
			cands = append(cands, cand{new(big.Int).Sub(s, big.NewInt(1)), e})
		}
		var best *cand
		var bestDist *big.Rat
		for i := range cands {
			c := &cands[i]
			lit := c.s.String() + "e" + strconv.Itoa(c.e)
			if g, err := strconv.ParseFloat(lit, 64); err != nil || g != f {
				continue
			}
			r, _ := new(big.Rat).SetString(lit)
			dist := new(big.Rat).Sub(r, exact)
			dist.Abs(dist)
			if best == nil || dist.Cmp(bestDist) < 0 || (dist.Cmp(bestDist) == 0 && c.s.Bit(0) == 0) {
				best, bestDist = c, dist
			}
		}
		if best != nil {
			return sign + refLayout(best.s.String(), best.e)
		}
	}
	panic("no 17-digit decimal round-trips")
}

// splitSci turns big.Float's "d.ddde±XX" into integer digits s and exponent
// e with value s × 10^e.
func splitSci(txt string) (*big.Int, int) {
	mant, exp, _ := strings.Cut(txt, "e")
	e, _ := strconv.Atoi(exp)
	frac := ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		frac = mant[i+1:]
		mant = mant[:i] + frac
	}
	s, _ := new(big.Int).SetString(mant, 10)
	return s, e - len(frac)
}

// refLayout writes digits × 10^e per Number::toString's layout rules.
func refLayout(digits string, e int) string {
	trimmed := strings.TrimRight(digits, "0")
	e += len(digits) - len(trimmed)
	digits = trimmed
	sci := e + len(digits) - 1 // value is d.ddd × 10^sci
	switch {
	case sci >= 21 || sci < -6:
		out := digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		if sci >= 0 {
			return out + "e+" + strconv.Itoa(sci)
		}
		return out + "e" + strconv.Itoa(sci)
	case e >= 0:
		return digits + strings.Repeat("0", e)
	case sci >= 0:
		return digits[:sci+1] + "." + digits[sci+1:]
	default:
		return "0." + strings.Repeat("0", -sci-1) + digits
	}
}
