// Command protectedmcp is an MCP server (streamable HTTP) that is an
// OAuth 2.1 resource server, for agentgw's tests of [agents.mcp.oauth]:
// the go-sdk's auth.RequireBearerToken in front of the server, with
// tokens verified by internal/oauthrs against a real issuer (signature,
// issuer, audience = this server's URL, expiry with no skew, the
// "tools" scope). It serves the RFC 9728 metadata that its 401 names.
//
// Usage: protectedmcp --issuer URL [--listen 127.0.0.1:0] [--tokens-to FILE]
// Prints "READY <server URL>" once it listens. Its tools: whoami (the
// token's jid, subject and client id) and echo.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentgw/agentgw/internal/oauthrs"
)

var (
	recorded   = map[string]bool{}
	recordedMu sync.Mutex
)

// recordToken appends a token not seen before to the file.
func recordToken(path, token string) {
	recordedMu.Lock()
	defer recordedMu.Unlock()
	if recorded[token] {
		return
	}
	recorded[token] = true
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(f, token)
	f.Close()
}

func main() {
	issuer := flag.String("issuer", "", "the authorization server's issuer URL")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	tokensTo := flag.String("tokens-to", "", "append every accepted access token to this file (the secrets audit learns them)")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	resource := base + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	v, err := oauthrs.New(ctx, oauthrs.Config{Issuer: *issuer, Audience: resource, Scopes: []string{"tools"}, Skew: time.Millisecond})
	cancel()
	if err != nil {
		log.Fatal(err)
	}
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		c, err := v.Verify(ctx, token)
		if err != nil {
			fmt.Fprintf(os.Stderr, "refused token: %v\n", err)
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		if *tokensTo != "" {
			recordToken(*tokensTo, token)
		}
		return &auth.TokenInfo{Scopes: c.Scopes, Expiration: c.Expiry, UserID: c.Subject,
			Extra: map[string]any{"jid": c.JID, "client_id": c.ClientID}}, nil
	}

	s := mcp.NewServer(&mcp.Implementation{Name: "protectedmcp", Version: "1.0.0"}, nil)
	type whoamiIn struct{}
	type whoamiOut struct {
		JID      string `json:"jid"`
		Subject  string `json:"subject"`
		ClientID string `json:"client_id"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "The principal of the access token the call came with."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ whoamiIn) (*mcp.CallToolResult, whoamiOut, error) {
			ti := req.Extra.TokenInfo
			if ti == nil {
				return nil, whoamiOut{}, errors.New("no token info")
			}
			j, _ := ti.Extra["jid"].(string)
			cid, _ := ti.Extra["client_id"].(string)
			return nil, whoamiOut{JID: j, Subject: ti.UserID, ClientID: cid}, nil
		})
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, map[string]string, error) {
			return nil, map[string]string{"echo": in.Text}, nil
		})

	mux := http.NewServeMux()
	prm := base + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", oauthrs.MetadataHandler(oauthrs.ResourceMetadata{
		Resource: resource, AuthorizationServers: []string{*issuer}, ScopesSupported: []string{"tools"}}))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm, Scopes: []string{"tools"}})(h))
	fmt.Printf("READY %s\n", resource)
	log.Fatal((&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}
