package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mellium.im/xmpp/jid"

	"github.com/agentgw/agentgw/callers/agentclient/xmppclient"
	"github.com/agentgw/agentgw/console/sessiondb"
)

// XMPPLogin returns a CheckPassword that logs in to the XMPP server's C2S
// port at server (host:port) as the account with SCRAM (PLAIN only over
// TLS), binds, and closes: the password is right when the server lets the
// session start. caFile, if set, is trusted besides the system roots.
func XMPPLogin(server, caFile string) func(ctx context.Context, bareJID, password string) error {
	return func(ctx context.Context, bareJID, password string) error {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		c, err := xmppclient.Dial(ctx, xmppclient.Options{JID: bareJID + "/agentgw-console-login-" + randomToken(4),
			Password: password, Server: server, CAFile: caFile})
		if err != nil {
			return err
		}
		return c.Close()
	}
}

const (
	cookieName       = "agentgw_console"
	secureCookieName = "__Host-agentgw_console"
	loginCookie      = "agentgw_console_login"
)

// session is one login as a request sees it: id is the cookie's value
// (the store keeps only its SHA-256), csrf is derived from it.
type session struct {
	id, csrf, user string
	byToken        bool
	expires        time.Time
}

func (s *Server) takeFlash(ctx context.Context, ss *session) (string, bool) {
	n, ok, err := s.sessions.d.TakeNote(ctx, hashID(ss.id))
	if err != nil {
		s.d.Log.Warn("console: session note", "err", err)
	}
	return n, ok
}

func (s *Server) flash(ss *session, note string, ok bool) {
	// Bounded: the action is done; an unreachable store costs the note only.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.sessions.d.SetNote(ctx, hashID(ss.id), note, ok); err != nil {
		s.d.Log.Warn("console: session note", "err", err)
	}
}

// sessionStore keeps the logins in a sessiondb.Driver: the gateway's store
// (shared by a cluster's members, kept over a restart), or memory.
type sessionStore struct {
	d         sessiondb.Driver
	now       func() time.Time
	ttl       time.Duration
	lastPurge atomic.Int64
}

func newSessionStore(d sessiondb.Driver, now func() time.Time, ttl time.Duration) *sessionStore {
	if d == nil {
		d = sessiondb.NewMemory()
	}
	return &sessionStore{d: d, now: now, ttl: ttl}
}

// maxSessions bounds the logins held at once; the ones expiring first go.
const maxSessions = 10000

// hashID is what the store keeps of a session ID.
func hashID(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// csrfOf derives a session's CSRF token from its ID (secret, in an
// HttpOnly cookie): every member of a cluster derives the same token, and
// the token does not reveal the ID.
func csrfOf(id string) string {
	h := sha256.Sum256([]byte("agentgw console csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

func (st *sessionStore) create(ctx context.Context, user string, byToken bool) (*session, error) {
	now := st.now()
	// Expired and surplus logins go at most once a minute.
	if last := st.lastPurge.Load(); now.UnixNano()-last > int64(time.Minute) && st.lastPurge.CompareAndSwap(last, now.UnixNano()) {
		st.d.Purge(ctx, now, maxSessions-1)
	}
	ss := &session{id: randomToken(32), user: user, byToken: byToken, expires: now.Add(st.ttl)}
	ss.csrf = csrfOf(ss.id)
	if err := st.d.Create(ctx, sessiondb.Session{IDHash: hashID(ss.id), User: user, ByToken: byToken, Expires: ss.expires}); err != nil {
		return nil, err
	}
	return ss, nil
}

func (st *sessionStore) get(ctx context.Context, id string) *session {
	got, err := st.d.Get(ctx, hashID(id), st.now())
	if err != nil || got == nil {
		return nil
	}
	return &session{id: id, csrf: csrfOf(id), user: got.User, byToken: got.ByToken, expires: got.Expires}
}

func (st *sessionStore) drop(ctx context.Context, id string) error {
	return st.d.Delete(ctx, hashID(id))
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (s *Server) cookieName() string {
	if s.d.Secure {
		return secureCookieName
	}
	return cookieName
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.d.Secure, SameSite: http.SameSiteStrictMode})
}

// sessionOf returns the request's login, nil when none.
func (s *Server) sessionOf(r *http.Request) *session {
	c, err := r.Cookie(s.cookieName())
	if err != nil || len(c.Value) > 128 {
		return nil
	}
	return s.sessions.get(r.Context(), c.Value)
}

// sameOrigin refuses cross-site state changes before the CSRF token is
// even read: a browser's Origin (or Sec-Fetch-Site) must be this site.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's cross-site form (they send Origin)
	}
	o := strings.TrimPrefix(strings.TrimPrefix(origin, "https://"), "http://")
	return o == r.Host
}

// authed wraps a page: it needs a login, and a state change (any method
// but GET and HEAD) needs this session's CSRF token in the form's csrf
// field and a same-origin request.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, ss *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := s.sessionOf(r)
		if ss == nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "Log in first.", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(r) {
				http.Error(w, "Cross-site request refused.", http.StatusForbidden)
				return
			}
			if err := r.ParseForm(); err != nil {
				http.Error(w, "The form is too large or malformed.", http.StatusRequestEntityTooLarge)
				return
			}
			if !equal(r.PostFormValue("csrf"), ss.csrf) {
				http.Error(w, "The form's CSRF token is missing or stale: reload the page.", http.StatusForbidden)
				return
			}
		}
		h(w, r, ss)
	}
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.sessionOf(r) != nil {
		http.Redirect(w, r, "/agents", http.StatusSeeOther)
		return
	}
	tok := randomToken(24)
	s.setCookie(w, loginCookie, tok, 600)
	s.render(w, r, nil, "login", map[string]any{"LoginCSRF": tok, "XMPP": s.d.CheckPassword != nil, "Token": s.d.Token != ""})
}

// loginFailed is the one answer for every refused login: which of the
// account, the admin list or the password was wrong is not told.
const loginFailed = "Login failed: wrong credentials, or the account is not an operator."

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "Use the login form.", http.StatusMethodNotAllowed)
		return
	}
	if !s.logLimit.allow(clientAddr(r)) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, "Too many login attempts: wait a minute.", http.StatusTooManyRequests)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "Cross-site request refused.", http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "The form is too large or malformed.", http.StatusRequestEntityTooLarge)
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !equal(r.PostFormValue("csrf"), c.Value) {
		http.Error(w, "The login form is stale: reload the page.", http.StatusForbidden)
		return
	}
	user, byToken, err := s.authenticate(r.Context(), r.PostFormValue("token"), r.PostFormValue("jid"), r.PostFormValue("password"))
	if err != nil {
		s.d.Log.Info("console login refused", "addr", clientAddr(r), "reason", err)
		w.WriteHeader(http.StatusUnauthorized)
		tok := randomToken(24)
		s.setCookie(w, loginCookie, tok, 600)
		s.render(w, r, nil, "login", map[string]any{"LoginCSRF": tok, "XMPP": s.d.CheckPassword != nil, "Token": s.d.Token != "", "Error": loginFailed})
		return
	}
	ss, err := s.sessions.create(r.Context(), user, byToken)
	if err != nil {
		s.d.Log.Warn("console: session", "err", err)
		http.Error(w, "The login could not be stored; the gateway's log has the reason.", http.StatusInternalServerError)
		return
	}
	s.setCookie(w, loginCookie, "", -1)
	s.setCookie(w, s.cookieName(), ss.id, int(s.d.SessionTTL/time.Second))
	s.d.Log.Info("console login", "operator", user, "by_token", byToken, "addr", clientAddr(r))
	http.Redirect(w, r, "/agents", http.StatusSeeOther)
}

// authenticate checks a token, or an XMPP account: an admin first (a
// non-admin's password is never tried), then its password by SASL.
func (s *Server) authenticate(ctx context.Context, token, account, password string) (user string, byToken bool, err error) {
	if token != "" {
		if s.d.Token == "" || len(token) > 4096 || !equal(token, s.d.Token) {
			return "", false, errors.New("wrong token")
		}
		return s.d.TokenUser, true, nil
	}
	if s.d.CheckPassword == nil {
		return "", false, errors.New("XMPP login is off")
	}
	if account == "" || password == "" || len(account) > 3071 || len(password) > 1024 {
		return "", false, errors.New("empty or oversized field")
	}
	j, err := jid.Parse(account)
	if err != nil || j.Localpart() == "" {
		return "", false, errors.New("not an account JID")
	}
	bare := j.Bare().String()
	if !s.d.IsAdmin(bare) {
		return "", false, errors.New("not in [xmpp] admins")
	}
	if err := s.d.CheckPassword(ctx, bare, password); err != nil {
		return "", false, errors.New("XMPP login failed")
	}
	return bare, false, nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, ss *session) {
	if err := s.sessions.drop(r.Context(), ss.id); err != nil {
		s.d.Log.Warn("console: logout", "err", err)
		http.Error(w, "The logout could not be stored; the gateway's log has the reason.", http.StatusInternalServerError)
		return
	}
	s.setCookie(w, s.cookieName(), "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// clientAddr is the rate limit's key: the peer's IP.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limiter is a token bucket per key.
type limiter struct {
	mu    sync.Mutex
	rate  float64
	burst float64
	now   func() time.Time
	m     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), now: now, m: map[string]*bucket{}}
}

// maxBuckets bounds the addresses tracked; full buckets are forgotten.
const maxBuckets = 100000

func (l *limiter) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxBuckets {
			for k, x := range l.m {
				if x.tokens+now.Sub(x.last).Seconds()*l.rate >= l.burst {
					delete(l.m, k)
				}
			}
		}
		b = &bucket{tokens: l.burst, last: now}
		l.m[key] = b
	}
	b.tokens += now.Sub(b.last).Seconds() * l.rate
	if b.tokens > l.burst {
		b.tokens = l.burst
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
