package mcpoauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// maxTokenResponse bounds a token endpoint response.
const maxTokenResponse = 1 << 20

// tokens is a token endpoint's answer.
type tokens struct {
	Access  string
	Refresh string
	Expiry  time.Time // zero: unknown
	Scope   string
}

// TokenError is the authorization server's refusal of a token request:
// its error code only (RFC 6749 §5.2), never its free text, which is the
// server's to fill.
type TokenError struct {
	Status int
	Code   string
}

func (e *TokenError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("token endpoint answered %d", e.Status)
	}
	return fmt.Sprintf("token endpoint answered %d %s", e.Status, e.Code)
}

// client identifies the gateway at the token endpoint.
type client struct {
	ID     string
	Secret string // "": a public client
}

// tokenRequest posts form to the token endpoint of as, authenticating as
// c: HTTP Basic (client_secret_basic) unless the server lists only
// client_secret_post, client_id in the form for a public client.
func tokenRequest(ctx context.Context, hc *http.Client, md *Metadata, c client, form url.Values, now time.Time) (*tokens, error) {
	basic := c.Secret != ""
	if basic && len(md.AS.TokenEndpointAuthMethodsSupported) > 0 &&
		!slices.Contains(md.AS.TokenEndpointAuthMethodsSupported, "client_secret_basic") &&
		slices.Contains(md.AS.TokenEndpointAuthMethodsSupported, "client_secret_post") {
		basic = false
	}
	if !basic {
		form.Set("client_id", c.ID)
		if c.Secret != "" {
			form.Set("client_secret", c.Secret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.AS.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errors.New("token_endpoint is not a URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 §2.3.1: both form-encoded before Basic.
		req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}
	resp, err := hc.Do(req)
	if err != nil {
		// A url.Error names the endpoint, which carries no secret; the
		// form does not appear in it.
		return nil, fmt.Errorf("token endpoint: %s", bounded(err.Error()))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return nil, errors.New("token endpoint: reading the response failed")
	}
	if len(body) > maxTokenResponse {
		return nil, errors.New("token endpoint: response larger than 1 MiB")
	}
	var r struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		ExpiresIn    json.Number     `json:"expires_in"`
		RefreshToken string          `json:"refresh_token"`
		Scope        string          `json:"scope"`
		Error        json.RawMessage `json:"error"`
	}
	jerr := json.Unmarshal(body, &r)
	if resp.StatusCode != http.StatusOK {
		var code string
		_ = json.Unmarshal(r.Error, &code)
		return nil, &TokenError{Status: resp.StatusCode, Code: errorCode(code)}
	}
	if jerr != nil {
		return nil, errors.New("token endpoint: the response is not a JSON token response")
	}
	if r.AccessToken == "" {
		return nil, errors.New("token endpoint: the response has no access_token")
	}
	if !strings.EqualFold(r.TokenType, "bearer") {
		return nil, errors.New("token endpoint: the token_type is not Bearer")
	}
	t := &tokens{Access: r.AccessToken, Refresh: r.RefreshToken, Scope: r.Scope}
	if n, err := r.ExpiresIn.Int64(); err == nil && n > 0 {
		t.Expiry = now.Add(time.Duration(min(n, 366*24*3600)) * time.Second)
	}
	return t, nil
}

// errorCode keeps an RFC 6749 error code if it looks like one.
func errorCode(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '_' {
			return ""
		}
	}
	return s
}
