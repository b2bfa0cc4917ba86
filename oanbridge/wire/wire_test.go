package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseSeq(t *testing.T) {
	for _, ok := range []string{"0", "9", "10", "9223372036854775807"} {
		if _, err := ParseSeq(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-1", "+1", "01", "1e3", "9223372036854775808", "99999999999999999999", " 1", "1 ", "0x10"} {
		if _, err := ParseSeq(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	a, _ := ParseSeq("9")
	b, _ := ParseSeq("10")
	if !(a < b) {
		t.Fatal(`"9" is not below "10"`)
	}
}

func env(t *testing.T, s string) *Envelope {
	t.Helper()
	e, err := ParseEnvelope([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return e
}

func TestEnvelopeAndReply(t *testing.T) {
	good := `{"v":1,"seq":"10","eventId":"e1","type":"match_request","goferId":"g1","source":"platform","payload":{"requestId":"r1"},"reply":{"method":"POST","path":"/api/v1/match-requests/r1/decision"},"extra":"ignored"}`
	e := env(t, good)
	if e.Seq != 10 || e.Type != TypeMatchRequest {
		t.Fatalf("%+v", e)
	}
	if rel, err := CheckReply(e); err != nil || rel != "/match-requests/r1/decision" {
		t.Fatalf("reply %q %v", rel, err)
	}
	for _, p := range []string{
		"https://evil.example/api/v1/match-requests/r1/decision",
		"//evil.example/api/v1/match-requests/r1/decision",
		"/api/v1/match-requests/r1/../r2/decision",
		"/api/v1/match-requests/r2/decision",
		"/api/v1/match-requests/r1/decision?x=1",
		"/api/v1/match-requests/r1%2f/decision",
		"/api/v2/match-requests/r1/decision",
		"api/v1/match-requests/r1/decision",
	} {
		e.Reply.Path = p
		if _, err := CheckReply(e); err == nil {
			t.Errorf("reply path %q accepted", p)
		}
	}
	for _, bad := range []string{
		`{"v":2,"seq":"1","eventId":"e","type":"gofer_message","payload":{}}`,
		`{"v":1,"seq":1,"eventId":"e","type":"gofer_message","payload":{}}`,
		`{"v":1,"seq":"0","eventId":"e","type":"gofer_message","payload":{}}`,
		`{"v":1,"seq":"1","type":"gofer_message","payload":{}}`,
		`{"v":1,"seq":"1","eventId":"a/b","type":"gofer_message","payload":{}}`,
		`{"v":1,"seq":"1","eventId":"e","type":"unknown","payload":{}}`,
		`{"v":1,"seq":"1","eventId":"e","type":"gofer_message","goferId":"../x","payload":{}}`,
		`{"v":1,"seq":"1","eventId":"e","type":"gofer_message","payload":[]}`,
		`[1,2]`, `{"v":1`, `{"v":1,"seq":"1","eventId":"e","type":"gofer_message","payload":{"content":"` + strings.Repeat("x", MaxEnvelopeBytes) + `"}}`,
	} {
		if _, err := ParseEnvelope([]byte(bad)); err == nil {
			t.Errorf("accepted %.80s", bad)
		} else if strings.Contains(err.Error(), "a/b") || strings.Contains(err.Error(), "../x") {
			t.Errorf("error reflects the payload: %v", err)
		}
	}
}

func TestConstraints(t *testing.T) {
	base := `{"v":1,"seq":"1","eventId":"e","type":"gofer_question","goferId":"g","source":"own_gofer","payload":{},"responseConstraints":`
	c := env(t, base+`{"format":"enum","enumOptions":["a","b"],"maxLength":5,"future":1}}`).Constraints
	if c == nil || c.Format != "enum" || len(c.EnumOptions) != 2 || c.MaxLength != 5 {
		t.Fatalf("%+v", c)
	}
	for _, bad := range []string{`{"format":"enum"}`, `{"format":"enum","enumOptions":["a","a"]}`, `{"format":"json_schema"}`, `{"format":"teleport"}`, `{"format":"freestyle","maxLength":-3}`, `"x"`} {
		e := env(t, base+bad+`}`)
		if e.ConstraintsErr == nil {
			t.Errorf("constraints %s accepted", bad)
		}
	}
}

// FuzzParseEnvelope: any input is an envelope or a clear error, never a
// panic, and an accepted one has a usable seq, id and type.
func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"v":1,"seq":"10","eventId":"e1","type":"match_request","goferId":"g1","source":"platform","payload":{"requestId":"r1"},"reply":{"method":"POST","path":"/api/v1/match-requests/r1/decision"}}`))
	f.Add([]byte(`{"v":1,"seq":"1","eventId":"e","type":"gofer_question","goferId":"g","payload":{},"responseConstraints":{"format":"json_schema","jsonSchema":{"$ref":"http://x"}}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEnvelope(data)
		if err != nil {
			return
		}
		if e.Seq == 0 || !ValidID(e.EventID) || !knownTypes[e.Type] {
			t.Fatalf("accepted a bad envelope: %+v", e)
		}
		CheckReply(e)
	})
}

func BenchmarkParseEnvelope(b *testing.B) {
	data := []byte(`{"v":1,"seq":"12345","eventId":"2b1f6a9e-1d1c-4c55-9d7f-0c1f5a7e9b10","type":"gofer_message","goferId":"g-1","chatId":"c-1","source":"own_gofer","reply":{"method":"POST","path":"/api/v1/gofers/g-1/chat/messages"},"payload":{"messageId":"m-1","content":"Hello there, this is a Gofer message of ordinary length.","createdAt":"2026-12-02T00:00:00Z"},"createdAt":"2026-12-02T00:00:00Z"}`)
	b.Run("ParseEnvelope", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := ParseEnvelope(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Baseline: plain encoding/json into a map, without limits or checks.
	b.Run("baseline-json.Unmarshal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
