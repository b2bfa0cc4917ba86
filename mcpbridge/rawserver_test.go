package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets the test binary double as a scripted stdio MCP server that
// speaks raw JSON-RPC: it does what a well-behaved SDK server would refuse
// to (sampling without the capability, URL elicitation, tool pages with
// duplicates and foreign schema dialects, exact bytes in results).
func TestMain(m *testing.M) {
	if os.Getenv("MCPBRIDGE_RAW_SERVER") == "1" {
		os.Exit(rawServer(os.Stdin, os.Stdout, os.Stderr, os.Getenv("RAW_SECRET")))
	}
	os.Exit(m.Run())
}

const rawToolsPage1 = `[
 {"name":"plain","title":"Plain","description":"Plain tool.","inputSchema":{"type":"object","properties":{"v":{"type":"string"}}},
  "annotations":{"readOnlyHint":true,"title":"Plain!"},"execution":{"taskSupport":"optional"},"_meta":{"x.example/k":1}},
 {"name":"tuple","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"p":{"type":"integer"}},
  "properties":{"pair":{"type":"array","items":[{"$ref":"#/definitions/p"},{"type":"string"}],"additionalItems":false}},
  "dependencies":{"pair":["other"]}}}
]`

const rawToolsPage2 = `[
 {"name":"secret-echo","description":"Echoes RAW_SECRET.","inputSchema":{"type":"object"}},
 {"name":"plain","description":"duplicate name","inputSchema":{"type":"object"}},
 {"name":"rpc-error","inputSchema":{"type":"object"}},
 {"name":"sample","inputSchema":{"type":"object"}},
 {"name":"roots","inputSchema":{"type":"object"}},
 {"name":"url-elicit","inputSchema":{"type":"object"}}
]`

func rawToolsPage3(added bool) string {
	long := strings.Repeat("d", maxToolDesc+10)
	s := `[
 {"name":"odd-dialect","inputSchema":{"$schema":"https://example.com/my-dialect","type":"object"}},
 {"name":"iconic","description":"` + long + `","icons":[{"src":"https://example.com/i.png"}],"inputSchema":{"type":"object"}},
 {"name":"add","inputSchema":{"type":"object"}},
 {"name":"die","inputSchema":{"type":"object"}},
 {"name":"late-ask","inputSchema":{"type":"object"}},
 {"name":"after-cancel","inputSchema":{"type":"object"}},
 {"name":"form-ask","inputSchema":{"type":"object"}}`
	if added {
		s += `,
 {"name":"added","inputSchema":{"type":"object"}}`
	}
	return s + "]"
}

// rawExit ends rawServer with an exit code from anywhere inside it.
type rawExit int

// rawServer serves one client on stdin and stdout (or in-memory pipes) and
// returns the exit code of the process it plays: 0 at end of input, 3 for
// the die tool.
func rawServer(stdin io.Reader, stdout, stderr io.Writer, secret string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(rawExit)
			if !ok {
				panic(r)
			}
			code = int(c)
		}
	}()
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(stdout)
	send := func(s string) {
		// stdio framing: one message per line, no embedded newlines.
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(s)); err != nil {
			panic(err)
		}
		out.Write(c.Bytes())
		out.WriteByte('\n')
		out.Flush()
	}
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	read := func() (msg, bool) {
		for in.Scan() {
			var m msg
			if json.Unmarshal(in.Bytes(), &m) == nil {
				return m, true
			}
		}
		return msg{}, false
	}
	// ask sends a server request and waits for its response.
	n := 0
	ask := func(method, params string) msg {
		n++
		id := fmt.Sprintf(`"s%d"`, n)
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
		for {
			m, ok := read()
			if !ok {
				panic(rawExit(0))
			}
			if string(m.ID) == id && m.Method == "" {
				return m
			}
		}
	}
	fmt.Fprintf(stderr, "raw server starting with key %s\n", secret)
	added := false
	// late is the id of a late-ask call the server keeps running after
	// the client cancelled it (cancellation is advisory in MCP).
	var late json.RawMessage
	const colorForm = `{"message":"%s","requestedSchema":{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}}`
	for {
		m, ok := read()
		if !ok {
			return 0
		}
		reply := func(result string) { send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`) }
		fail := func(code int, text string) {
			e, _ := json.Marshal(text)
			send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, m.ID, code, e))
		}
		switch m.Method {
		case "":
		case "initialize":
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(m.Params, &p)
			reply(`{"protocolVersion":"` + p.ProtocolVersion + `","capabilities":{"tools":{"listChanged":true},"prompts":{},"experimental":{"x":{}}},"serverInfo":{"name":"raw","version":"9"}}`)
		case "tools/list":
			var p struct {
				Cursor string `json:"cursor"`
			}
			json.Unmarshal(m.Params, &p)
			switch p.Cursor {
			case "":
				reply(`{"tools":` + rawToolsPage1 + `,"nextCursor":"p2"}`)
			case "p2":
				reply(`{"tools":` + strings.Replace(rawToolsPage2, "RAW_SECRET", secret, 1) + `,"nextCursor":"p3"}`)
			case "p3":
				reply(`{"tools":` + rawToolsPage3(added) + `}`)
			default:
				fail(-32602, "bad cursor")
			}
		case "tools/call":
			var p struct {
				Name string `json:"name"`
			}
			json.Unmarshal(m.Params, &p)
			switch p.Name {
			case "plain":
				reply(`{"content":[{"type":"text","text":"ok","annotations":{"audience":["user"],"priority":0.5},"_meta":{"m":1},"x-extra":true}],"structuredContent":{"a":[1,2.5,"x"]},"isError":false,"_meta":{"r":2}}`)
			case "secret-echo":
				reply(`{"content":[{"type":"text","text":"the key is ` + secret + `"}]}`)
			case "rpc-error":
				fail(-32000, "boom "+secret)
			case "sample":
				r := ask("sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}`)
				if r.Error != nil {
					fail(-32603, "sampling failed: "+string(r.Error))
				} else {
					reply(`{"content":[{"type":"text","text":"sampled"}]}`)
				}
			case "roots":
				r := ask("roots/list", `{}`)
				if r.Error != nil {
					fail(-32603, "roots failed")
				} else {
					reply(`{"content":[{"type":"text","text":"rooted"}]}`)
				}
			case "url-elicit":
				r := ask("elicitation/create", `{"mode":"url","message":"Open this","url":"https://example.com/auth","elicitationId":"e1"}`)
				if r.Error != nil {
					fail(-32603, "url elicitation failed")
				} else {
					reply(`{"content":[{"type":"text","text":"elicited"}]}`)
				}
			case "add":
				added = true
				send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
				reply(`{"content":[{"type":"text","text":"added"}]}`)
			case "die":
				panic(rawExit(3))
			case "late-ask":
				// Announce the call, then keep it open: its question
				// comes later, while another call is in flight.
				var pt struct {
					Meta struct {
						ProgressToken json.RawMessage `json:"progressToken"`
					} `json:"_meta"`
				}
				json.Unmarshal(m.Params, &pt)
				late = m.ID
				send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(pt.Meta.ProgressToken) + `,"progress":1,"message":"started"}}`)
			case "after-cancel":
				// The late question of the late-ask call, asked while
				// this call is the only one the client still waits for.
				r := ask("elicitation/create", fmt.Sprintf(colorForm, "Late question for the late-ask call"))
				text := "late question refused"
				if r.Error == nil {
					text = "late question answered: " + string(r.Result)
				}
				if late != nil {
					// Now the late-ask call is done; say so.
					send(`{"jsonrpc":"2.0","id":` + string(late) + `,"error":{"code":-32800,"message":"request cancelled"}}`)
					late = nil
				}
				t, _ := json.Marshal(text)
				reply(`{"content":[{"type":"text","text":` + string(t) + `}]}`)
			case "form-ask":
				r := ask("elicitation/create", fmt.Sprintf(colorForm, "Favourite colour?"))
				text := "refused"
				if r.Error == nil {
					text = "answered: " + string(r.Result)
				}
				t, _ := json.Marshal(text)
				reply(`{"content":[{"type":"text","text":` + string(t) + `}]}`)
			default:
				fail(-32602, "unknown tool")
			}
		default:
			if len(m.ID) > 0 {
				fail(-32601, "method not found")
			}
		}
	}
}

// inMemoryRaw is a Transport option running rawServer in this process for
// every connect, over in-memory pipes: for tests where the bridge's logic,
// not a real process, is the point. The server "exits" (its pipes close)
// at end of input or on the die tool.
func inMemoryRaw(secret string) func(context.Context) (mcp.Transport, error) {
	return func(context.Context) (mcp.Transport, error) {
		toServer, fromClient := io.Pipe()
		toClient, fromServer := io.Pipe()
		go func() {
			rawServer(toServer, fromServer, io.Discard, secret)
			toServer.Close()
			fromServer.Close()
		}()
		return &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil
	}
}
