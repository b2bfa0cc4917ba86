package mcpbridge

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An SDK server in this process, behind an injected in-memory transport:
// the manifest and the call's result come from the raw frames the tap saw
// (start's cleanup fails the test if the bridge fell back to the SDK's
// decoded values).
func TestInMemorySDKServer(t *testing.T) {
	t.Parallel()
	type greetIn struct {
		Name string `json:"name"`
	}
	transport := func(ctx context.Context) (mcp.Transport, error) {
		server := mcp.NewServer(&mcp.Implementation{Name: "in-memory", Version: "1"}, nil)
		mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Greets."},
			func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
			})
		serverSide, clientSide := mcp.NewInMemoryTransports()
		if _, err := server.Connect(ctx, serverSide, nil); err != nil {
			return nil, err
		}
		return clientSide, nil
	}
	s := start(t, Options{JID: testJID, Transport: transport}, nil)
	doc := checkManifestValid(t, s.pub.all()[0])
	if doc.Agent.Name != "in-memory" || toolsByName(doc)["greet"] == nil {
		t.Errorf("manifest agent %+v, tools %d", doc.Agent, len(doc.Tools))
	}
	r := s.exec(t, "greet", `{"name":"ada"}`, nil)
	if got := textOf(t, r.Result); got != "hello ada" {
		t.Errorf("greet = %q (%s)", got, r.Outcome())
	}
}
