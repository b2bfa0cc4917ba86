package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintQRDrawsBlocks(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	printQR(&out, "refconnector://login/abc")
	if s := out.String(); !strings.Contains(s, "█") && !strings.Contains(s, "▀") {
		t.Errorf("no terminal QR rendering:\n%s", s)
	}
}
