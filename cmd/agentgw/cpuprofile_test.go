package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The profile flag writes a gzip-compressed pprof file when set, and
// nothing (no file, no output) when unset.
func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.pprof")
	t.Setenv("AGENTGW_CPUPROFILE", "")
	var stderr bytes.Buffer
	if stop := startCPUProfile(&stderr); stop != nil {
		stop()
		t.Fatal("unset AGENTGW_CPUPROFILE started a profile")
	}

	t.Setenv("AGENTGW_CPUPROFILE", path)
	stop := startCPUProfile(&stderr)
	if stop == nil {
		t.Fatalf("no profile started: %s", stderr.String())
	}
	stop()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Fatalf("profile is not gzip pprof data (%d bytes)", len(data))
	}
	if stderr.Len() != 0 {
		t.Fatalf("unexpected output: %s", stderr.String())
	}

	t.Setenv("AGENTGW_CPUPROFILE", filepath.Join(t.TempDir(), "missing", "x.pprof"))
	if stop := startCPUProfile(&stderr); stop != nil {
		stop()
		t.Fatal("an uncreatable path started a profile")
	}
	if !bytes.Contains(stderr.Bytes(), []byte("cpu profile")) {
		t.Fatalf("an uncreatable path was not reported: %q", stderr.String())
	}
}
