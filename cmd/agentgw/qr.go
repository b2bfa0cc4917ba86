package main

import (
	"fmt"
	"io"

	qrcode "github.com/skip2/go-qrcode"
)

// printQR draws a terminal QR code with half blocks, so the operator can
// scan it from the console; connectorbridge has already printed the raw
// text. It is connectorbridge.Options.ShowQR for `agentgw connector auth`.
func printQR(out io.Writer, text string) {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return
	}
	fmt.Fprint(out, q.ToSmallString(false))
}
