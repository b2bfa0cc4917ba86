package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/xep/xmltree"
)

// XEP-0363 and the discovery namespaces it needs.
const (
	NSUpload    = "urn:xmpp:http:upload:0"
	nsDiscoInfo = "http://jabber.org/protocol/disco#info"
	nsDiscoItem = "http://jabber.org/protocol/disco#items"
	nsData      = "jabber:x:data"
)

// IQSender sends an IQ get or set and returns the answer; component.Component
// implements it. An error answer is returned as an error.
type IQSender interface {
	SendIQ(ctx context.Context, iq *xmltree.Element) (*xmltree.Element, error)
}

// ErrNoUploadService reports that the server advertises no XEP-0363
// service.
var ErrNoUploadService = errors.New("transfer: the XMPP server offers no HTTP upload service (XEP-0363)")

// HTTPUpload uploads files through the XMPP server's XEP-0363 service on
// behalf of a component. It is safe for concurrent use.
type HTTPUpload struct {
	IQ IQSender
	// Server is the XMPP domain whose items are searched for the service.
	Server string
	// Service skips discovery when set (the upload service's JID).
	Service string
	// MaxBytes caps what is uploaded; 0 means DefaultMaxBytes. The
	// service's own max-file-size, when smaller, wins.
	MaxBytes  int64
	Timeout   time.Duration // the PUT; 0 means 60 s
	Transport http.RoundTripper

	mu      sync.Mutex
	found   string
	maxSize int64
	origins map[string]bool
}

// Slot is an upload slot granted by the service.
type Slot struct {
	PutURL  string
	GetURL  string
	Headers http.Header // only Authorization, Cookie and Expires (XEP-0363 §5)
}

// discover finds the upload service once and caches it.
func (u *HTTPUpload) discover(ctx context.Context, from string) (string, int64, error) {
	u.mu.Lock()
	svc, max := u.found, u.maxSize
	u.mu.Unlock()
	if svc != "" {
		return svc, max, nil
	}
	candidates := []string{}
	if u.Service != "" {
		candidates = append(candidates, u.Service)
	} else {
		if u.Server == "" {
			return "", 0, errors.New("transfer: HTTPUpload needs Server or Service")
		}
		candidates = append(candidates, u.Server)
		res, err := u.IQ.SendIQ(ctx, iq("get", from, u.Server, xmltree.New(nsDiscoItem, "query")))
		if err != nil {
			return "", 0, fmt.Errorf("transfer: disco#items of %s: %w", u.Server, err)
		}
		if q := res.Child(nsDiscoItem, "query"); q != nil {
			for _, it := range q.ChildrenNamed(nsDiscoItem, "item") {
				if j := it.AttrValue("jid"); j != "" && it.AttrValue("node") == "" && len(candidates) < 32 {
					candidates = append(candidates, j)
				}
			}
		}
	}
	var unanswered error // a candidate that did not answer at all (no stream, timeout)
	for _, c := range candidates {
		res, err := u.IQ.SendIQ(ctx, iq("get", from, c, xmltree.New(nsDiscoInfo, "query")))
		if err != nil {
			var se *agentproto.StanzaError
			if !errors.As(err, &se) && unanswered == nil {
				unanswered = err
			}
			continue
		}
		q := res.Child(nsDiscoInfo, "query")
		if q == nil || !hasFeature(q, NSUpload) {
			continue
		}
		max := maxFileSize(q)
		u.mu.Lock()
		u.found, u.maxSize = c, max
		u.mu.Unlock()
		return c, max, nil
	}
	if unanswered != nil {
		// Not an answer that there is no service: the XMPP stream is not
		// up yet, or the server is slow. Retrying may find it.
		return "", 0, fmt.Errorf("transfer: the upload service could not be asked: %w", unanswered)
	}
	return "", 0, ErrNoUploadService
}

func iq(typ, from, to string, payload *xmltree.Element) *xmltree.Element {
	e := xmltree.New("jabber:component:accept", "iq", "type", typ, "to", to, "id", ids.New("up"))
	if from != "" {
		e.SetAttr("from", from)
	}
	return e.Add(payload)
}

func hasFeature(q *xmltree.Element, v string) bool {
	for _, f := range q.ChildrenNamed(nsDiscoInfo, "feature") {
		if f.AttrValue("var") == v {
			return true
		}
	}
	return false
}

// maxFileSize reads the service's max-file-size (XEP-0363 §3); 0 when absent.
func maxFileSize(q *xmltree.Element) int64 {
	for _, x := range q.ChildrenNamed(nsData, "x") {
		isUpload := false
		var max int64
		for _, f := range x.ChildrenNamed(nsData, "field") {
			v := ""
			if val := f.Child(nsData, "value"); val != nil {
				v = strings.TrimSpace(val.Text)
			}
			switch f.AttrValue("var") {
			case "FORM_TYPE":
				isUpload = v == NSUpload
			case "max-file-size":
				max, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if isUpload && max > 0 {
			return max
		}
	}
	return 0
}

// Limit is the effective upload cap: MaxBytes and the service's own.
func (u *HTTPUpload) Limit(ctx context.Context, from string) (int64, error) {
	_, smax, err := u.discover(ctx, from)
	if err != nil {
		return 0, err
	}
	return u.limit(smax), nil
}

func (u *HTTPUpload) limit(smax int64) int64 {
	max := u.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if smax > 0 && smax < max {
		max = smax
	}
	return max
}

// RequestSlot asks the service for a slot for a file, as from (a JID of
// the component).
func (u *HTTPUpload) RequestSlot(ctx context.Context, from, name string, size int64, mediaType string) (*Slot, error) {
	svc, smax, err := u.discover(ctx, from)
	if err != nil {
		return nil, err
	}
	if max := u.limit(smax); size > max {
		return nil, fmt.Errorf("%w: %d bytes, the upload limit is %d", ErrTooLarge, size, max)
	}
	req := xmltree.New(NSUpload, "request", "filename", name, "size", strconv.FormatInt(size, 10))
	if mediaType != "" {
		req.SetAttr("content-type", mediaType)
	}
	res, err := u.IQ.SendIQ(ctx, iq("get", from, svc, req))
	if err != nil {
		return nil, fmt.Errorf("transfer: upload slot request refused: %w", err)
	}
	slot := res.Child(NSUpload, "slot")
	if slot == nil {
		return nil, errors.New("transfer: the upload service answered without a slot")
	}
	put, get := slot.Child(NSUpload, "put"), slot.Child(NSUpload, "get")
	if put == nil || get == nil {
		return nil, errors.New("transfer: the upload slot lacks put or get")
	}
	s := &Slot{PutURL: put.AttrValue("url"), GetURL: get.AttrValue("url"), Headers: http.Header{}}
	for _, raw := range []string{s.PutURL, s.GetURL} {
		pu, err := url.Parse(raw)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" || pu.User != nil {
			return nil, errors.New("transfer: the upload slot has a malformed URL")
		}
	}
	for _, h := range put.ChildrenNamed(NSUpload, "header") {
		name := http.CanonicalHeaderKey(h.AttrValue("name"))
		v := strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, h.Text)
		switch name { // XEP-0363 §5: only these, anything else is dropped
		case "Authorization", "Cookie", "Expires":
			s.Headers.Set(name, v)
		}
	}
	u.mu.Lock()
	if u.origins == nil {
		u.origins = map[string]bool{}
	}
	u.origins[OriginOf(s.GetURL)] = true
	u.mu.Unlock()
	return s, nil
}

// Upload requests a slot and PUTs data; it returns the GET URL to share.
func (u *HTTPUpload) Upload(ctx context.Context, from, name, mediaType string, data []byte) (string, error) {
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	s, err := u.RequestSlot(ctx, from, name, int64(len(data)), mediaType)
	if err != nil {
		return "", err
	}
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	client := &http.Client{Transport: u.Transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.PutURL, bytes.NewReader(data))
	if err != nil {
		return "", errors.New("transfer: the upload slot has a malformed URL")
	}
	req.ContentLength = int64(len(data))
	req.Header.Set("Content-Type", mediaType)
	for k, v := range s.Headers {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		pu, _ := url.Parse(s.PutURL)
		return "", fmt.Errorf("transfer: upload to %s failed: %s", safeHost(pu), netReason(err))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w %d from the upload service", ErrStatus, resp.StatusCode)
	}
	return s.GetURL, nil
}

// Origins lists the origins of the GET URLs this uploader was given, so a
// caller can allow downloads from the server's own upload service.
func (u *HTTPUpload) Origins() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]string, 0, len(u.origins))
	for o := range u.origins {
		out = append(out, o)
	}
	return out
}
