package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestHostHelpAndUsage(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"host", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help exited %d: %s", code, errb.String())
	}
	for _, want := range []string{"self_register_domains", "--mcp-command", "--mcp-url", "--config", "BOT@DOMAIN/RESOURCE", "agentgw:interrupted", "--store"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"host", "--mcp-url", "http://127.0.0.1:1/mcp", "--gateway", "agents.example.com"}, "--jid is required"},
		{[]string{"host", "--jid", "bot@example.com", "--mcp-url", "http://127.0.0.1:1/mcp"}, "give --gateway"},
		{[]string{"host", "--jid", "bot@example.com", "--gateway", "agents.example.com"}, "exactly one of --mcp-command, --mcp-url or --config"},
		{[]string{"host", "--jid", "bot@example.com/res", "--gateway", "g", "--mcp-url", "u"}, "--jid"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(context.Background(), c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
