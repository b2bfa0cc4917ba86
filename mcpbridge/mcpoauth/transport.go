package mcpoauth

import (
	"io"
	"net/http"
)

// Transport puts the Source's access token on every request (MCP: in
// the Authorization header of every request, never in the URL) and,
// when the server answers 401, gets a new token and sends the request
// once more (a request whose body cannot be replayed is not).
type Transport struct {
	Base   http.RoundTripper
	Source *Source
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.Source.Token(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.Base.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	t.Source.Invalidate(tok)
	if tok, err = t.Source.Token(req.Context()); err != nil {
		return nil, err
	}
	r = req.Clone(req.Context())
	if req.GetBody != nil {
		if r.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.Base.RoundTrip(r)
}
