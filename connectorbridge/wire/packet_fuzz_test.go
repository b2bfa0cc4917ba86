package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentgw/agentgw/testkit/fuzzcheck"
)

// FuzzDecodePacket feeds data-plane text messages (seeds in
// testdata/fuzz/FuzzDecodePacket) to the envelope decoder. Rejections quote
// nothing from the packet; accepted envelopes hold the §7 invariants and
// decode to the same packet after being written back out.
func FuzzDecodePacket(f *testing.F) {
	vocab := fuzzcheck.Vocabulary(f, "connectorbridge/wire")
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePacket(data)
		if err != nil {
			if w := vocab.Foreign(err.Error()); w != "" {
				t.Fatalf("error %q carries %q, which no source literal spells: reflected input", err, w)
			}
			return
		}
		switch {
		case p.Schema != PacketSchema, !ValidWireID(p.PacketID), !ValidType(p.Type):
			t.Fatalf("accepted envelope %+v", p)
		case p.RequestID != "" && !ValidWireID(p.RequestID), p.ReplyTo != "" && !ValidWireID(p.ReplyTo),
			p.ConnectorChannelID != "" && !ValidWireID(p.ConnectorChannelID):
			t.Fatalf("accepted malformed identifiers %+v", p)
		case p.Error != nil && !ValidCode(p.Error.Code):
			t.Fatalf("error code %q reached the caller unchecked", p.Error.Code)
		}
		if len(p.Payload) > 0 && !json.Valid(p.Payload) {
			t.Fatalf("payload is not JSON")
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := DecodePacket(out)
		if err != nil {
			t.Fatalf("written packet rejected: %v\n%s", err, out)
		}
		if !samePacket(p, again) {
			t.Fatalf("packet changed through a round trip:\n%+v\n%+v", p, again)
		}
	})
}

func samePacket(a, b *Packet) bool {
	// Payloads compare by value: encoding/json writes '&', '<' and '>' in
	// strings as \u0026, \u003c and \u003e, the same JSON text.
	normal := func(r json.RawMessage) string {
		d := json.NewDecoder(bytes.NewReader(r))
		d.UseNumber()
		var v any
		if len(r) == 0 || d.Decode(&v) != nil {
			return string(r)
		}
		out, err := json.Marshal(v)
		if err != nil {
			return string(r)
		}
		return string(out)
	}
	ea, eb := a.Error, b.Error
	if (ea == nil) != (eb == nil) || ea != nil && *ea != *eb {
		return false
	}
	return a.Schema == b.Schema && a.PacketID == b.PacketID && a.RequestID == b.RequestID && a.ReplyTo == b.ReplyTo &&
		a.ConnectorChannelID == b.ConnectorChannelID && a.Type == b.Type && a.Time == b.Time &&
		normal(a.Payload) == normal(b.Payload)
}
