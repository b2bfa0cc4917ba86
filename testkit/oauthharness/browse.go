package oauthharness

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// Browse plays the browser for an authorization URL that a program
// printed (`agentgw oauth login`): it logs in as user on the issuer's
// development pages, consents, and follows the final redirect to the
// program's redirect URI, whose answer it returns (status and a bounded
// body).
func (is *Issuer) Browse(ctx context.Context, authURL, user string) (int, string, error) {
	if !strings.HasPrefix(authURL, is.URL+"/") {
		return 0, "", fmt.Errorf("oauthharness: %.200s is not this issuer's", authURL)
	}
	jar, _ := cookiejar.New(nil)
	var status int
	var body string
	left := false
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		left = !strings.HasPrefix(req.URL.String(), is.URL+"/")
		return nil
	}}
	browser.Transport = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(req.WithContext(ctx))
		if err == nil && !strings.HasPrefix(req.URL.String(), is.URL+"/") {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			status, body = resp.StatusCode, string(b)
			resp.Body = io.NopCloser(strings.NewReader(body))
		}
		return resp, err
	})
	if err := drivePages(browser, authURL, user, func() bool { return left }); err != nil {
		return 0, "", err
	}
	if !left {
		return 0, "", errors.New("oauthharness: the pages never redirected back to the client")
	}
	return status, body, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// drivePages walks the issuer's development pages from start: a login
// form (user, any password), then consent, each posted to its form's
// action, until done reports true (the browser reached the client's
// redirect URI).
func drivePages(browser *http.Client, start, user string, done func() bool) error {
	next := start
	var form url.Values
	for step := 0; step < 6 && !done(); step++ {
		var resp *http.Response
		var err error
		if form == nil {
			resp, err = browser.Get(next)
		} else {
			resp, err = browser.PostForm(next, form)
		}
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if done() {
			break
		}
		page := resp.Request.URL
		m := formAction.FindSubmatch(body)
		if m == nil {
			return fmt.Errorf("oauthharness: unexpected page %s (%s): %.300s", page, resp.Status, body)
		}
		action, err := page.Parse(html.UnescapeString(string(m[1])))
		if err != nil {
			return err
		}
		next = action.String()
		if strings.Contains(string(body), `name="login"`) {
			form = url.Values{"prompt": {"login"}, "login": {user}, "password": {"any"}}
		} else {
			form = url.Values{"prompt": {"consent"}}
		}
	}
	return nil
}
