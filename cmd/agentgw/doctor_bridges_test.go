package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/backendkit/bridgetest"
)

// A bridge added by one line of the table (here of a copy) is decoded by
// doctor's config load and listed with its own check; without the line
// the file is refused.
func TestDoctorListsATableBridge(t *testing.T) {
	path := bridgetest.Write(t, fmt.Sprintf("[xmpp]\ncomponent_domain = \"agents.example.test\"\nserver = %q\nsecret_env = \"AGENTGW_DOCTOR_TEST_SECRET\"\n[store]\npath = \"agentgw.db\"\n"+
		"[[agents]]\njid = \"echo@agents.example.test\"\n[agents.echo]\ngreeting = \"hello\"\n", bridgetest.SilentServer(t)))
	t.Setenv("AGENTGW_DOCTOR_TEST_SECRET", "some-component-secret")
	doctor := func() string {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--timeout", "1s", "--config", path}, &out, &errb)
		t.Logf("exit %d\n%s%s", code, out.String(), errb.String())
		return out.String()
	}
	if out := doctor(); !strings.Contains(out, "FAIL config: ") || !strings.Contains(out, "unknown keys: agents.echo.greeting") {
		t.Errorf("the root table took [agents.echo]:\n%s", out)
	}
	saved := bridges
	defer func() { bridges = saved }()
	bridges = append(saved[:len(saved):len(saved)], bridgetest.Echo)
	out := doctor()
	for _, want := range []string{
		fmt.Sprintf("ok   config: %s is valid (1 agents)\n", path),
		"ok   agent echo@agents.example.test: echo bridge says \"hello\"\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}
