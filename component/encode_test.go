package component

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stream"

	"github.com/agentgw/agentgw/agentproto/ns"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// melliumSession is a real mellium session on a component stream whose
// output goes to out: the writer before the burst writer.
func melliumSession(t testing.TB, out *bytes.Buffer) *xmpp.Session {
	t.Helper()
	rw := struct {
		io.Reader
		io.Writer
	}{strings.NewReader(""), out}
	neg := func(_ context.Context, _, o *stream.Info, _ *xmpp.Session, _ interface{}) (xmpp.SessionState, io.ReadWriter, interface{}, error) {
		o.XMLNS = NSComponent
		return xmpp.Ready | xmpp.Authn, nil, nil, nil
	}
	d := jid.MustParse("agents.example.test")
	sess, err := xmpp.NewSession(context.Background(), d, d, rw, 0, neg)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	return sess
}

// melliumBytes is what the writer sent before the burst writer: el's
// tokens through a real mellium session's Send (encoding/xml behind
// mellium's stanza encoder), on a component stream.
func melliumBytes(t testing.TB, el *xmltree.Element) []byte {
	t.Helper()
	var out bytes.Buffer
	sess := melliumSession(t, &out)
	if err := sess.Send(context.Background(), el.Tokens()); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func encodeCases() []*xmltree.Element {
	ev := xmltree.New(ns.Task, "event", "event-id", "evt-1", "revision", "2", "task-id", "task-1", "type", "completed")
	ev.Text = `{"result":{"content":[{"text":"Echo: <hi> & 'you'","type":"text"}]}}`
	msg := NewMessage("evt-1", jid.MustParse("echo@agents.example.test"), jid.MustParse("alice@example.test/r"), ev)
	msg.SetLang("en")
	acc := NewIQ("result", "q-1", jid.MustParse("echo@agents.example.test"), jid.MustParse("alice@example.test/r"),
		xmltree.New(ns.Task, "accepted", "task-id", "t", "created", "2026-12-03T06:08:14.81607596Z"))
	odd := NewIQ("error", "q\t2\n", jid.MustParse("echo@agents.example.test"), jid.MustParse("alice@example.test/r"),
		xmltree.New(ns.Stanzas, "error", "type", "cancel").Add(
			xmltree.New(ns.Stanzas, "item-not-found"),
			xmltree.New(ns.Stanzas, "text").WithText("bad \x00 \xff \r\n \uFFFE \U0001F600 ]]> \"q\"")))
	plain := xmltree.New("", "message", "id", "m1", "to", "bob@example.test")
	plain.Add(xmltree.New("", "body").WithText("no namespace"), xmltree.New("urn:x", "x").Add(xmltree.New("", "y")))
	return []*xmltree.Element{msg, acc, odd, plain}
}

// TestAppendStanzaMatchesMellium holds the burst writer's encoding to the
// bytes mellium wrote for the same stanzas.
func TestAppendStanzaMatchesMellium(t *testing.T) {
	for _, el := range encodeCases() {
		got, ok := appendStanza([]byte("prefix"), el)
		if !ok {
			t.Fatalf("%s: not encoded", el)
		}
		want := melliumBytes(t, el)
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Errorf("encoding differs\n got: %s\nwant: %s", got[len("prefix"):], want)
		}
	}
}

// TestAppendStanzaFallsBack: shapes mellium would change (a missing or
// empty id, an empty from, foreign attribute namespaces, xmlns attributes)
// are left to mellium.
func TestAppendStanzaFallsBack(t *testing.T) {
	noID := xmltree.New(NSComponent, "presence", "to", "a@example.test")
	emptyFrom := xmltree.New(NSComponent, "message", "id", "1", "from", "")
	foreign := xmltree.New(NSComponent, "message", "id", "1")
	foreign.Add(&xmltree.Element{Name: xml.Name{Space: "urn:x", Local: "x"}, Attr: []xml.Attr{{Name: xml.Name{Space: "urn:y", Local: "a"}, Value: "v"}}})
	xmlnsAttr := xmltree.New(NSComponent, "message", "id", "1")
	xmlnsAttr.Add(xmltree.New("urn:x", "x", "xmlns", "urn:x"))
	notStanza := xmltree.New(NSComponent, "handshake", "id", "1")
	for _, el := range []*xmltree.Element{noID, emptyFrom, foreign, xmlnsAttr, notStanza} {
		if out, ok := appendStanza([]byte("p"), el); ok || string(out) != "p" {
			t.Errorf("%s: encoded as %q, want the fallback", el, out)
		}
	}
}

func FuzzAppendStanza(f *testing.F) {
	f.Add("hello", "evt-1", "en", "urn:xmpp:agent-task:0")
	f.Add("a\x00b\xffc\r\n\t<>&'\"", "i\"d", "", "")
	f.Fuzz(func(t *testing.T, text, id, lang, space string) {
		if !utf8Valid(space) || strings.ContainsAny(space, "\x00") {
			return
		}
		el := xmltree.New(NSComponent, "message", "id", id, "to", "a@example.test")
		if lang != "" {
			el.SetLang(lang)
		}
		el.Add(xmltree.New(space, "event", "k", text).WithText(text))
		got, ok := appendStanza(nil, el)
		if !ok {
			if id != "" {
				t.Fatalf("not encoded: %s", el)
			}
			return
		}
		if want := melliumBytes(t, el); !bytes.Equal(got, want) {
			t.Fatalf("encoding differs\n got: %q\nwant: %q", got, want)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

func BenchmarkEncodeStanza(b *testing.B) {
	el := encodeCases()[0]
	b.Run("mellium", func(b *testing.B) {
		var out bytes.Buffer
		sess := melliumSession(b, &out)
		b.ReportAllocs()
		for b.Loop() {
			out.Reset()
			if err := sess.Send(context.Background(), el.Tokens()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = appendStanza(buf[:0], el)
		}
	})
}

// cutConn accepts limit bytes, then fails every write.
type cutConn struct {
	net.Conn // nil: only Write, Close and deadlines are used
	limit    int
	got      bytes.Buffer
	closed   bool
}

func (c *cutConn) Write(p []byte) (int, error) {
	n := min(len(p), c.limit-c.got.Len())
	c.got.Write(p[:n])
	if n < len(p) {
		return n, errors.New("connection reset")
	}
	return n, nil
}
func (c *cutConn) Close() error                     { c.closed = true; return nil }
func (c *cutConn) SetWriteDeadline(time.Time) error { return nil }

// TestBurstWriteFailureCarries: a write that fails part way keeps every
// stanza not wholly written, in order, for the next stream; the ones
// before it count as sent.
func TestBurstWriteFailureCarries(t *testing.T) {
	var items []outItem
	var ends []int
	var all []byte
	for i := range 4 {
		el := NewMessage(fmt.Sprintf("m%d", i), jid.MustParse("echo@agents.example.test"), jid.MustParse("a@example.test"),
			xmltree.New("urn:x", "x").WithText(strings.Repeat("y", 100)))
		items = append(items, outItem{el: el})
		all, _ = appendStanza(all, el)
		ends = append(ends, len(all))
	}
	conn := &cutConn{limit: ends[1] + 10} // the third stanza is cut
	sess, err := xmpp.NewSession(context.Background(), jid.MustParse("agents.example.test"), jid.MustParse("agents.example.test"),
		struct {
			io.Reader
			io.Writer
		}{strings.NewReader(""), io.Discard}, 0,
		func(_ context.Context, _, o *stream.Info, _ *xmpp.Session, _ interface{}) (xmpp.SessionState, io.ReadWriter, interface{}, error) {
			o.XMLNS = NSComponent
			return xmpp.Ready | xmpp.Authn, nil, nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	c := &Component{}
	w := &burstWriter{c: c, sess: sess, conn: conn}
	if w.write(context.Background(), items) {
		t.Fatal("write reported success")
	}
	if !conn.closed {
		t.Error("connection not dropped")
	}
	if got := c.sent.Load(); got != 2 {
		t.Errorf("sent %d, want 2", got)
	}
	if len(c.carry) != 2 || c.carry[0].el != items[2].el || c.carry[1].el != items[3].el {
		t.Fatalf("carry %v, want the third and fourth stanzas", c.carry)
	}
	if !bytes.Equal(conn.got.Bytes(), all[:ends[1]+10]) {
		t.Error("bytes written differ from the encoded burst")
	}
	// The next stream writes the carried stanzas first, whole.
	conn2 := &cutConn{limit: 1 << 20}
	w2 := &burstWriter{c: c, sess: sess, conn: conn2}
	if !w2.write(context.Background(), c.carry) {
		t.Fatal("second write failed")
	}
	if !bytes.Equal(conn2.got.Bytes(), all[ends[1]:]) {
		t.Errorf("carried bytes\n got %s\nwant %s", conn2.got.Bytes(), all[ends[1]:])
	}
}
