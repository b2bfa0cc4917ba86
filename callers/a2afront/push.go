package a2afront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"syscall"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Push notifications (A2A 1.0 §3.5, §4.3.3). A client registers a webhook
// for a task; every update of the task is put in an outbox as the
// StreamResponse a stream would carry, and a delivery loop POSTs it with
// retries and backoff until the receiver answers 2xx: at least once while
// the front runs. The outbox is in memory (bounded): a restart of the front
// loses undelivered notifications and configs (docs/a2a.md; a durable
// outbox belongs in the store drivers, not done yet). Delivery never
// runs on a task's path: a slow or failing receiver only delays its own
// notifications. Targets pass an SSRF guard: http(s) only, no credentials
// in the URL, and no loopback, private, link-local, unspecified or
// multicast address (checked on the config and again on every connection,
// after DNS) unless the operator allowed that prefix; a redirect is not
// followed; the answer is read at most 64 KiB and every attempt is bounded
// in time.

// PushOptions configure push notifications; they are off unless Enabled.
type PushOptions struct {
	Enabled bool
	// MaxPending bounds undelivered notifications held (default 10000);
	// past it the oldest is dropped with a log line.
	MaxPending int
	// Allow lists address prefixes a target may resolve to although they
	// are not public (e.g. 127.0.0.1/32 for a receiver on this machine).
	Allow []netip.Prefix
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one notification (default 12).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between attempts (1s, 5m).
	MinBackoff, MaxBackoff time.Duration
	// Workers deliver in parallel (default 4).
	Workers int
}

type pusher struct {
	f      *Front
	o      PushOptions
	client *http.Client
	wake   chan struct{}

	mu       sync.Mutex
	watching map[string]bool // task ids with a watcher
	byTask   map[string][]*storedConfig
	outbox   []*pending
	nextID   int64
}

type storedConfig struct {
	agent string
	cfg   a2a.PushConfig
}

type pending struct {
	id       int64
	taskID   string
	configID string
	body     []byte
	attempts int
	next     time.Time
	busy     bool
}

const maxConfigsPerTask = 10

func newPusher(f *Front, o PushOptions) (*pusher, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 12
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10000
	}
	p := &pusher{f: f, o: o, wake: make(chan struct{}, 1), watching: map[string]bool{}, byTask: map[string][]*storedConfig{}}
	dialer := &net.Dialer{Timeout: o.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return errors.New("push target is not an IP address after resolution")
		}
		return p.guardIP(ip)
	}}
	p.client = &http.Client{
		Timeout: o.Timeout,
		Transport: &http.Transport{
			Proxy: nil, DialContext: dialer.DialContext, MaxIdleConnsPerHost: 2,
			ResponseHeaderTimeout: o.Timeout, TLSHandshakeTimeout: o.Timeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p, nil
}

// errTarget is a refused push target; its text names the rule, not the URL.
type errTarget struct{ why string }

func (e errTarget) Error() string { return "push target refused: " + e.why }

func (p *pusher) guardIP(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, pre := range p.o.Allow {
		if pre.Contains(ip) {
			return nil
		}
	}
	switch {
	case ip.IsLoopback():
		return errTarget{"a loopback address"}
	case ip.IsPrivate():
		return errTarget{"a private address"}
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return errTarget{"a link-local address"}
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return errTarget{"not a unicast address"}
	case ip.Is4() && (ip.As4()[0] == 100 && ip.As4()[1]&0xc0 == 64): // 100.64/10, shared address space
		return errTarget{"a shared (carrier-grade NAT) address"}
	}
	return nil
}

// checkURL refuses a target by its form and by every address its host
// resolves to now (the dialer checks again on each connection).
func (p *pusher) checkURL(ctx context.Context, raw string) error {
	if len(raw) > 2048 {
		return errTarget{"the URL is longer than 2048 bytes"}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errTarget{"not an http or https URL"}
	}
	if u.User != nil {
		return errTarget{"credentials in the URL"}
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.guardIP(ip)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return errTarget{"the host does not resolve"}
	}
	for _, a := range addrs {
		if err := p.guardIP(a); err != nil {
			return err
		}
	}
	return nil
}

// create stores a config and starts following its task.
func (p *pusher) create(ctx context.Context, h handler, c *a2a.PushConfig) (*a2a.PushConfig, error) {
	if c == nil || c.TaskID == "" {
		return nil, v1err(invalid("taskId is required"))
	}
	if err := taskRef(legacy.TaskID(c.TaskID)); err != nil {
		return nil, v1err(err)
	}
	if err := p.checkURL(ctx, c.URL); err != nil {
		return nil, v1err(invalid("%s", err.Error()))
	}
	if len(c.Token) > 1024 || len(c.ID) > 128 || (c.Auth != nil && (len(c.Auth.Scheme) > 64 || len(c.Auth.Credentials) > 4096 || strings.ContainsAny(c.Auth.Scheme+c.Auth.Credentials, "\r\n"))) {
		return nil, v1err(invalid("the push config's id, token or authentication is too long or malformed"))
	}
	a, err := h.agent(ctx)
	if err != nil {
		return nil, v1err(err)
	}
	// The task must exist and be visible to this account.
	if _, err := p.f.snapshot(ctx, a, string(c.TaskID)); err != nil {
		return nil, v1err(err)
	}
	cfg := *c
	if cfg.ID == "" {
		cfg.ID = "push-" + fmt.Sprint(time.Now().UnixNano())
	}
	p.mu.Lock()
	list := p.byTask[string(c.TaskID)]
	replaced := false
	for _, sc := range list {
		if sc.cfg.ID == cfg.ID {
			sc.cfg, replaced = cfg, true
		}
	}
	if !replaced {
		if len(list) >= maxConfigsPerTask {
			p.mu.Unlock()
			return nil, v1err(invalid("a task has at most %d push configs", maxConfigsPerTask))
		}
		p.byTask[string(c.TaskID)] = append(list, &storedConfig{agent: h.bare, cfg: cfg})
	}
	p.mu.Unlock()
	p.watch(a, string(c.TaskID))
	return &cfg, nil
}

func (p *pusher) configs(_ context.Context, taskID string) ([]*a2a.PushConfig, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*a2a.PushConfig
	for _, sc := range p.byTask[taskID] {
		c := sc.cfg
		out = append(out, &c)
	}
	return out, nil
}

// watch follows a task (once per task) and writes each update to the
// outbox for every config of the task; it ends with the task.
func (p *pusher) watch(a *agent, taskID string) {
	p.mu.Lock()
	if p.watching[taskID] {
		p.mu.Unlock()
		return
	}
	p.watching[taskID] = true
	p.mu.Unlock()
	go func() {
		defer func() { p.mu.Lock(); delete(p.watching, taskID); p.mu.Unlock() }()
		ctx := p.f.ctx
		h := v1handler{h: handler{f: p.f, bare: a.jid.String()}}
		for ev, err := range h.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: a2a.TaskID(taskID)}) {
			if err != nil || ev == nil {
				return
			}
			body, err := json.Marshal(a2a.StreamResponse{Event: ev})
			if err != nil {
				continue
			}
			p.enqueue(ctx, taskID, body)
		}
	}()
}

func (p *pusher) enqueue(_ context.Context, taskID string, body []byte) {
	p.mu.Lock()
	for _, sc := range p.byTask[taskID] {
		if len(p.outbox) >= p.o.MaxPending {
			p.f.log.Warn("the push outbox is full; dropping the oldest notification", "task", p.outbox[0].taskID)
			p.outbox = p.outbox[1:]
		}
		p.nextID++
		p.outbox = append(p.outbox, &pending{id: p.nextID, taskID: taskID, configID: sc.cfg.ID, body: body, next: time.Now()})
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run delivers due notifications until ctx ends.
func (p *pusher) run(ctx context.Context) {
	sem := make(chan struct{}, p.o.Workers)
	for {
		now := time.Now()
		var due []*pending
		p.mu.Lock()
		for _, it := range p.outbox {
			if !it.busy && !it.next.After(now) {
				it.busy = true
				due = append(due, it)
			}
		}
		p.mu.Unlock()
		for _, it := range due {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func(it *pending) {
				defer func() { <-sem }()
				p.deliver(ctx, it)
			}(it)
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// config is the stored config of a pending notification (nil: deleted).
func (p *pusher) config(taskID, id string) *a2a.PushConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sc := range p.byTask[taskID] {
		if sc.cfg.ID == id {
			c := sc.cfg
			return &c
		}
	}
	return nil
}

func (p *pusher) drop(it *pending) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.outbox {
		if o == it {
			p.outbox = append(p.outbox[:i], p.outbox[i+1:]...)
			return
		}
	}
}

func (p *pusher) deliver(ctx context.Context, it *pending) {
	cfg := p.config(it.taskID, it.configID)
	if cfg == nil {
		p.drop(it) // the config was deleted
		return
	}
	err := p.post(ctx, cfg, it.body)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		p.drop(it)
		return
	}
	p.mu.Lock()
	it.attempts++
	attempts := it.attempts
	p.mu.Unlock()
	if attempts >= p.o.MaxAttempts {
		p.f.log.Warn("a push notification was not delivered; giving up", "task", it.taskID, "attempts", attempts, "error", err.Error())
		p.drop(it)
		return
	}
	wait := p.o.MinBackoff << min(attempts-1, 20)
	if wait > p.o.MaxBackoff || wait <= 0 {
		wait = p.o.MaxBackoff
	}
	p.mu.Lock()
	it.next, it.busy = time.Now().Add(wait), false
	p.mu.Unlock()
}

// post sends one notification; an error's text names no payload.
func (p *pusher) post(ctx context.Context, cfg *a2a.PushConfig, body []byte) error {
	if err := p.checkURL(ctx, cfg.URL); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, "POST", cfg.URL, strings.NewReader(string(body)))
	if err != nil {
		return errors.New("the request could not be built")
	}
	req.Header.Set("Content-Type", "application/a2a+json")
	if cfg.Token != "" {
		req.Header.Set("A2A-Notification-Token", cfg.Token)
		req.Header.Set("X-A2A-Notification-Token", cfg.Token)
	}
	if cfg.Auth != nil && cfg.Auth.Scheme != "" {
		req.Header.Set("Authorization", strings.TrimSpace(cfg.Auth.Scheme+" "+cfg.Auth.Credentials))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var et errTarget
		if errors.As(err, &et) {
			return et
		}
		if errors.Is(err, context.DeadlineExceeded) || rctx.Err() != nil {
			return errors.New("timed out")
		}
		return errors.New("the receiver could not be reached")
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// get, list and remove serve the other push config methods.
func (p *pusher) get(ctx context.Context, taskID, id string) (*a2a.PushConfig, error) {
	cfgs, err := p.configs(ctx, taskID)
	if err != nil {
		return nil, v1err(fmt.Errorf("%w: reading push configs failed", legacy.ErrServerError))
	}
	for _, c := range cfgs {
		if c.ID == id || (id == "" && len(cfgs) == 1) {
			return c, nil
		}
	}
	return nil, a2a.ErrTaskNotFound
}

func (p *pusher) remove(_ context.Context, taskID, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.byTask[taskID]
	for i, sc := range list {
		if sc.cfg.ID == id {
			p.byTask[taskID] = append(list[:i], list[i+1:]...)
		}
	}
	return nil
}
