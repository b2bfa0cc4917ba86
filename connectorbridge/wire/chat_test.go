package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentgw/agentgw/testkit/fuzzcheck"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func TestDecodeChatMessage(t *testing.T) {
	m, err := DecodeChatMessage(json.RawMessage(`{"message_id":"m1","conversation_id":"c1","text":"a\u0000b\u001bc <b>&amp;",
		"sender":{"display_name":"Bo\u0007b"},"files":[{"download_url":"files/refs/x","filename":"../../etc/passwd","mime_type":"text/plain\r\nX: y"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != "a\uFFFDb\uFFFDc <b>&amp;" || m.Sender.DisplayName != "Bo\uFFFDb" {
		t.Fatalf("text %q name %q", m.Text, m.Sender.DisplayName)
	}
	if m.Files[0].Filename != "passwd" || m.Files[0].MimeType != "" {
		t.Fatalf("file %+v", m.Files[0])
	}
	for raw, want := range map[string]string{
		`[]`:                              "not a valid object",
		`{"text":"x"}`:                    "message_id",
		`{"message_id":"a b","text":"x"}`: "message_id",
		`{"message_id":"m","text":"  "}`:  "needs text or a file",
		`{"message_id":"m","files":[{}]}`: "needs download_url",
		`{"message_id":"m","text":"x","conversation_id":"c\n"}`: "conversation_id",
	} {
		if _, err := DecodeChatMessage(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	big, _ := json.Marshal(ChatMessage{MessageID: "m", Text: strings.Repeat("x", MaxChatText+1)})
	if _, err := DecodeChatMessage(big); !errors.Is(err, ErrChatTooLarge) {
		t.Errorf("oversize text: %v", err)
	}
	many, _ := json.Marshal(ChatMessage{MessageID: "m", Text: "x", Files: make([]ChatFile, MaxChatFiles+1)})
	if _, err := DecodeChatMessage(many); !errors.Is(err, ErrChatTooLarge) {
		t.Errorf("too many files: %v", err)
	}
}

// FuzzDecodeChatMessage: whatever the connector sends, an accepted
// message carries only XML-safe text and safe file names, within the
// limits, and a refusal quotes nothing from the payload.
func FuzzDecodeChatMessage(f *testing.F) {
	for _, s := range []string{`{"message_id":"m1","text":"hi"}`, `{"message_id":"m","files":[{"download_url":"/f","filename":"a/b"}]}`,
		`{"message_id":"m","text":"\u0000\ud800"}`} {
		f.Add([]byte(s))
	}
	vocab := fuzzcheck.Vocabulary(f, "connectorbridge/wire")
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeChatMessage(data)
		if err != nil {
			if w := vocab.Foreign(err.Error()); w != "" {
				t.Fatalf("error %q carries %q: reflected input", err, w)
			}
			return
		}
		if !ValidWireID(m.MessageID) || len(m.Text) > MaxChatText || len(m.Files) > MaxChatFiles {
			t.Fatalf("accepted %+v", m)
		}
		for _, s := range []string{m.Text, m.Sender.DisplayName, m.Sender.ID} {
			if !utf8.ValidString(s) || !xmltree.ValidText(s) {
				t.Fatalf("text not XML-safe: %q", s)
			}
		}
		for _, fl := range m.Files {
			if fl.Filename == "" || strings.ContainsAny(fl.Filename, "/\\\x00") || !xmltree.ValidText(fl.Filename) {
				t.Fatalf("file name %q", fl.Filename)
			}
		}
	})
}

// The seeds carry the sender at the top of the payload (seeds/000 §8.21);
// that is read first, a "sender" object second.
func TestDecodeChatMessageSeedSender(t *testing.T) {
	m, err := DecodeChatMessage([]byte(`{"message_id":"m1","text":"x","sender_id":"wx_user_1","display_name":"Al\u0007ex",
		"sender":{"id":"other","display_name":"Other"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Sender.DisplayName != "Al\uFFFDex" || m.Sender.ID != "wx_user_1" || m.DisplayName != "" {
		t.Fatalf("sender %+v", m)
	}
	m, err = DecodeChatMessage([]byte(`{"message_id":"m2","text":"x","sender":{"display_name":"Bob"}}`))
	if err != nil || m.Sender.DisplayName != "Bob" {
		t.Fatalf("nested sender %+v %v", m, err)
	}
}
