package mcpfront

import (
	"slices"
	"testing"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

// The operations of MCP request bodies, for --scope-for.
func TestOpsOf(t *testing.T) {
	t.Parallel()
	r, i, s := oauthrs.OpRead, oauthrs.OpInvoke, oauthrs.OpSteer
	for body, want := range map[string][]oauthrs.Op{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`:                                 {r},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`:                                             {r},
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`:                                     {r},
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                                                       {r},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{}}}`:             {i},
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}`:                      {r},
		`{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`:                                             {r},
		`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"t"}}`:                   {s},
		`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`:                   {s},
		` [{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call"}]`: {r, i},
		`{"jsonrpc":"2.0","id":1,"method":"no/such"}`:                                                oauthrs.Ops,
		`[]`:                                    oauthrs.Ops,
		`not json`:                              oauthrs.Ops,
		`[{"method":"ping"},{"method":"evil"}]`: oauthrs.Ops,
	} {
		if got := opsOf([]byte(body)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
}
