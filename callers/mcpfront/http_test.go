package mcpfront

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/callers/agentclient"
)

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestHTTPWithBearer(t *testing.T) {
	t.Parallel()
	fa := newFake(t)
	fa.addEndpoint("agents.example.test", "echo@agents.example.test", &fakeEP{version: "1", tools: []agentclient.ManifestTool{tool("echo", objSchema)}, run: echoRun})
	f := newFront(t, fa, Options{})
	srv := httptest.NewServer(f.HTTPHandler(HTTPOptions{Bearer: "s3cret"}))
	defer srv.Close()

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("without a token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerTransport{"s3cret"}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo.echo", Arguments: map[string]any{"text": "over http"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Content[0].(*mcp.TextContent).Text != "echo: over http" {
		t.Errorf("result = %+v", res.Content[0])
	}

	bad := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{Logger: quiet()})
	if cs, err := bad.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerTransport{"wrong"}},
	}, &mcp.ClientSessionOptions{ProtocolVersion: legacy}); err == nil {
		cs.Close()
		t.Error("a wrong token connected")
	}
}
