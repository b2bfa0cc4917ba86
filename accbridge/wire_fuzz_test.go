package accbridge

import (
	"strings"
	"testing"
)

// FuzzDecodeFrame: any input is decoded or refused with one of the fixed
// sentences, never a panic, and no error echoes the input.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"register","connector_id":"x","version":"1.0.0","host":"h","adapters":["hermes"]}`,
		`{"type":"run_event","run_id":"r","event":"progress","payload":{"percent":50}}`,
		`{"type":"capabilities","agents":[{"agent_id":"a","tools":["t"]}]}`,
		`{"type":"error","code":4001,"message":"m","run_id":"r"}`,
		`[]`, `{"type":1}`, `{"type":"x","run_id":"` + strings.Repeat("a", 200) + `"}`, `{{{`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := decodeFrame(data, 1<<16)
		if err != nil {
			if len(data) > 8 && strings.Contains(err.Error(), string(data)) {
				t.Fatalf("the error echoes the input: %v", err)
			}
			return
		}
		if fr.Type == "" || len(fr.RunID) > maxIDLen {
			t.Fatalf("accepted a frame without type or with a long id: %+v", fr)
		}
		_ = validAgents(fr.Agents, 1000)
	})
}
