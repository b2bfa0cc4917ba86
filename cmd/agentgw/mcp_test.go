package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBearerFromFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "token")
	first, err := bearerFromFile(path)
	if err != nil || len(first) < 20 {
		t.Fatalf("create: %q %v", first, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	again, err := bearerFromFile(path)
	if err != nil || again != first {
		t.Fatalf("reuse: %q %v, want the same token", again, err)
	}
	os.Chmod(path, 0o644)
	if _, err := bearerFromFile(path); err == nil || !strings.Contains(err.Error(), "accessible by other users") {
		t.Fatalf("a world-readable token file was accepted: %v", err)
	}
	if _, err := bearerFromFile(filepath.Join(t.TempDir(), "missing-dir", "token")); err == nil {
		t.Fatal("uncreatable path accepted")
	}
}
