package dataform

import (
	"reflect"
	"testing"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// FuzzDataformParse feeds XML documents (seeds in
// testdata/fuzz/FuzzDataformParse) to Parse and ParseSubmit. Rejections are
// the package's three errors; accepted forms stay within the limits, carry
// no duplicate vars, and survive a round trip through Element.
func FuzzDataformParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := xmltree.Parse(data, xmltree.DefaultLimits)
		if err != nil {
			return
		}
		if _, err := ParseSubmit(x, ns.Search); err != nil && err != ErrInvalid && err != ErrLimit && err != ErrFormType {
			t.Fatalf("ParseSubmit error %v is not one of the package's", err)
		}
		form, err := Parse(x)
		if err != nil {
			if err != ErrInvalid && err != ErrLimit {
				t.Fatalf("Parse error %v is not ErrInvalid or ErrLimit", err)
			}
			return
		}
		checkLimits(t, form)
		el, err := xmltree.Parse([]byte(form.Element().String()), xmltree.DefaultLimits)
		if err != nil {
			t.Fatalf("Element output does not parse: %v", err)
		}
		again, err := Parse(el)
		if err != nil {
			t.Fatalf("Element output rejected: %v", err)
		}
		if !reflect.DeepEqual(norm(form), norm(again)) {
			t.Fatalf("form changed through Element:\n%+v\n%+v", form, again)
		}
	})
}

func checkLimits(t *testing.T, f *Form) {
	t.Helper()
	total := 0
	check := func(fields []Field) {
		if len(fields) > MaxFields {
			t.Fatalf("%d fields accepted", len(fields))
		}
		for _, fl := range fields {
			if len(fl.Var) > MaxVarBytes || len(fl.Values) > MaxValues {
				t.Fatalf("field beyond limits accepted: var %d bytes, %d values", len(fl.Var), len(fl.Values))
			}
			total += len(fl.Var) + len(fl.Type) + len(fl.Label)
			for _, v := range fl.Values {
				if len(v) > MaxValueBytes {
					t.Fatalf("value of %d bytes accepted", len(v))
				}
				total += len(v)
			}
		}
	}
	seen := map[string]bool{}
	for _, fl := range f.Fields {
		if fl.Var == FormTypeVar || (fl.Var != "" && seen[fl.Var]) {
			t.Fatalf("field var %q accepted twice or FORM_TYPE not lifted", fl.Var)
		}
		seen[fl.Var] = true
	}
	check(f.Fields)
	check(f.Reported)
	if len(f.Items) > MaxItems {
		t.Fatalf("%d items accepted", len(f.Items))
	}
	for _, row := range f.Items {
		check(row)
	}
	if total > MaxTotalBytes {
		t.Fatalf("%d bytes of fields accepted", total)
	}
}

// norm drops the difference Element cannot carry: an empty <reported/>.
func norm(f *Form) *Form {
	c := *f
	if len(c.Reported) == 0 {
		c.Reported = nil
	}
	return &c
}
