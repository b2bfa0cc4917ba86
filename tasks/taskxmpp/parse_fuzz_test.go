package taskxmpp

import (
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/tasks"
	"github.com/agentgw/agentgw/testkit/fuzzcheck"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// The fuzz inputs are XML documents whose root element is handed to the
// decoder, as the router hands over an IQ's first child. Seeds live in
// testdata/fuzz/<target>/.

// taskVocab is what rejection texts may be made of.
func taskVocab(f *testing.F) fuzzcheck.Vocab {
	return fuzzcheck.Vocabulary(f, "tasks/taskxmpp", "component", "agentproto/ns")
}

// fuzzPayload parses data the way the component does; nil means the stream
// layer would already have refused it.
func fuzzPayload(data []byte) *xmltree.Element {
	el, err := xmltree.Parse(data, xmltree.DefaultLimits)
	if err != nil {
		return nil
	}
	return el
}

// checkRejected requires the one rejection the decoders may produce: a
// bad-request stanza error whose text quotes nothing from the input.
func checkRejected(t *testing.T, err error, vocab fuzzcheck.Vocab) {
	t.Helper()
	var se *agentproto.StanzaError
	if !errors.As(err, &se) {
		t.Fatalf("rejection is %T, not a stanza error: %v", err, err)
	}
	if se.Condition != agentproto.CondBadRequest || se.Type != agentproto.TypeModify {
		t.Fatalf("rejection is %s/%s, want modify/bad-request", se.Type, se.Condition)
	}
	if w := vocab.Foreign(se.Text); w != "" {
		t.Fatalf("error text %q carries %q, which no source literal spells: reflected input", se.Text, w)
	}
}

// reparse serializes el and decodes it again: what the decoder accepted
// must survive the trip through XML unchanged.
func reparse(t *testing.T, el *xmltree.Element) *xmltree.Element {
	t.Helper()
	out, err := xmltree.Parse([]byte(el.String()), xmltree.DefaultLimits)
	if err != nil {
		t.Fatalf("rebuilt element does not parse: %v\n%s", err, el)
	}
	return out
}

func FuzzParseInvoke(f *testing.F) {
	vocab := taskVocab(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzPayload(data)
		if p == nil {
			return
		}
		inv, err := ParseInvoke(p)
		if err != nil {
			checkRejected(t, err, vocab)
			return
		}
		switch {
		case !ids.Valid(inv.RequestID):
			t.Fatalf("accepted request-id %q", inv.RequestID)
		case inv.Tool == "" || len(inv.Tool) > MaxToolNameBytes:
			t.Fatalf("accepted tool of %d bytes", len(inv.Tool))
		case !ids.ValidVersion(inv.APIVersion):
			t.Fatalf("accepted api-version %q", inv.APIVersion)
		case len(inv.ManifestHash) != 44:
			t.Fatalf("accepted manifest hash of %d bytes", len(inv.ManifestHash))
		}
		if inv.Deadline != "" {
			if _, err := xmpptimeParse(inv.Deadline); err != nil {
				t.Fatalf("accepted deadline %q: %v", inv.Deadline, err)
			}
		}
		// The XML Schema gives arguments, deadline and the hash simple
		// content: a child element would splice the text they carry.
		for _, c := range p.Children {
			if len(c.Children) > 0 && c.Name.Local != "manifest-hash" {
				t.Fatalf("accepted <%s/> with child elements", c.Name.Local)
			}
			if c.Name.Local == "manifest-hash" && len(c.Children[0].Children) > 0 {
				t.Fatalf("accepted a manifest hash with child elements")
			}
		}
		// Rebuild the invoke as a client would send it.
		el := xmltree.New(ns.Task, "invoke", "api-version", inv.APIVersion, "request-id", inv.RequestID, "tool", inv.Tool)
		el.Add(xmltree.New(ns.Task, "manifest-hash").Add(HashElement(inv.ManifestHash)))
		el.Add(xmltree.New(ns.Task, "arguments", "media-type", inv.MediaType).WithText(string(inv.Arguments)))
		if inv.Deadline != "" {
			el.Add(xmltree.New(ns.Task, "deadline").WithText(inv.Deadline))
		}
		if inv.DelegationDepth > 0 {
			el.Add(xmltree.New(ns.Delegation, "delegation", "depth", strconv.Itoa(inv.DelegationDepth)))
		}
		again, err := ParseInvoke(reparse(t, el))
		if err != nil {
			t.Fatalf("rebuilt invoke rejected: %v", err)
		}
		if !reflect.DeepEqual(normInvocation(inv), normInvocation(again)) {
			t.Fatalf("invoke changed through a rebuild:\n%+v\n%+v", inv, again)
		}
	})
}

func normInvocation(inv tasks.Invocation) tasks.Invocation {
	if len(inv.Arguments) == 0 {
		inv.Arguments = nil
	}
	return inv
}

func FuzzParseProvideInput(f *testing.F) {
	vocab := taskVocab(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzPayload(data)
		if p == nil {
			return
		}
		in, err := ParseProvideInput(p)
		if err != nil {
			checkRejected(t, err, vocab)
			return
		}
		if !ids.Valid(in.TaskID) || !ids.Valid(in.RequestID) || in.ExpectedRevision < 0 {
			t.Fatalf("accepted %+v", in)
		}
		if len(p.Children[0].Children) > 0 {
			t.Fatalf("accepted <input/> with child elements")
		}
		el := xmltree.New(ns.Task, "provide-input",
			"expected-revision", strconv.FormatInt(in.ExpectedRevision, 10),
			"request-id", in.RequestID, "task-id", in.TaskID)
		el.Add(xmltree.New(ns.Task, "input", "media-type", in.MediaType).WithText(string(in.Input)))
		again, err := ParseProvideInput(reparse(t, el))
		if err != nil {
			t.Fatalf("rebuilt provide-input rejected: %v", err)
		}
		if in.TaskID != again.TaskID || in.RequestID != again.RequestID || in.ExpectedRevision != again.ExpectedRevision ||
			in.MediaType != again.MediaType || string(in.Input) != string(again.Input) {
			t.Fatalf("provide-input changed through a rebuild:\n%+v\n%+v", in, again)
		}
	})
}

func FuzzParseCancel(f *testing.F) {
	vocab := taskVocab(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzPayload(data)
		if p == nil {
			return
		}
		c, err := ParseCancel(p)
		if err != nil {
			checkRejected(t, err, vocab)
			return
		}
		if !ids.Valid(c.TaskID) || c.ExpectedRevision < 0 || len(c.Reason) > 4096 || (!c.HasReason && c.Reason != "") {
			t.Fatalf("accepted %+v", c)
		}
		el := xmltree.New(ns.Task, "cancel", "expected-revision", strconv.FormatInt(c.ExpectedRevision, 10), "task-id", c.TaskID)
		if c.HasReason {
			el.Add(xmltree.New(ns.Task, "reason").WithText(c.Reason))
		}
		again, err := ParseCancel(reparse(t, el))
		if err != nil {
			t.Fatalf("rebuilt cancel rejected: %v", err)
		}
		// The reason is part of the cancellation's replay identity: it must
		// survive byte for byte.
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("cancel changed through a rebuild:\n%+v\n%+v", c, again)
		}
	})
}
