package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/testkit"
)

// The bash script completes what the commands themselves accept: it is
// sourced in a real bash and asked as the shell would ask it.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		testkit.Unavailable(t, "bash is not installed")
	}
	var script bytes.Buffer
	if code := run(context.Background(), []string{"completion", "bash"}, &script, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	path := filepath.Join(t.TempDir(), "agentgw.bash")
	if err := os.WriteFile(path, script.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(line string) []string {
		t.Helper()
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+w+"'")
		}
		prog := "source " + path + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _agentgw; printf '%s\\n' \"${COMPREPLY[@]}\""
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	cases := []struct {
		line string
		want []string
		not  []string
	}{
		{"agentgw tr", []string{"trust"}, []string{"serve"}},
		{"agentgw trust ", []string{"grant", "revoke", "list"}, nil},
		{"agentgw trust grant --vis", []string{"--visibility"}, nil},
		{"agentgw serve --con", []string{"--config"}, nil},
		{"agentgw completion ", []string{"bash", "zsh", "fish"}, nil},
		{"agentgw call --js", []string{"--json"}, nil},
	}
	for _, c := range cases {
		got := complete(c.line)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %v, want %s among them", c.line, got, w)
			}
		}
		for _, w := range c.not {
			if slices.Contains(got, w) {
				t.Errorf("%q completes to %v, which should not hold %s", c.line, got, w)
			}
		}
	}
}

// Every shell's script is syntactically valid where that shell is here,
// and names every command.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"completion", sh}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", sh, code, errb.String())
		}
		for _, c := range commands {
			if !strings.Contains(out.String(), c.name) {
				t.Errorf("%s script lacks command %s", sh, c.name)
			}
		}
		if bin, err := exec.LookPath(sh); err == nil {
			cmd := exec.Command(bin, "-n")
			cmd.Stdin = &out
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, b)
			}
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"completion", "tcsh"}, &bytes.Buffer{}, &errb); code != 2 || !strings.Contains(errb.String(), `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: exit %d, %q", code, errb.String())
	}
}

// Every command is in the README's CLI reference.
func TestREADMENamesEveryCommand(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(readme), "## CLI reference")
	if i < 0 {
		t.Fatal("README has no CLI reference section")
	}
	ref := string(readme[i:])
	if j := strings.Index(ref[3:], "\n## "); j >= 0 {
		ref = ref[:j+3]
	}
	for _, c := range commands {
		if !strings.Contains(ref, "`agentgw "+c.name) {
			t.Errorf("the README's CLI reference lacks agentgw %s", c.name)
		}
	}
}
