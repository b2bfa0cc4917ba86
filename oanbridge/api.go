package oanbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentgw/agentgw/internal/transfer"
	"github.com/agentgw/agentgw/oanbridge/wire"
)

// Errors of the REST client. None carries a URL with secrets, a key or a
// response body.
var (
	// ErrRevoked: OAN answered 401: the key is revoked or unknown.
	ErrRevoked = errors.New("OAN rejected the API key (401): it was revoked or is unknown")
	// ErrBanned: the account is banned.
	ErrBanned = errors.New("OAN reports the account as banned")
	// ErrRedirect: OAN answered a redirect, which is never followed:
	// credentials never go into a redirect (§7).
	ErrRedirect = errors.New("OAN answered with a redirect; it is not followed, so the API key never leaves the OAN API host")
)

// HTTPError is an OAN answer outside 2xx (other than 401 and redirects).
type HTTPError struct {
	Status int
	Code   string // the body's error member, when it is a short safe token
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("OAN answered HTTP %d", e.Status)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// Temporary reports a server-side failure worth retrying.
func (e *HTTPError) Temporary() bool { return e.Status >= 500 || e.Status == 429 }

// api is the REST client for one OAN API origin. It attaches the key only
// to requests for exactly that origin and never follows redirects.
type api struct {
	base *url.URL // scheme://host[:port] + optional path prefix
	key  func() string
	hc   *http.Client
}

const maxBody = 8 << 20

func newAPI(baseURL string, key func() string) (*api, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("the OAN base_url must be an http or https URL without credentials")
	}
	u.RawQuery, u.Fragment = "", ""
	a := &api{base: u, key: key}
	a.hc = &http.Client{
		Timeout: 60 * time.Second,
		// Never follow: a redirect could carry the Authorization header
		// (or the request) to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &pinnedTransport{base: u, key: key, next: http.DefaultTransport},
	}
	return a, nil
}

// pinnedTransport adds the Authorization header only when the request
// goes to the configured origin: whatever builds a request, the key cannot
// reach the signed-URL storage host or any other.
type pinnedTransport struct {
	base *url.URL
	key  func() string
	next http.RoundTripper
}

func (t *pinnedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del("Authorization")
	if t.key != nil && sameOrigin(r.URL, t.base) {
		if k := t.key(); k != "" {
			r.Header.Set("Authorization", "Bearer "+k)
		}
	}
	return t.next.RoundTrip(r)
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// url builds basePath/api/v1 + rel (rel is made of checked segments).
func (a *api) url(rel string, q url.Values) string {
	u := *a.base
	u.Path = strings.TrimRight(a.base.Path, "/") + wire.BasePath + rel
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// seg joins checked path segments; an id that is not a safe segment is an
// error, so no caller can build a path outside the API.
func seg(parts ...string) (string, error) {
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && !wire.ValidID(p) {
			return "", errors.New("an OAN identifier is malformed")
		}
		b.WriteString("/" + p)
	}
	return b.String(), nil
}

// do sends one request and decodes a 2xx JSON answer into out (nil:
// discard). It returns the status.
func (a *api) do(ctx context.Context, method, rel string, q url.Values, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url(rel, q), rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach OAN: %w", scrubURLErr(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("reading OAN's answer: %w", scrubURLErr(err))
	}
	if len(data) > maxBody {
		return resp.StatusCode, errors.New("OAN's answer exceeds the size limit")
	}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized:
		return s, ErrRevoked
	case s >= 300 && s < 400:
		return s, ErrRedirect
	case s < 200 || s >= 300:
		he := &HTTPError{Status: s}
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && len(e.Error) <= 64 && safeToken(e.Error) {
			he.Code = e.Error
		}
		if s == http.StatusForbidden && strings.Contains(strings.ToLower(he.Code), "banned") {
			return s, ErrBanned
		}
		return s, he
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, errors.New("OAN's answer is not the expected JSON")
		}
	}
	return resp.StatusCode, nil
}

func safeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// scrubURLErr drops the URL from a *url.Error: the URL carries no secret
// here, but the error stays short and fixed.
func scrubURLErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if errors.Is(ue.Err, context.DeadlineExceeded) || errors.Is(ue.Err, context.Canceled) {
			return ue.Err
		}
		return errors.New(ue.Op + " failed: " + firstLine(ue.Err.Error()))
	}
	return err
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// MaxAttachmentBytes bounds a signed-URL download (OAN's upload limit).
const MaxAttachmentBytes = 10 << 20

// FetchSigned downloads a signed attachment URL (§2.4) from the storage
// host with the project's one safe fetcher (internal/transfer): only that
// URL's origin, no OAN credentials (no Authorization at all), no
// redirect off the origin, at most MaxAttachmentBytes.
func FetchSigned(ctx context.Context, signed string) ([]byte, error) {
	return fetchSigned(ctx, signed, MaxAttachmentBytes)
}

func fetchSigned(ctx context.Context, signed string, limit int64) ([]byte, error) {
	o := transfer.OriginOf(signed)
	if o == "" {
		return nil, errors.New("the signed URL is malformed")
	}
	f := &transfer.Fetcher{Allow: []string{o}, MaxBytes: limit, Timeout: 60 * time.Second}
	file, err := f.Fetch(ctx, signed)
	if err != nil {
		return nil, err
	}
	return file.Data, nil
}
