package transfer

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/component"
	"github.com/agentgw/agentgw/testkit/xmppharness"
	"github.com/agentgw/agentgw/xep/xmltree"
)

func TestFetchRules(t *testing.T) {
	var hits atomic.Int64
	var sawAuth atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("other"))
	}))
	defer other.Close()
	var self *httptest.Server
	self = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
			sawAuth.Store(true)
		}
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Content-Disposition", `attachment; filename="pic.png"`)
			w.Write([]byte("bytes"))
		case "/hop":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/big":
			w.Write(make([]byte, 2000))
		case "/bigstream":
			w.Header().Set("Content-Length", "")
			f := w.(http.Flusher)
			for i := 0; i < 20; i++ {
				w.Write(make([]byte, 100))
				f.Flush()
			}
		case "/slow":
			time.Sleep(500 * time.Millisecond)
		case "/404":
			http.NotFound(w, r)
		}
	}))
	defer self.Close()
	f := Fetcher{Allow: []string{self.URL}, MaxBytes: 1000, Timeout: 200 * time.Millisecond}
	ctx := context.Background()

	got, err := f.Fetch(ctx, self.URL+"/ok")
	if err != nil || string(got.Data) != "bytes" || got.Name != "pic.png" || got.MediaType != "image/png" {
		t.Fatalf("ok: %+v, %v", got, err)
	}
	if sum := sha256.Sum256([]byte("bytes")); got.SHA256 != string(hexs(sum[:])) {
		t.Fatal("sha256 mismatch")
	}
	if got, err := f.Fetch(ctx, self.URL+"/hop"); err != nil || string(got.Data) != "bytes" {
		t.Fatalf("same-origin redirect: %v", err)
	}
	for path, want := range map[string]error{
		"/loop": ErrRedirect, "/away": ErrRedirect, "/big": ErrTooLarge, "/bigstream": ErrTooLarge, "/404": ErrStatus,
	} {
		if _, err := f.Fetch(ctx, self.URL+path); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", path, err, want)
		}
	}
	if _, err := f.Fetch(ctx, self.URL+"/slow"); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("slow: %v", err)
	}
	// Another host, another port, another scheme, userinfo: refused
	// before any request.
	for _, u := range []string{other.URL + "/x", strings.Replace(self.URL, "http://", "https://", 1) + "/ok",
		strings.Replace(self.URL, "http://", "http://user:pw@", 1) + "/ok", "file:///etc/passwd", "gopher://x/"} {
		if _, err := f.Fetch(ctx, u); !errors.Is(err, ErrHostNotAllowed) {
			t.Errorf("%s: %v, want ErrHostNotAllowed", u, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the other host was contacted %d times", hits.Load())
	}
	if sawAuth.Load() {
		t.Fatal("a credential was sent")
	}
	// Errors never carry the query (which may hold a token).
	if _, err := f.Fetch(ctx, other.URL+"/x?token=s3cret"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error reflects the query: %v", err)
	}
}

func hexs(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

// fakeIQ answers disco and slot requests like an upload service.
type fakeIQ struct {
	put  string
	seen []*xmltree.Element
}

func (f *fakeIQ) SendIQ(_ context.Context, iq *xmltree.Element) (*xmltree.Element, error) {
	f.seen = append(f.seen, iq)
	res := xmltree.New("jabber:component:accept", "iq", "type", "result")
	switch {
	case iq.Child(nsDiscoItem, "query") != nil:
		return res.Add(xmltree.New(nsDiscoItem, "query").Add(
			xmltree.New(nsDiscoItem, "item", "jid", "conf.example.test"),
			xmltree.New(nsDiscoItem, "item", "jid", "upload.example.test"))), nil
	case iq.Child(nsDiscoInfo, "query") != nil:
		q := xmltree.New(nsDiscoInfo, "query")
		if iq.AttrValue("to") == "upload.example.test" {
			q.Add(xmltree.New(nsDiscoInfo, "feature", "var", NSUpload),
				xmltree.New(nsData, "x", "type", "result").Add(
					xmltree.New(nsData, "field", "var", "FORM_TYPE").Add(xmltree.New(nsData, "value").WithText(NSUpload)),
					xmltree.New(nsData, "field", "var", "max-file-size").Add(xmltree.New(nsData, "value").WithText("100"))))
		}
		return res.Add(q), nil
	case iq.Child(NSUpload, "request") != nil:
		return res.Add(xmltree.New(NSUpload, "slot").Add(
			xmltree.New(NSUpload, "put", "url", f.put).Add(
				xmltree.New(NSUpload, "header", "name", "Authorization").WithText("Bearer slot"),
				xmltree.New(NSUpload, "header", "name", "X-Evil").WithText("1")),
			xmltree.New(NSUpload, "get", "url", f.put+"/get"))), nil
	}
	return nil, errors.New("unexpected IQ")
}

func TestUploadDiscoveryAndHeaders(t *testing.T) {
	var got []byte
	var hdr http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		hdr = r.Header
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	iq := &fakeIQ{put: srv.URL + "/slot"}
	u := &HTTPUpload{IQ: iq, Server: "example.test"}
	url, err := u.Upload(context.Background(), "im@agents.example.test/cch_1", "a.txt", "text/plain", []byte("hello"))
	if err != nil || url != srv.URL+"/slot/get" {
		t.Fatalf("Upload = %q, %v", url, err)
	}
	if string(got) != "hello" || hdr.Get("Authorization") != "Bearer slot" || hdr.Get("X-Evil") != "" {
		t.Fatalf("PUT body %q headers %v", got, hdr)
	}
	if o := u.Origins(); len(o) != 1 || o[0] != OriginOf(srv.URL) {
		t.Fatalf("Origins = %v", o)
	}
	// The service's max-file-size (100) wins over the default cap; the
	// refusal happens before a slot is asked for.
	n := len(iq.seen)
	if _, err := u.Upload(context.Background(), "im@agents.example.test", "b", "", make([]byte, 101)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if len(iq.seen) != n {
		t.Fatal("an oversize file asked for a slot")
	}
	if req := iq.seen[len(iq.seen)-1].Child(NSUpload, "request"); req.AttrValue("filename") != "a.txt" || req.AttrValue("size") != "5" {
		t.Fatalf("slot request %v", req)
	}
}

// TestProsodyHTTPUpload uploads through Prosody's mod_http_file_share as
// the component would and reads the file back byte for byte.
func TestProsodyHTTPUpload(t *testing.T) {
	srv := xmppharness.StartProsody(t, xmppharness.ProsodyOptions{HTTPUpload: true, UploadSizeLimit: 1 << 20})
	domain := jid.MustParse(srv.ComponentDomain)
	r := component.NewRouter(domain, nil, slog.New(slog.DiscardHandler))
	comp := component.New(component.Config{Domain: domain, Addr: srv.ComponentAddr, Secret: srv.ComponentSecret,
		Logger: slog.New(slog.DiscardHandler), IQTimeout: 10 * time.Second}, r)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go comp.Run(ctx)
	select {
	case <-comp.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("component did not connect")
	}
	u := &HTTPUpload{IQ: comp, Server: srv.Domain}
	data := make([]byte, 300<<10)
	rand.Read(data)
	from := "im@" + srv.ComponentDomain + "/cch_1"
	get, err := u.Upload(ctx, from, "blob.bin", "application/octet-stream", data)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	f := Fetcher{Allow: u.Origins()}
	back, err := f.Fetch(ctx, get)
	if err != nil {
		t.Fatalf("fetch back: %v", err)
	}
	if !bytes.Equal(back.Data, data) {
		t.Fatal("the file read back differs")
	}
	if lim, _ := u.Limit(ctx, from); lim != 1<<20 {
		t.Fatalf("Limit = %d, want Prosody's 1 MiB", lim)
	}
	if _, err := u.Upload(ctx, from, "big.bin", "", make([]byte, 1<<20+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversize upload: %v", err)
	}
}
