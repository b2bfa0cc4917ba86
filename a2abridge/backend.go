// Package a2abridge makes an A2A agent an XMPP endpoint ([agents.a2a]):
// it fetches the agent's card, projects its skills into a manifest and
// runs every invocation as a task that follows the remote A2A task's
// states (working → progress, input-required → input_required and the
// answer sent back, cancel → tasks/cancel, terminal states settle), and
// resubscribes when the stream breaks. The mapping lives in a2amap; the
// front the other way round (`agentgw a2a`) is callers/a2afront.
package a2abridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/agentgw/agentgw/a2abridge/a2amap"
	"github.com/agentgw/agentgw/a2abridge/cardsig"
	"github.com/agentgw/agentgw/backendkit"
	"github.com/agentgw/agentgw/internal/telemetry"
	"github.com/agentgw/agentgw/tasks"
)

// Options configure a Backend.
type Options struct {
	Endpoint    string // bare JID
	Name        string
	Title       string
	Description string
	Version     string
	CardURL     string
	// CardVerifier, when set, must verify the card's signature (the
	// pinned key of card_key_file); a card that fails is refused.
	CardVerifier *cardsig.Verifier

	Publisher    backendkit.Publisher
	Availability backendkit.Availability
	Logger       *slog.Logger
	// HTTP is the client for the card and the agent; nil uses a client
	// with Timeouts below. Its redirect policy is replaced by the bridge's.
	HTTP *http.Client
	// MaxCardBytes bounds the Agent Card (default 256 KiB).
	MaxCardBytes int64
	// MaxResponseBytes bounds every response body from the agent, each
	// single event of a stream, and the artifacts of one result (default
	// 16 MiB). Over it the task fails agentgw:result-too-large.
	MaxResponseBytes int64
	// Refresh is how often the card is fetched again (default 5 minutes).
	Refresh time.Duration
	// CancelWait bounds the wait for the remote task to confirm a
	// cancellation (default 15s).
	CancelWait time.Duration
	// Resubscribes bounds reconnection attempts of one broken task stream
	// (default 5).
	Resubscribes int
}

// Backend is one A2A agent behind one endpoint.
type Backend struct {
	o        Options
	log      *slog.Logger
	pub      *backendkit.Manifests
	presence *backendkit.Presence
	http     *http.Client

	mu   sync.Mutex
	card *a2a.AgentCard
	rpc  *rpcTransport
	// ready is closed once a card has been fetched (Resume waits for it).
	ready     chan struct{}
	readyOnce sync.Once
}

var (
	_ tasks.Backend        = (*Backend)(nil)
	_ backendkit.Readiness = (*Backend)(nil)
)

// New checks the options; Start fetches the card and publishes.
func New(o Options) (*Backend, error) {
	u, err := url.Parse(o.CardURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("a2abridge: the card URL must be an http or https URL without credentials")
	}
	if o.MaxCardBytes <= 0 {
		o.MaxCardBytes = 256 << 10
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = 16 << 20
	}
	if o.Refresh <= 0 {
		o.Refresh = 5 * time.Minute
	}
	if o.CancelWait <= 0 {
		o.CancelWait = 15 * time.Second
	}
	if o.Resubscribes <= 0 {
		o.Resubscribes = 5
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	hc := &http.Client{Timeout: 0}
	if o.HTTP != nil {
		c := *o.HTTP
		hc = &c
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	// The agent lives at the card's host: nothing is sent elsewhere, not
	// even through a redirect, and no response is read unbounded.
	hc.Transport = boundedTransport{next: telemetry.Transport(base), max: o.MaxResponseBytes}
	hc.CheckRedirect = sameHost
	return &Backend{
		o: o, log: o.Logger, http: hc, ready: make(chan struct{}),
		pub:      backendkit.NewManifests(o.Publisher),
		presence: backendkit.NewPresence(o.Endpoint, o.Availability),
	}, nil
}

// Features: A2A tasks stream status, take answers and can be cancelled.
func (b *Backend) Features() tasks.Features {
	return tasks.Features{Progress: true, Cancel: true, Input: true}
}

// Ready reports whether a manifest from the card is published.
func (b *Backend) Ready() bool { return b.pub.Ready() }

// Start fetches the card, publishes, and refreshes both until ctx ends;
// the endpoint is available while the last fetch succeeded.
func (b *Backend) Start(ctx context.Context) error {
	go backendkit.Supervisor{Min: time.Second, Max: time.Minute}.Run(ctx, func(ctx context.Context) (time.Duration, error) {
		var upSince time.Time
		for {
			if err := b.refresh(ctx); err != nil {
				b.presence.Set(false)
				if upSince.IsZero() {
					return 0, err
				}
				return time.Since(upSince), err
			}
			if upSince.IsZero() {
				upSince = time.Now()
			}
			b.presence.Set(true)
			if !backendkit.Sleep(ctx, b.o.Refresh) {
				return time.Since(upSince), nil
			}
		}
	}, func(err error, wait time.Duration) {
		if err != nil {
			b.log.Warn("A2A agent card unavailable; retrying", "error", err.Error(), "retry_in", wait)
		}
	})
	return nil
}

// refresh fetches the card and publishes its projection.
func (b *Backend) refresh(ctx context.Context) error {
	card, iface, err := b.fetchCard(ctx)
	if err != nil {
		return err
	}
	rpcURL, err := b.onCardHost(iface.url)
	if err != nil {
		return err
	}
	doc, err := project(&b.o, card)
	if err != nil {
		return err
	}
	m, err := backendkit.Stamp(doc, firstNonEmpty(b.o.Version, card.Version), []byte(rpcURL), []byte(card.ProtocolVersion))
	if err != nil {
		return err
	}
	if _, _, _, err := b.pub.Publish(ctx, doc.Agent.Version, m); err != nil {
		return fmt.Errorf("publishing the manifest: %w", err)
	}
	b.mu.Lock()
	if b.rpc == nil || b.rpc.url != rpcURL || b.rpc.v10 != iface.v10 {
		b.rpc = newRPCTransport(rpcURL, b.http, b.o.MaxResponseBytes, iface.v10)
	}
	b.card = card
	b.mu.Unlock()
	b.readyOnce.Do(func() { close(b.ready) })
	return nil
}

// iface is the interface the bridge calls: a JSON-RPC URL and its version.
type iface struct {
	url string
	v10 bool
}

// fetchCard reads the card (asking for the 1.0 card: A2A-Version 1.0,
// which a 0.3 agent ignores) and picks the interface to call: a JSON-RPC
// interface of A2A 1.0 when the card lists one, else its 0.3 JSON-RPC
// interface. The card is returned in the 0.3 shape the projection reads.
func (b *Backend) fetchCard(ctx context.Context) (*a2a.AgentCard, iface, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", b.o.CardURL, nil)
	if err != nil {
		return nil, iface{}, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, iface{}, fmt.Errorf("fetching the agent card: %w", scrubURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, iface{}, fmt.Errorf("fetching the agent card: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, b.o.MaxCardBytes+1))
	if err != nil {
		return nil, iface{}, fmt.Errorf("reading the agent card: %w", err)
	}
	if int64(len(body)) > b.o.MaxCardBytes {
		return nil, iface{}, fmt.Errorf("the agent card is larger than %d bytes", b.o.MaxCardBytes)
	}
	if b.o.CardVerifier != nil {
		if err := b.o.CardVerifier.Verify(body); err != nil {
			return nil, iface{}, fmt.Errorf("card refused: %w", err)
		}
	}
	return parseCard(body)
}

// parseCard reads a card of either version (or the union agentgw's front
// serves) and picks the interface to call.
func parseCard(body []byte) (*a2a.AgentCard, iface, error) {
	var legacy a2a.AgentCard
	legacyErr := json.Unmarshal(body, &legacy)
	v1card, v1err := a2av0.NewAgentCardParser()(body)
	var card *a2a.AgentCard
	switch {
	case legacyErr == nil:
		card = &legacy
	case v1err == nil:
		card = a2av0.FromV1AgentCard(v1card)
	default:
		return nil, iface{}, errors.New("the agent card is neither an A2A 1.0 nor an A2A 0.3 AgentCard")
	}
	if len(card.Skills) == 0 {
		return nil, iface{}, errors.New("the agent card lists no skills")
	}
	var pick *iface
	if v1err == nil {
		for _, i := range v1card.SupportedInterfaces {
			if i == nil || i.ProtocolBinding != "JSONRPC" {
				continue
			}
			major, _, _ := strings.Cut(string(i.ProtocolVersion), ".")
			switch {
			case major == "1":
				pick = &iface{url: i.URL, v10: true}
			case pick == nil && strings.HasPrefix(string(i.ProtocolVersion), "0.3"):
				pick = &iface{url: i.URL}
			}
			if pick != nil && pick.v10 {
				break
			}
		}
	}
	if pick != nil {
		card.ProtocolVersion = "0.3.0"
		if pick.v10 {
			card.ProtocolVersion = "1.0"
		}
		return card, *pick, nil
	}
	if legacyErr != nil {
		return nil, iface{}, errors.New("the agent offers no JSON-RPC interface (the only transport agentgw calls)")
	}
	u, err := legacyRPCURL(card)
	if err != nil {
		return nil, iface{}, err
	}
	return card, iface{url: u}, nil
}

// legacyRPCURL is a 0.3 card's JSON-RPC interface.
func legacyRPCURL(card *a2a.AgentCard) (string, error) {
	u := card.URL
	if card.PreferredTransport != "" && card.PreferredTransport != a2a.TransportProtocolJSONRPC {
		u = ""
		for _, i := range card.AdditionalInterfaces {
			if i.Transport == a2a.TransportProtocolJSONRPC {
				u = i.URL
			}
		}
		if u == "" {
			return "", errors.New("the agent offers no JSON-RPC interface (the only transport agentgw calls)")
		}
	}
	return u, nil
}

// onCardHost checks that an interface URL is on the card's host.
func (b *Backend) onCardHost(u string) (string, error) {
	ru, err := url.Parse(u)
	cu, _ := url.Parse(b.o.CardURL)
	if err != nil || ru.Host != cu.Host || (ru.Scheme != "http" && ru.Scheme != "https") || ru.User != nil {
		return "", errors.New("the agent card's interface URL is not on the card's host; agentgw talks to the card's host only")
	}
	return ru.String(), nil
}

func (b *Backend) transport() *rpcTransport {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rpc
}

func sameHost(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("too many redirects")
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return errors.New("redirect to another host refused")
	}
	return nil
}

// scrubURLError drops the URL from a client error (it may carry a query
// an operator considers private) and keeps the cause.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// boundedTransport cuts every response body at max bytes, except an SSE
// stream's: rpcTransport bounds each of its events at max instead (a long
// task's stream may carry more than max in all).
type boundedTransport struct {
	next http.RoundTripper
	max  int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" && r.Header.Get("Accept") == "text/event-stream" {
		return resp, nil
	}
	resp.Body = &boundedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

var errTooLarge = errors.New("a2abridge: response larger than the configured limit")

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

var toolNameRE = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// project builds the manifest of a card: one tool per skill, with the
// schemas agentgw's card extension gives (another agentgw's front) or the
// documented message schema.
func project(o *Options, card *a2a.AgentCard) (*backendkit.ManifestDoc, error) {
	schemas := map[string]map[string]json.RawMessage{}
	for _, e := range card.Capabilities.Extensions {
		if e.URI != a2amap.ExtensionURI {
			continue
		}
		sk, _ := e.Params["skills"].(map[string]any)
		for id, v := range sk {
			m, _ := v.(map[string]any)
			s := map[string]json.RawMessage{}
			for _, k := range []string{"inputSchema", "outputSchema"} {
				if raw, err := json.Marshal(m[k]); err == nil && m[k] != nil {
					s[k] = raw
				}
			}
			schemas[id] = s
		}
	}
	doc := &backendkit.ManifestDoc{ManifestSpecVersion: "0", Tools: []backendkit.ManifestTool{}}
	doc.Agent.JID = o.Endpoint
	doc.Agent.Name = backendkit.Truncate(firstNonEmpty(o.Name, card.Name), backendkit.MaxAgentName)
	doc.Agent.Title = backendkit.Truncate(firstNonEmpty(o.Title, card.Name), backendkit.MaxAgentTitle)
	doc.Agent.Description = backendkit.Truncate(firstNonEmpty(o.Description, card.Description), backendkit.MaxAgentDescription)
	if card.Provider != nil {
		doc.Agent.Vendor = backendkit.Truncate(card.Provider.Org, 256)
	}
	doc.Implementation = &backendkit.ManifestImpl{Name: backendkit.Truncate(firstNonEmpty(card.Name, "a2a-agent"), backendkit.MaxImplField), Version: backendkit.Truncate(firstNonEmpty(card.Version, "0"), backendkit.MaxImplField)}
	seen := map[string]bool{}
	for _, s := range card.Skills {
		name := toolNameRE.ReplaceAllString(s.ID, "_")
		if name == "" || len(name) > 128 || seen[name] {
			continue
		}
		seen[name] = true
		t := backendkit.ManifestTool{
			Name: name, Title: backendkit.Truncate(s.Name, backendkit.MaxToolTitle),
			Description: backendkit.Truncate(describeSkill(s), backendkit.MaxToolDescription),
			InputSchema: a2amap.MessageSchema,
			Ext:         &backendkit.ToolExt{SupportsProgress: true, SupportsCancellation: true, SupportsInput: true},
			Meta:        map[string]any{metaKey: map[string]any{"skill": s.ID, "protocolVersion": card.ProtocolVersion, "messageSchema": schemas[s.ID] == nil}},
		}
		if sc := schemas[s.ID]; sc != nil && len(sc["inputSchema"]) > 0 {
			t.InputSchema = sc["inputSchema"]
			if len(sc["outputSchema"]) > 0 {
				t.OutputSchema = sc["outputSchema"]
			}
		}
		doc.Tools = append(doc.Tools, t)
	}
	if len(doc.Tools) == 0 {
		return nil, errors.New("no skill of the agent card has a usable id")
	}
	return doc, nil
}

// metaKey is the tool _meta member with the A2A facts of a projected tool.
const metaKey = "org.agentgw/a2a"

func describeSkill(s a2a.AgentSkill) string {
	d := strings.TrimSpace(s.Description)
	if len(s.Examples) > 0 {
		d += "\n\nExamples: " + strings.Join(s.Examples, "; ")
	}
	return d
}

func firstNonEmpty(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}
