package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ndjsonCases are frames a server may send, valid and not.
var ndjsonCases = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}`,
	`{"jsonrpc":"2.0","id":"abc","result":{}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"bad","data":{"x":1}}}`,
	`{"jsonrpc":"2.0","id":7,"error":null,"result":{"a":1}}`,
	`{"jsonrpc":"2.0","id":7,"result":null}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
	`{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"?"}}`,
	`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":3,"method":null}`,
	`{"jsonrpc":"2.0","id":3,"method":"x","params":null}`,
	`{"jsonrpc":"2.0","id":2.5,"result":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"n"}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":true,"result":{}}`,
	`{"jsonrpc":"2.0","id":{},"result":{}}`,
	`{"jsonrpc":2,"id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":5}`,
	`{"jsonrpc":"2.0","id":1,"error":"oops"}`,
	`[]`,
	`"just a string"`,
	`{"jsonrpc":"2.0","id":1,"result":{}`,
	`{"jsonrpc":"2.0","id":1,"Result":{"x":1}}`,
	`{"jsonrpc":"2.0","ID":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"Method":"m"}`,
	`{"jsonrpc":"2.0","id":12345678901,"result":{}}`,
	`{"jsonrpc":"2.0","id":-4,"result":{"a":[1,2,{"b":"c"}]}}`,
}

// TestDecodeMessageMatchesSDK: the one-pass decoder takes what the SDK's
// jsonrpc.DecodeMessage takes, to the same message, and refuses what it
// refuses.
func TestDecodeMessageMatchesSDK(t *testing.T) {
	t.Parallel()
	for _, c := range ndjsonCases {
		compareDecode(t, []byte(c))
	}
}

func compareDecode(t *testing.T, data []byte) {
	t.Helper()
	want, werr := jsonrpc.DecodeMessage(data)
	got, gerr := decodeMessage(data)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: sdk error %v, ours %v", data, werr, gerr)
	}
	if werr != nil {
		return
	}
	we, err1 := jsonrpc.EncodeMessage(want)
	ge, err2 := jsonrpc.EncodeMessage(got)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: encode: %v %v", data, err1, err2)
	}
	if !bytes.Equal(we, ge) {
		t.Fatalf("%s:\n sdk  %s\n ours %s", data, we, ge)
	}
	wr, wok := want.(*jsonrpc.Response)
	gr, gok := got.(*jsonrpc.Response)
	if wok != gok {
		t.Fatalf("%s: kinds differ: %T %T", data, want, got)
	}
	if wok && ((wr.Error == nil) != (gr.Error == nil) || !bytes.Equal(wr.Result, gr.Result)) {
		t.Fatalf("%s: responses differ: %+v %+v", data, wr, gr)
	}
}

// FuzzDecodeMessage holds the one-pass decoder to the SDK's on any single
// JSON value (what the framing decoder hands it; the SDK's ignores bytes
// after the first value, which framing never leaves there).
func FuzzDecodeMessage(f *testing.F) {
	for _, c := range ndjsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 || !json.Valid(data) {
			return
		}
		compareDecode(t, data)
	})
}

// TestNDJSONConnFraming: frames split anywhere, spread over lines or
// batched arrive whole and in order; trailing data after a value, and a
// frame over the limit, end the connection with an error; Close unblocks
// a pending Read.
func TestNDJSONConnFraming(t *testing.T) {
	t.Parallel()
	read := func(t *testing.T, input string, limit int) ([]jsonrpc.Message, error) {
		t.Helper()
		c := newNDJSONConn(io.NopCloser(strings.NewReader(input)), nopWriteCloser{io.Discard}, limit, nil, nil)
		defer c.Close()
		var out []jsonrpc.Message
		for {
			m, err := c.Read(context.Background())
			if err != nil {
				return out, err
			}
			out = append(out, m)
		}
	}
	msgs, err := read(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\n  \"result\":{}}\r\n\n"+
		`[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":"b","method":"b"}]`+"\n"+
		`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`+"\n", 1<<20)
	if err != io.EOF || len(msgs) != 4 {
		t.Fatalf("got %d messages, %v", len(msgs), err)
	}
	if r, ok := msgs[0].(*jsonrpc.Response); !ok || r.ID.Raw() != int64(1) {
		t.Fatalf("first: %#v", msgs[0])
	}
	if r, ok := msgs[1].(*jsonrpc.Request); !ok || r.Method != "a" || r.IsCall() {
		t.Fatalf("second: %#v", msgs[1])
	}
	if r, ok := msgs[2].(*jsonrpc.Request); !ok || r.Method != "b" || r.ID.Raw() != "b" {
		t.Fatalf("third: %#v", msgs[2])
	}
	if r, ok := msgs[3].(*jsonrpc.Response); !ok || r.Error == nil {
		t.Fatalf("fourth: %#v", msgs[3])
	}

	if msgs, err := read(t, `{"jsonrpc":"2.0","id":1,"result":{}} x`+"\n", 1<<20); err == nil || err == io.EOF || len(msgs) != 0 {
		t.Fatalf("trailing data: %d messages, %v", len(msgs), err)
	}
	// A frame over the limit fails only the call it answers, whether its
	// id comes first or last (the TS SDK writes it last), and reading
	// goes on with the next line.
	pad := strings.Repeat(`x\"{[`, 1024)
	big := `{"jsonrpc":"2.0","id":2,"result":{"t":"` + pad + `","n":[1,{"id":9}]}}` + "\n" +
		`{"result":{"t":"` + pad + `"},"jsonrpc":"2.0","id":"s-3"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"t":"` + pad + `"}}` + "\n"
	msgs, err = read(t, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"+big+`{"jsonrpc":"2.0","id":4,"result":{}}`+"\n", 1024)
	if err != io.EOF || len(msgs) != 4 {
		t.Fatalf("frames over the limit: %d messages, %v", len(msgs), err)
	}
	for i, want := range []any{int64(2), "s-3"} {
		r, ok := msgs[1+i].(*jsonrpc.Response)
		var werr *jsonrpc.Error
		if !ok || r.ID.Raw() != want || !errors.As(r.Error, &werr) || !tooLarge(werr) {
			t.Fatalf("oversize answer %d: %#v", i, msgs[1+i])
		}
	}
	if r, ok := msgs[3].(*jsonrpc.Response); !ok || r.ID.Raw() != int64(4) || r.Error != nil {
		t.Fatalf("the frame after: %#v", msgs[3])
	}
	// A request over the limit is refused to the server.
	var wrote strings.Builder
	rc := newNDJSONConn(io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"m":"`+pad+`"}}`+"\n")), nopWriteCloser{&wrote}, 1024, nil, nil)
	if _, err := rc.Read(context.Background()); err != io.EOF {
		t.Fatalf("oversize request: %v", err)
	}
	rc.Close()
	if !strings.Contains(wrote.String(), `"id":7,"error":{"code":-32600`) {
		t.Fatalf("oversize request answered %q", wrote.String())
	}
	if msgs, err := read(t, "[]\n", 1024); err == nil || err == io.EOF || len(msgs) != 0 {
		t.Fatalf("empty batch: %d messages, %v", len(msgs), err)
	}

	pr, pw := io.Pipe()
	defer pw.Close()
	c := newNDJSONConn(pr, nopWriteCloser{io.Discard}, 1024, nil, nil)
	done := make(chan error, 1)
	go func() { _, err := c.Read(context.Background()); done <- err }()
	c.Close()
	if err := <-done; err != io.EOF && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Read after Close: %v", err)
	}
}

// TestNDJSONConnWrite: one frame per line, as the SDK writes them.
func TestNDJSONConnWrite(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	c := newNDJSONConn(io.NopCloser(strings.NewReader("")), nopWriteCloser{&buf}, 1024, nil, nil)
	id, _ := jsonrpc.MakeID(float64(3))
	if err := c.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`+"\n"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// BenchmarkDecodeFrame decodes an echo call's response frame with the
// SDK's jsonrpc.DecodeMessage (its connection also tries the frame as a
// batch first, a second decoder of the same cost) and with decodeMessage,
// in the same run.
func BenchmarkDecodeFrame(b *testing.B) {
	frame := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"Echo: hello"}]}}`)
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonrpc.DecodeMessage(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeMessage(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
}
