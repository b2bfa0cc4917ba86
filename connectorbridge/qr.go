package connectorbridge

import (
	"fmt"
	"io"

	qrcode "github.com/skip2/go-qrcode"
)

// printQR shows the raw QR text and, when it encodes, a terminal QR code
// drawn with half blocks, so the operator can scan it from the console.
func printQR(out io.Writer, text string) {
	fmt.Fprintf(out, "Scan this QR code with the target app (raw text: %s)\n", text)
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return
	}
	fmt.Fprint(out, q.ToSmallString(false))
}
