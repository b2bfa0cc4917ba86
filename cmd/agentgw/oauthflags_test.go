package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The OAuth flags of the HTTP fronts are checked before anything connects.
func TestOAuthFlagUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		run  func(context.Context, []string, io.Writer, io.Writer) error
		args []string
		want string
	}{
		{runMCP, []string{"--jid", "a@b", "--issuer", "https://login.example.test"}, "--issuer needs --http"},
		{runMCP, []string{"--jid", "a@b", "--http", "127.0.0.1:0", "--issuer", "https://login.example.test", "--bearer-env", "X"}, "not both"},
		{runMCP, []string{"--jid", "a@b", "--http", "127.0.0.1:0", "--audience", "https://mcp.example.test/"}, "need --issuer"},
		{runA2A, []string{"--jid", "a@b", "--http", "127.0.0.1:0", "--issuer", "https://login.example.test", "--bearer-file", "f"}, "not both"},
		{runA2A, []string{"--jid", "a@b", "--http", "127.0.0.1:0", "--scopes", "agents"}, "need --issuer"},
	} {
		err := c.run(context.Background(), c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
