package a2afront

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/agentgw/agentgw/a2abridge/a2amap"
	"github.com/agentgw/agentgw/callers/a2afront/frontdb"
)

// Push notifications (A2A 1.0 §3.5, §4.3.3, §13.2). A client registers a
// webhook for a task (CreateTaskPushNotificationConfig, or the config of
// SendMessage); every update of the task is committed to a durable outbox
// (frontdb.Store: a SQLite file of the front's) as the StreamResponse a
// stream would carry, and a delivery loop POSTs it with retries and
// backoff until the receiver answers 2xx: at least once, across a restart
// of the front (kill -9 included). The configs are durable too: a
// restarted front follows their tasks again. Delivery never runs on a
// task's path: a slow or failing receiver only delays its own
// notifications (one delivery per config at a time, in order). Targets
// pass an SSRF guard: http(s) only, no credentials in the URL, and no
// loopback, private, link-local, unspecified or multicast address
// (checked on the config and again on every connection, after DNS) unless
// the operator allowed it; a redirect is not followed; the answer is read
// at most 64 KiB and every attempt is bounded in time. A notification is
// authenticated as its config says: the token in X-A2A-Notification-Token,
// the authentication as Authorization, and for the Bearer scheme without
// credentials a JWT the front signs with its card key (verifiable with
// the front's /jwks.json).

// PushOptions configure push notifications; they are off unless Enabled.
type PushOptions struct {
	Enabled bool
	// Store keeps configs and the outbox; required when Enabled.
	Store frontdb.Store
	// MaxPending bounds undelivered notifications kept (default 10000);
	// past it the oldest are dropped with a log line.
	MaxPending int
	// Allow lists address prefixes a target may resolve to although they
	// are not public (e.g. 127.0.0.1/32 for a receiver on this machine).
	Allow []netip.Prefix
	// AllowPrivate allows loopback, private (RFC 1918, fc00::/7) and
	// shared (100.64/10) targets; link-local and multicast stay refused.
	AllowPrivate bool
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one notification (default 12);
	// MaxAge its age (default 24h). Past either it is given up with a log
	// line.
	MaxAttempts int
	MaxAge      time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts (1s, 5m).
	MinBackoff, MaxBackoff time.Duration
	// Workers deliver in parallel (default 8), one per config at a time.
	Workers int
}

type pusher struct {
	f      *Front
	o      PushOptions
	db     frontdb.Store
	client *http.Client
	wake   chan struct{}

	mu       sync.Mutex
	watching map[string]bool // task ids with a watcher
	inflight map[string]bool // task id + config id being delivered
}

const (
	maxConfigsPerTask = 10
	// pushJWTLifetime is the exp of a signed notification after its iat.
	pushJWTLifetime = 5 * time.Minute
)

func newPusher(f *Front, o PushOptions) (*pusher, error) {
	if o.Store == nil {
		return nil, errors.New("a2a front: push notifications need a store")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 12
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 24 * time.Hour
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10000
	}
	p := &pusher{f: f, o: o, db: o.Store, wake: make(chan struct{}, 1), watching: map[string]bool{}, inflight: map[string]bool{}}
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
	shared := ip.Is4() && ip.As4()[0] == 100 && ip.As4()[1]&0xc0 == 64 // 100.64/10
	switch {
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return errTarget{"a link-local address"}
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return errTarget{"not a unicast address"}
	case p.o.AllowPrivate && (ip.IsLoopback() || ip.IsPrivate() || shared):
		return nil
	case ip.IsLoopback():
		return errTarget{"a loopback address"}
	case ip.IsPrivate():
		return errTarget{"a private address"}
	case shared:
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

// validate checks a config before anything is stored or started; its
// errors name the rule broken, never the config's values.
func (p *pusher) validate(ctx context.Context, c *a2a.PushConfig) error {
	if c == nil {
		return invalid("the push config is required")
	}
	if err := p.checkURL(ctx, c.URL); err != nil {
		return invalid("%s", err.Error())
	}
	if len(c.Token) > 1024 || len(c.ID) > 128 || strings.ContainsAny(c.Token, "\r\n") {
		return invalid("the push config's id or token is too long or malformed")
	}
	if c.Auth != nil {
		if c.Auth.Scheme == "" || len(c.Auth.Scheme) > 64 || len(c.Auth.Credentials) > 4096 ||
			strings.ContainsAny(c.Auth.Scheme, " \t\r\n") || strings.ContainsAny(c.Auth.Credentials, "\r\n") {
			return invalid("the push config's authentication is too long or malformed")
		}
		if c.Auth.Credentials == "" && !strings.EqualFold(c.Auth.Scheme, "Bearer") {
			return invalid("authentication without credentials is only for the Bearer scheme (a JWT the front signs)")
		}
		if c.Auth.Credentials == "" && p.f.opts.CardSigner == nil {
			return invalid("this front has no signing key for a JWT: give the authentication's credentials")
		}
	}
	return nil
}

// create stores a config for a task the account can see and starts
// following the task.
func (p *pusher) create(ctx context.Context, h handler, c *a2a.PushConfig) (*a2a.PushConfig, error) {
	if c == nil || c.TaskID == "" {
		return nil, v1err(invalid("taskId is required"))
	}
	if err := taskRef(legacy.TaskID(c.TaskID)); err != nil {
		return nil, v1err(err)
	}
	if err := p.validate(ctx, c); err != nil {
		return nil, v1err(err)
	}
	a, err := h.agent(ctx)
	if err != nil {
		return nil, v1err(err)
	}
	// The task must exist and be visible to this account.
	if _, err := p.f.snapshot(ctx, a, string(c.TaskID)); err != nil {
		return nil, v1err(err)
	}
	cfg, err := p.register(ctx, a, c)
	return cfg, v1err(err)
}

// registerFor registers the validated config a SendMessage carried for
// the task it started or answered.
func (p *pusher) registerFor(ctx context.Context, a *agent, c *a2a.PushConfig, taskID string) error {
	c.TaskID = a2a.TaskID(taskID)
	_, err := p.register(ctx, a, c)
	return err
}

// register stores a validated config of a known task and follows the
// task; its errors are the 0.3 sentinels.
func (p *pusher) register(ctx context.Context, a *agent, c *a2a.PushConfig) (*a2a.PushConfig, error) {
	cfg := *c
	if cfg.ID == "" {
		cfg.ID = "push-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return nil, invalid("the push config cannot be stored")
	}
	err = p.db.PutConfig(ctx, frontdb.Config{TaskID: string(cfg.TaskID), ConfigID: cfg.ID, Agent: a.jid.String(), Body: body}, maxConfigsPerTask)
	if errors.Is(err, frontdb.ErrTooMany) {
		return nil, invalid("a task has at most %d push configs", maxConfigsPerTask)
	}
	if err != nil {
		p.f.log.Warn("storing a push config failed", "task", string(cfg.TaskID), "error", err.Error())
		return nil, fmt.Errorf("%w: storing the push config failed", legacy.ErrServerError)
	}
	p.watch(a, string(cfg.TaskID))
	return &cfg, nil
}

// fromSend is the push config a SendMessage carries (configuration.
// pushNotificationConfig in 0.3, taskPushNotificationConfig in 1.0), as
// 1.0; nil when there is none.
func fromSend(p *legacy.MessageSendParams) *a2a.PushConfig {
	if p == nil || p.Config == nil || p.Config.PushConfig == nil {
		return nil
	}
	return a2av0.ToV1PushConfig(&legacy.TaskPushConfig{Config: *p.Config.PushConfig})
}

func (p *pusher) configs(ctx context.Context, taskID string) ([]*a2a.PushConfig, error) {
	rows, err := p.db.Configs(ctx, taskID)
	if err != nil {
		return nil, err
	}
	var out []*a2a.PushConfig
	for _, r := range rows {
		var c a2a.PushConfig
		if json.Unmarshal(r.Body, &c) == nil {
			out = append(out, &c)
		}
	}
	return out, nil
}

// watch follows a task (once per task) and commits each update to the
// outbox for every config of the task, until the task settles.
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
		p.follow(p.f.ctx, a, taskID)
	}()
}

// follow streams the task (its snapshot, then each update) into the
// outbox. After input-required it keeps following from that revision; a
// broken stream starts again from a snapshot (a repeat the receiver may
// see: at least once).
func (p *pusher) follow(ctx context.Context, a *agent, taskID string) {
	last := int64(-1)
	fails := 0
	for ctx.Err() == nil {
		var seq func(yield func(legacy.Event, error) bool)
		if last < 0 {
			seq = func(yield func(legacy.Event, error) bool) { p.f.stream(ctx, a, taskID, yield) }
		} else {
			seq = p.f.follow(ctx, a, taskID, last)
		}
		var serr error
		for ev, err := range seq {
			if err != nil {
				serr = err
				break
			}
			final, rev := eventState(ev)
			if rev > last {
				last = rev
			}
			v1, err := a2av0.ToV1Event(ev)
			if err != nil {
				continue
			}
			body, err := json.Marshal(a2a.StreamResponse{Event: v1})
			if err != nil {
				continue
			}
			if !p.enqueue(ctx, taskID, body, final) || final {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		if serr != nil {
			if fails++; fails > 5 {
				p.f.log.Warn("stopped following a task for push notifications", "task", taskID, "error", safeText(serr))
				return
			}
			last = -1
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(fails) * time.Second):
			}
			continue
		}
		fails = 0
	}
}

// eventState reports whether ev settles its task, and the XMPP revision
// it carries (0 when none).
func eventState(ev legacy.Event) (final bool, rev int64) {
	var md map[string]any
	switch v := ev.(type) {
	case *legacy.Task:
		final, md = v.Status.State.Terminal(), v.Metadata
	case *legacy.TaskStatusUpdateEvent:
		final, md = v.Status.State.Terminal(), v.Metadata
	}
	if m, ok := md[a2amap.MetaTask].(map[string]any); ok {
		rev, _ = m["revision"].(int64)
	}
	return final, rev
}

func safeText(err error) string {
	if err == nil {
		return ""
	}
	return safeCondition(err)
}

// enqueue commits one notification for every config of the task; false
// when the outbox cannot be written (the watcher stops: at least once
// cannot be promised, and the log says so).
func (p *pusher) enqueue(ctx context.Context, taskID string, body []byte, final bool) bool {
	dropped, err := p.db.Enqueue(ctx, taskID, body, final, time.Now(), p.o.MaxPending)
	if err != nil {
		if ctx.Err() == nil {
			p.f.log.Error("writing a push notification to the outbox failed; the task's notifications stop", "task", taskID, "error", err.Error())
		}
		return false
	}
	if dropped > 0 {
		p.f.log.Warn("the push outbox is full; dropped the oldest notifications", "dropped", dropped, "max", p.o.MaxPending)
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// run resumes the tasks of stored configs, then delivers due
// notifications until ctx ends. A restarted front tries every pending
// notification at once.
func (p *pusher) run(ctx context.Context) {
	p.resume(ctx)
	sem := make(chan struct{}, p.o.Workers)
	horizon := time.Now().Add(p.o.MaxBackoff) // the first pass: everything pending
	for {
		due, err := p.db.Due(ctx, horizon, 256)
		if err != nil && ctx.Err() == nil {
			p.f.log.Warn("reading the push outbox failed", "error", err.Error())
		}
		for _, n := range due {
			key := n.TaskID + "\x00" + n.ConfigID
			p.mu.Lock()
			busy := p.inflight[key]
			if !busy {
				p.inflight[key] = true
			}
			p.mu.Unlock()
			if busy {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func(n frontdb.Notification) {
				defer func() {
					<-sem
					p.mu.Lock()
					delete(p.inflight, key)
					p.mu.Unlock()
					select {
					case p.wake <- struct{}{}:
					default:
					}
				}()
				p.deliver(ctx, n)
			}(n)
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
		horizon = time.Now()
	}
}

// resume follows again the tasks of configs whose task had not settled,
// and forgets configs settled longer ago than MaxAge.
func (p *pusher) resume(ctx context.Context) {
	if n, err := p.db.Prune(ctx, time.Now().Add(-p.o.MaxAge)); err == nil && n > 0 {
		p.f.log.Info("forgot push configs of tasks settled long ago", "configs", n)
	}
	rows, err := p.db.Followed(ctx)
	if err != nil {
		p.f.log.Warn("reading the push configs failed; their tasks are not followed", "error", err.Error())
		return
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.TaskID] {
			continue
		}
		seen[r.TaskID] = true
		go func(r frontdb.Config) {
			a, err := p.f.lookup(ctx, r.Agent)
			if err != nil {
				p.f.log.Warn("the agent of a push config's task is not reachable; not followed", "task", r.TaskID)
				return
			}
			p.watch(a, r.TaskID)
		}(r)
	}
	if len(seen) > 0 {
		p.f.log.Info("following tasks with push configs again", "tasks", len(seen))
	}
}

func (p *pusher) deliver(ctx context.Context, n frontdb.Notification) {
	var cfg a2a.PushConfig
	if err := json.Unmarshal(n.Config, &cfg); err != nil {
		_ = p.db.GiveUp(ctx, n.ID)
		return
	}
	err := p.post(ctx, &cfg, n)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		if derr := p.db.Delivered(ctx, n.ID); derr != nil {
			p.f.log.Warn("recording a delivered push notification failed (it may be sent again)", "task", n.TaskID, "error", derr.Error())
		}
		return
	}
	attempts := n.Attempts + 1
	age := time.Since(n.Created)
	if attempts >= p.o.MaxAttempts || age >= p.o.MaxAge {
		p.f.log.Warn("a push notification was not delivered; giving up", "task", n.TaskID, "config", n.ConfigID,
			"attempts", attempts, "age", age.Round(time.Second).String(), "error", err.Error())
		_ = p.db.GiveUp(ctx, n.ID)
		return
	}
	wait := p.o.MinBackoff << min(attempts-1, 20)
	if wait > p.o.MaxBackoff || wait <= 0 {
		wait = p.o.MaxBackoff
	}
	p.f.log.Info("a push notification was not delivered; retrying", "task", n.TaskID, "config", n.ConfigID,
		"attempt", attempts, "retry_in", wait.String(), "error", err.Error())
	if rerr := p.db.Retry(ctx, n.ID, attempts, time.Now().Add(wait)); rerr != nil {
		p.f.log.Warn("recording a push attempt failed", "task", n.TaskID, "error", rerr.Error())
	}
}

// post sends one notification; an error's text names no payload and no
// URL.
func (p *pusher) post(ctx context.Context, cfg *a2a.PushConfig, n frontdb.Notification) error {
	if err := p.checkURL(ctx, cfg.URL); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, "POST", cfg.URL, bytes.NewReader(n.Body))
	if err != nil {
		return errors.New("the request could not be built")
	}
	req.Header.Set("Content-Type", "application/a2a+json")
	if cfg.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", cfg.Token)
		req.Header.Set("A2A-Notification-Token", cfg.Token) // the Go SDK's name
	}
	if cfg.Auth != nil && cfg.Auth.Scheme != "" {
		cred := cfg.Auth.Credentials
		if cred == "" {
			if cred, err = p.jwt(cfg, n); err != nil {
				return errors.New("the notification could not be signed")
			}
		}
		req.Header.Set("Authorization", cfg.Auth.Scheme+" "+cred)
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

// jwt signs a notification (A2A's JWT + JWKS flow): iss is the front, aud
// the webhook URL, jti the notification (the same on every attempt, so a
// receiver can drop repeats), and request_body_sha256 binds the body.
func (p *pusher) jwt(cfg *a2a.PushConfig, n frontdb.Notification) (string, error) {
	now := time.Now()
	sum := sha256.Sum256(n.Body)
	return p.f.opts.CardSigner.SignJWT(map[string]any{
		"iss": p.f.opts.BaseURL, "aud": cfg.URL, "iat": now.Unix(), "exp": now.Add(pushJWTLifetime).Unix(),
		"jti": "push-" + strconv.FormatInt(n.ID, 10), "taskId": n.TaskID, "configId": n.ConfigID,
		"request_body_sha256": hex.EncodeToString(sum[:]),
	})
}

// get and remove serve the other push config methods.
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

func (p *pusher) remove(ctx context.Context, taskID, id string) error {
	if err := p.db.DeleteConfig(ctx, taskID, id); err != nil {
		return v1err(fmt.Errorf("%w: deleting the push config failed", legacy.ErrServerError))
	}
	return nil
}
