// Package dataform implements the parts of XEP-0004 Data Forms that the
// gateway speaks: building form and result payloads (with a XEP-0068
// FORM_TYPE, typed fields, and reported/item multi-item results) and parsing
// submitted or returned forms within fixed limits.
package dataform

import (
	"errors"
	"strconv"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// Form types.
const (
	TypeForm   = "form"
	TypeSubmit = "submit"
	TypeResult = "result"
	TypeCancel = "cancel"
)

// Field types used by the gateway.
const (
	FieldBoolean    = "boolean"
	FieldHidden     = "hidden"
	FieldJIDSingle  = "jid-single"
	FieldTextSingle = "text-single"
	FieldTextMulti  = "text-multi"
	FieldListSingle = "list-single"
	FieldListMulti  = "list-multi"
	FieldFixed      = "fixed"
)

// NSValidate is XEP-0122 Data Forms Validation.
const NSValidate = "http://jabber.org/protocol/xdata-validate"

// FormTypeVar is the var of the XEP-0068 hidden field naming the form type.
const FormTypeVar = "FORM_TYPE"

// Limits on what Parse accepts. Forms the gateway receives are small search
// submissions or disco extensions; anything beyond these is abuse.
const (
	MaxFields      = 256
	MaxValues      = 64 // per field
	MaxItems       = 1024
	MaxValueBytes  = 64 << 10
	MaxTotalBytes  = 1 << 20
	MaxVarBytes    = 256
	maxTitleBytes  = 4 << 10
	maxInstrBlocks = 16
)

// Errors of Parse. Their text never quotes the form.
var (
	ErrInvalid  = errors.New("dataform: malformed data form")
	ErrLimit    = errors.New("dataform: data form exceeds limits")
	ErrFormType = errors.New("dataform: unexpected FORM_TYPE")
)

// Field is one form field. Type "" leaves the attribute out (the default
// text-single, and the usual spelling inside submit forms and items).
type Field struct {
	Var    string
	Type   string
	Label  string
	Values []string
	// Desc, Required, Options and Validate are emitted in forms the
	// gateway sends (XEP-0050 command stages); Parse leaves them empty.
	Desc     string
	Required bool
	Options  []Option
	Validate *Validate
}

// Option is one <option/> of a list field.
type Option struct {
	Label string
	Value string
}

// Validate is an XEP-0122 <validate/>: a datatype ("xs:integer") and, when
// Min or Max is set, a <range/>; ListMin/ListMax > 0 add a <list-range/>.
type Validate struct {
	Datatype         string
	Min, Max         string
	ListMin, ListMax int
}

// Form is a data form. FormType, when set, is emitted as the first field,
// hidden, per XEP-0068.
type Form struct {
	Type         string
	FormType     string
	Title        string
	Instructions []string
	Fields       []Field
	Reported     []Field   // multi-item results: the column definitions
	Items        [][]Field // multi-item results: one slice per row
}

// Element builds the <x xmlns='jabber:x:data'/> payload. Titles,
// instructions, labels and values are XML text copies of data that may hold
// characters XML cannot carry (a manifest description with a control
// character, say): those become U+FFFD here, explicitly, rather than by
// whatever the stream encoder does.
func (f *Form) Element() *xmltree.Element {
	x := xmltree.New(ns.Data, "x", "type", f.Type)
	if f.Title != "" {
		x.Add(xmltree.New(ns.Data, "title").WithText(xmltree.Sanitize(f.Title)))
	}
	for _, in := range f.Instructions {
		x.Add(xmltree.New(ns.Data, "instructions").WithText(xmltree.Sanitize(in)))
	}
	if f.FormType != "" {
		x.Add(fieldElement(Field{Var: FormTypeVar, Type: FieldHidden, Values: []string{f.FormType}}))
	}
	for _, fl := range f.Fields {
		x.Add(fieldElement(fl))
	}
	if len(f.Reported) > 0 {
		rep := xmltree.New(ns.Data, "reported")
		for _, fl := range f.Reported {
			rep.Add(fieldElement(fl))
		}
		x.Add(rep)
	}
	for _, row := range f.Items {
		item := xmltree.New(ns.Data, "item")
		for _, fl := range row {
			item.Add(fieldElement(fl))
		}
		x.Add(item)
	}
	return x
}

func fieldElement(fl Field) *xmltree.Element {
	el := xmltree.New(ns.Data, "field")
	if fl.Type != "" {
		el.SetAttr("type", fl.Type)
	}
	if fl.Var != "" {
		el.SetAttr("var", fl.Var)
	}
	if fl.Label != "" {
		el.SetAttr("label", xmltree.Sanitize(fl.Label))
	}
	if fl.Desc != "" {
		el.Add(xmltree.New(ns.Data, "desc").WithText(xmltree.Sanitize(fl.Desc)))
	}
	if fl.Required {
		el.Add(xmltree.New(ns.Data, "required"))
	}
	if v := fl.Validate; v != nil {
		ve := xmltree.New(NSValidate, "validate")
		if v.Datatype != "" {
			ve.SetAttr("datatype", v.Datatype)
		}
		if v.Min != "" || v.Max != "" {
			r := xmltree.New(NSValidate, "range")
			if v.Min != "" {
				r.SetAttr("min", v.Min)
			}
			if v.Max != "" {
				r.SetAttr("max", v.Max)
			}
			ve.Add(r)
		} else {
			ve.Add(xmltree.New(NSValidate, "basic"))
		}
		if v.ListMin > 0 || v.ListMax > 0 {
			lr := xmltree.New(NSValidate, "list-range")
			if v.ListMin > 0 {
				lr.SetAttr("min", strconv.Itoa(v.ListMin))
			}
			if v.ListMax > 0 {
				lr.SetAttr("max", strconv.Itoa(v.ListMax))
			}
			ve.Add(lr)
		}
		el.Add(ve)
	}
	for _, v := range fl.Values {
		el.Add(xmltree.New(ns.Data, "value").WithText(xmltree.Sanitize(v)))
	}
	for _, o := range fl.Options {
		oe := xmltree.New(ns.Data, "option")
		if o.Label != "" {
			oe.SetAttr("label", xmltree.Sanitize(o.Label))
		}
		el.Add(oe.Add(xmltree.New(ns.Data, "value").WithText(xmltree.Sanitize(o.Value))))
	}
	return el
}

// Bool renders an XEP-0004 boolean the way the spec requires responders to
// emit it.
func Bool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ParseBool reads an XEP-0004 boolean ("1", "true", "0", "false").
func ParseBool(s string) (value, ok bool) {
	switch s {
	case "1", "true":
		return true, true
	case "0", "false":
		return false, true
	}
	return false, false
}

// Parse reads an <x xmlns='jabber:x:data'/> element. The FORM_TYPE field is
// lifted into Form.FormType and not repeated in Fields. Duplicate vars and
// anything beyond the limits are rejected.
func Parse(x *xmltree.Element) (*Form, error) {
	if !x.Is(ns.Data, "x") {
		return nil, ErrInvalid
	}
	f := &Form{Type: x.AttrValue("type")}
	switch f.Type {
	case TypeForm, TypeSubmit, TypeResult, TypeCancel:
	default:
		return nil, ErrInvalid
	}
	b := budget{left: MaxTotalBytes}
	seen := map[string]bool{}
	fields := 0
	for _, c := range x.Children {
		if c.Name.Space != ns.Data {
			continue
		}
		switch c.Name.Local {
		case "title":
			if len(c.Text) > maxTitleBytes {
				return nil, ErrLimit
			}
			f.Title = c.Text
		case "instructions":
			if len(f.Instructions) >= maxInstrBlocks || len(c.Text) > maxTitleBytes {
				return nil, ErrLimit
			}
			f.Instructions = append(f.Instructions, c.Text)
		case "field":
			fields++
			if fields > MaxFields {
				return nil, ErrLimit
			}
			fl, err := parseField(c, &b)
			if err != nil {
				return nil, err
			}
			if fl.Var == "" && f.Type == TypeSubmit {
				return nil, ErrInvalid
			}
			if fl.Var != "" {
				if seen[fl.Var] {
					return nil, ErrInvalid
				}
				seen[fl.Var] = true
			}
			if fl.Var == FormTypeVar {
				if len(fl.Values) != 1 {
					return nil, ErrInvalid
				}
				f.FormType = fl.Values[0]
				continue
			}
			f.Fields = append(f.Fields, fl)
		case "reported":
			if f.Reported != nil {
				return nil, ErrInvalid
			}
			rep, err := parseFields(c, &b)
			if err != nil {
				return nil, err
			}
			if rep == nil {
				rep = []Field{}
			}
			f.Reported = rep
		case "item":
			if len(f.Items) >= MaxItems {
				return nil, ErrLimit
			}
			row, err := parseFields(c, &b)
			if err != nil {
				return nil, err
			}
			f.Items = append(f.Items, row)
		}
	}
	return f, nil
}

type budget struct{ left int }

func (b *budget) take(n int) error {
	b.left -= n
	if b.left < 0 {
		return ErrLimit
	}
	return nil
}

func parseFields(parent *xmltree.Element, b *budget) ([]Field, error) {
	var out []Field
	for _, c := range parent.Children {
		if !c.Is(ns.Data, "field") {
			continue
		}
		if len(out) >= MaxFields {
			return nil, ErrLimit
		}
		fl, err := parseField(c, b)
		if err != nil {
			return nil, err
		}
		out = append(out, fl)
	}
	return out, nil
}

func parseField(c *xmltree.Element, b *budget) (Field, error) {
	fl := Field{Var: c.AttrValue("var"), Type: c.AttrValue("type"), Label: c.AttrValue("label")}
	if len(fl.Var) > MaxVarBytes || len(fl.Type) > MaxVarBytes || len(fl.Label) > maxTitleBytes {
		return Field{}, ErrLimit
	}
	if err := b.take(len(fl.Var) + len(fl.Type) + len(fl.Label)); err != nil {
		return Field{}, err
	}
	for _, v := range c.Children {
		if !v.Is(ns.Data, "value") {
			continue
		}
		if len(fl.Values) >= MaxValues || len(v.Text) > MaxValueBytes {
			return Field{}, ErrLimit
		}
		if err := b.take(len(v.Text)); err != nil {
			return Field{}, err
		}
		fl.Values = append(fl.Values, v.Text)
	}
	return fl, nil
}

// Field returns the field with the given var.
func (f *Form) Field(v string) (Field, bool) {
	for _, fl := range f.Fields {
		if fl.Var == v {
			return fl, true
		}
	}
	return Field{}, false
}

// Value returns the first value of the field with the given var, or "".
func (f *Form) Value(v string) string {
	fl, ok := f.Field(v)
	if !ok || len(fl.Values) == 0 {
		return ""
	}
	return fl.Values[0]
}

// Values maps each field var to its values.
func (f *Form) Values() map[string][]string {
	m := make(map[string][]string, len(f.Fields))
	for _, fl := range f.Fields {
		m[fl.Var] = fl.Values
	}
	return m
}

// ParseSubmit reads a submitted form and checks its FORM_TYPE. A submission
// without FORM_TYPE is accepted (older clients omit it); a different one is
// ErrFormType. It returns the fields by var.
func ParseSubmit(x *xmltree.Element, formType string) (map[string][]string, error) {
	f, err := Parse(x)
	if err != nil {
		return nil, err
	}
	if f.Type != TypeSubmit {
		return nil, ErrInvalid
	}
	if f.FormType != "" && f.FormType != formType {
		return nil, ErrFormType
	}
	return f.Values(), nil
}
