package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// NeedBrowser returns the Chromium binary (AGENTGW_CHROMIUM, else chromium
// on PATH) and the module root, whose node_modules must hold puppeteer-core
// and each of nodeModules (paths below node_modules). Missing, they skip
// the test, or fail it under CI=true.
func NeedBrowser(t testing.TB, nodeModules ...string) (chromium, root string) {
	t.Helper()
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	missing := func(what string, err error) {
		testkit.Unavailable(t, "%s not installed (scripts/install-deps.sh installs it): %v", what, err)
	}
	chromium = os.Getenv("AGENTGW_CHROMIUM")
	if chromium == "" {
		if chromium, err = exec.LookPath("chromium"); err != nil {
			missing("chromium", err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node", err)
	}
	for _, f := range append([]string{"puppeteer-core/package.json"}, nodeModules...) {
		if _, err := os.Stat(filepath.Join(root, "node_modules", f)); err != nil {
			missing("node_modules/"+f+" (npm ci)", err)
		}
	}
	return chromium, root
}

// ArtefactDir is where a browser test puts its screenshots:
// $AGENTGW_ARTIFACTS/name when that is set (kept after the run), else a
// temporary directory.
func ArtefactDir(t testing.TB, name string) string {
	t.Helper()
	dir := t.TempDir()
	if base := os.Getenv("AGENTGW_ARTIFACTS"); base != "" {
		var err error
		if dir, err = filepath.Abs(filepath.Join(base, name)); err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// BrowserRun is what a browser script reported: its JSON output lines,
// each under the name it gave in its key field ("flow", "step").
type BrowserRun map[string]map[string]any

// RunBrowser runs the puppeteer script (a path below root) with node and
// env added to the test's environment. A line carrying "error" fails the
// test and so does the script's failure, with its output.
func RunBrowser(t testing.TB, ctx context.Context, root, script, key string, env ...string) BrowserRun {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, script))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, runErr := cmd.Output()
	t.Logf("browser run %v", time.Since(start).Round(time.Millisecond))
	run := BrowserRun{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		name, _ := m[key].(string)
		run[name] = m
		if msg, ok := m["error"]; ok {
			t.Errorf("%s %s: %v", key, name, msg)
		}
	}
	if runErr != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(script), runErr, out, stderr.String())
	}
	return run
}

// Shows requires the text the named flow reported under field to hold
// every want.
func (r BrowserRun) Shows(t testing.TB, name, field string, wants ...string) {
	t.Helper()
	got, _ := r[name][field].(string)
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: the page shows no %q; it shows:\n%s", name, w, got)
		}
	}
}
