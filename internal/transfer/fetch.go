// Package transfer moves file bytes between the bridges and HTTP peers,
// written once for every bridge that carries files (the connector bridge's
// Transfer Plane now; the A2A and OAN bridges may reuse it):
//
//   - Fetcher: a safe download. Only allow-listed origins, redirects only
//     within the same origin, a size cap enforced while reading, a timeout,
//     and never a credential: no Authorization, no cookies, no userinfo.
//   - HTTPUpload: an XEP-0363 client for an XMPP component. It finds the
//     server's upload service by service discovery, asks it for a slot
//     with an IQ, and PUTs the bytes to the slot.
//
// Errors name what went wrong (host refused, too large, status), never the
// URL's query or a header value.
package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// File is a fetched file held in memory (bounded by the fetch cap).
type File struct {
	Data      []byte
	Name      string // from Content-Disposition, else the URL path; may be ""
	MediaType string // from Content-Type; "application/octet-stream" when absent
	SHA256    string // hex
}

// Errors a fetch reports; wrapped with a short context.
var (
	ErrHostNotAllowed = errors.New("transfer: host not allowed")
	ErrTooLarge       = errors.New("transfer: file too large")
	ErrRedirect       = errors.New("transfer: redirect off the allowed origin")
	ErrStatus         = errors.New("transfer: unexpected HTTP status")
)

// DefaultMaxBytes is the default size cap of a fetch and an upload.
const DefaultMaxBytes = 10 << 20

// Fetcher downloads files from allow-listed origins.
type Fetcher struct {
	// Allow lists the origins ("http://host:port", "https://host") a URL
	// may name; the scheme and port must match exactly.
	Allow []string
	// MaxBytes caps the body; 0 means DefaultMaxBytes.
	MaxBytes int64
	// Timeout bounds the whole fetch; 0 means 30 s.
	Timeout time.Duration
	// Transport is the HTTP transport; nil uses http.DefaultTransport.
	Transport http.RoundTripper
	// MaxRedirects within the origin; 0 means 3.
	MaxRedirects int
}

// Origin returns the canonical origin of u ("scheme://host:port").
func Origin(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return strings.ToLower(u.Scheme) + "://" + host + ":" + port
}

// OriginOf is Origin of a raw URL; "" when it does not parse.
func OriginOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return Origin(u)
}

func (f *Fetcher) allowed(u *url.URL) bool {
	if u.Scheme != "http" && u.Scheme != "https" || u.User != nil || u.Host == "" {
		return false
	}
	o := Origin(u)
	for _, a := range f.Allow {
		if OriginOf(a) == o {
			return true
		}
	}
	return false
}

// Fetch downloads raw. It fails before sending anything when raw's origin
// is not allowed, and stops reading at the cap.
func (f *Fetcher) Fetch(ctx context.Context, raw string) (*File, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("transfer: malformed URL")
	}
	if !f.allowed(u) {
		return nil, fmt.Errorf("%w (%s)", ErrHostNotAllowed, safeHost(u))
	}
	max := f.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	timeout := f.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	maxRedir := f.MaxRedirects
	if maxRedir <= 0 {
		maxRedir = 3
	}
	origin := Origin(u)
	client := &http.Client{
		Transport: f.Transport,
		Timeout:   timeout,
		Jar:       nil, // never a cookie
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedir {
				return fmt.Errorf("%w: more than %d redirects", ErrRedirect, maxRedir)
			}
			if Origin(req.URL) != origin || req.URL.User != nil {
				return fmt.Errorf("%w (%s)", ErrRedirect, safeHost(req.URL))
			}
			req.Header.Del("Authorization")
			req.Header.Del("Cookie")
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errors.New("transfer: malformed URL")
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && errors.Is(ue.Err, ErrRedirect) {
			return nil, ue.Err
		}
		return nil, fmt.Errorf("transfer: fetch from %s failed: %s", safeHost(u), netReason(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("%w %d from %s", ErrStatus, resp.StatusCode, safeHost(u))
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("transfer: reading from %s failed: %s", safeHost(u), netReason(err))
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	sum := sha256.Sum256(data)
	out := &File{Data: data, SHA256: hex.EncodeToString(sum[:]), MediaType: "application/octet-stream"}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && len(mt) <= 127 {
		out.MediaType = mt
	}
	if _, p, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		out.Name = p["filename"]
	}
	if out.Name == "" {
		if i := strings.LastIndex(resp.Request.URL.Path, "/"); i >= 0 {
			out.Name, _ = url.PathUnescape(resp.Request.URL.Path[i+1:])
		}
	}
	return out, nil
}

// safeHost names a URL's host for an error: no userinfo, path or query.
func safeHost(u *url.URL) string {
	h := u.Host
	if len(h) > 128 {
		h = h[:128]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x21 || r > 0x7e {
			return '?'
		}
		return r
	}, h)
}

// netReason keeps the kind of a network error without its URL.
func netReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
