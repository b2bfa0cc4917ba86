package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/agentgw/agentgw/testkit/xmppharness"
)

// buildCached builds the main package pkg of this module into a binary
// shared by every test process on the machine that builds the same
// sources: each e2e area is its own test binary, and linking agentgw
// costs about 8 CPU-seconds, so twenty areas linking their own copy cost
// more than most of their tests. The key hashes every file of the module
// (sources, embedded migrations, go.mod/go.sum) and the toolchain; a
// changed tree gets a new binary, never a stale one.
func buildCached(pkg, name string) (string, error) {
	root, err := xmppharness.ModuleRoot()
	if err != nil {
		return "", err
	}
	key, err := treeKey(root, pkg)
	if err != nil {
		return "", err
	}
	base := filepath.Join(os.TempDir(), "agentgw-e2e-bin")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(base, key)
	out := filepath.Join(dir, name)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil // another process built it while this one waited
	}
	pruneOld(base)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	// The rename publishes a complete binary only.
	return out, os.Rename(tmp, out)
}

// treeKey hashes the module's files (not .git, node_modules or bin) with
// the toolchain version and the package built.
func treeKey(root, pkg string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s/%s\x00", runtime.Version(), pkg, runtime.GOOS, runtime.GOARCH)
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s\x00", rel)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// pruneOld removes binaries of trees last built more than a day ago; a
// test process still using one has long finished by then.
func pruneOld(base string) {
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}
