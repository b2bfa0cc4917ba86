// Package scripts_test checks the make targets and shell scripts the
// README promises: `make test` installs what the real-server suites need.
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgw/agentgw/testkit"
)

func root(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// TestMakeTestInstallsDeps: outside CI the real-server suites skip when a
// server is missing, so `make test` must run install-deps before go test,
// as the README says; NO_DEPS=1 leaves it out.
func TestMakeTestInstallsDeps(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		missing(t, "make not installed")
	}
	dry := func(vars ...string) string {
		cmd := exec.Command("make", append([]string{"-n", "-C", root(t), "test"}, vars...)...)
		// The dry run must not inherit the caller's NO_DEPS (make test
		// NO_DEPS=1 reaches this test through the environment or MAKEFLAGS).
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); k != "NO_DEPS" && k != "MAKEFLAGS" && k != "MFLAGS" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n test: %v\n%s", err, out)
		}
		return string(out)
	}
	out := dry()
	dep, test := strings.Index(out, "scripts/install-deps.sh"), strings.Index(out, "go test")
	if dep < 0 || test < 0 || dep > test {
		t.Fatalf("make test does not run install-deps before go test:\n%s", out)
	}
	if out := dry("NO_DEPS=1"); strings.Contains(out, "install-deps") {
		t.Fatalf("NO_DEPS=1 still installs:\n%s", out)
	}
}

// TestInstallDepsLeavesLinkedNodeModules: a node_modules that is a link
// (checkouts sharing one install) is never reinstalled through: npm ci
// would empty the shared target. The check reads the installed tree, so a
// lock file newer than node_modules (any fresh checkout) is not "stale".
func TestInstallDepsLeavesLinkedNodeModules(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node not installed")
	}
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		missing(t, "not a Debian machine")
	}
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	shared := filepath.Join(dir, "shared")
	for _, d := range []string{filepath.Join(repo, "scripts"), filepath.Join(shared, "keep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(root(t), "scripts", "install-deps.sh"), filepath.Join(repo, "scripts", "install-deps.sh"))
	copyFile(filepath.Join(root(t), "package-lock.json"), filepath.Join(repo, "package-lock.json"))
	copyFile(filepath.Join(root(t), "package.json"), filepath.Join(repo, "package.json"))
	if err := os.Symlink(shared, filepath.Join(repo, "node_modules")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(repo, "scripts", "install-deps.sh")).CombinedOutput()
	t.Logf("install-deps:\n%s", out)
	if err != nil {
		// Only the apt step can fail here (packages missing, no root).
		t.Skipf("install-deps failed before the npm step: %v", err)
	}
	if !strings.Contains(string(out), "not reinstalling through it") {
		t.Errorf("install-deps did not refuse to reinstall through the link")
	}
	if fi, err := os.Lstat(filepath.Join(repo, "node_modules")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("node_modules is no longer a link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(shared, "keep")); err != nil {
		t.Errorf("the link's target was emptied: %v", err)
	}
}

// missing skips a test whose tool is absent, except under CI=true, where
// every tool the suites need is installed and its absence is a failure.
func missing(t *testing.T, why string) {
	t.Helper()
	testkit.Unavailable(t, "%s (CI=true: .ci/run installs it)", why)
}
