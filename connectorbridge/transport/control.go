package transport

import (
	"log/slog"
	"net/url"
	"time"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentgw/agentgw/backendkit"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentgw/agentgw/connectorbridge/wire"
)

// Control-plane size limits.
const (
	maxCardBytes   = 1 << 20
	maxSkillBytes  = 256 << 10
	maxHealthBytes = 64 << 10
)

// Control is the connector's HTTP control plane (§3, §4): the public
// Connector Card and Skill, and the keyed /health probe. HTTP must not
// follow redirects, which could carry the Bearer key to another host.
type Control struct {
	Base    *url.URL
	HTTP    *http.Client
	APIKey  string // the system API key; "" sends no Authorization header
	Timeout time.Duration
	Red     *backendkit.Redactor // scrubs network error text
	Log     *slog.Logger
}

// HealthReply is the /health body (§4.3); every member is optional here
// because 2xx alone means available.
type HealthReply struct {
	Status               string      `json:"status"`
	ConnectorCardID      string      `json:"connector_card_id"`
	ConnectorCardVersion string      `json:"connector_card_version"`
	ProtocolVersion      string      `json:"protocol_version"`
	Build                *wire.Build `json:"build"`
}

// HTTPError is a non-2xx answer; it carries only the status code.
type HTTPError struct {
	Endpoint string
	Code     int
}

func (e *HTTPError) Error() string {
	if e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden {
		return fmt.Sprintf("connector %s: system API key rejected (HTTP %d)", e.Endpoint, e.Code)
	}
	return fmt.Sprintf("connector %s: HTTP %d", e.Endpoint, e.Code)
}

// IsAuthFailure reports whether err is a 401 or 403 answer.
func IsAuthFailure(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && (he.Code == http.StatusUnauthorized || he.Code == http.StatusForbidden)
}

// get performs one control-plane GET with a size limit. withKey adds the
// Bearer key; the Card and Skill are public and never get it (§3).
func (c *Control) get(ctx context.Context, path string, withKey bool, limit int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, wire.EndpointURL(c.Base, path), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("connector %s: cannot build request", path)
	}
	if withKey && c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("connector %s: %s", path, c.Red.Scrub(NetReason(err)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("connector %s: reading the answer failed", path)
	}
	if int64(len(body)) > limit {
		return resp.StatusCode, nil, fmt.Errorf("connector %s: answer exceeds %d bytes", path, limit)
	}
	return resp.StatusCode, body, nil
}

// NetReason turns a transport error into a short reason without the URL's
// details beyond what the operator configured.
func NetReason(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return wire.TruncateRunes(s, 120)
}

// FetchCard reads and validates /connector-card.json.
func (c *Control) FetchCard(ctx context.Context) (*wire.Card, []byte, error) {
	code, body, err := c.get(ctx, "/connector-card.json", false, maxCardBytes)
	if err != nil {
		return nil, nil, err
	}
	if code != http.StatusOK {
		return nil, nil, &HTTPError{"/connector-card.json", code}
	}
	card, err := wire.ParseCard(body, c.APIKey)
	if err != nil {
		return nil, nil, err
	}
	return card, body, nil
}

// Skill is the connector's primary Skill, if it publishes one.
type Skill struct {
	Text string // Markdown; "" when the connector has no Skill
	Name string // the SKILL.md header name when present and well formed
}

// FetchSkill reads /skill.md: 200 is the Skill, 204 and 404 mean none.
func (c *Control) FetchSkill(ctx context.Context) (Skill, error) {
	code, body, err := c.get(ctx, "/skill.md", false, maxSkillBytes)
	if err != nil {
		return Skill{}, err
	}
	switch code {
	case http.StatusOK:
	case http.StatusNoContent, http.StatusNotFound:
		return Skill{}, nil
	default:
		return Skill{}, &HTTPError{"/skill.md", code}
	}
	if !utf8.Valid(body) {
		return Skill{}, errors.New("connector /skill.md: not UTF-8")
	}
	if backendkit.ContainsSecret(body, c.APIKey) {
		return Skill{}, errors.New("connector /skill.md contains the system API key; Skill refused")
	}
	text := string(body)
	return Skill{Text: text, Name: SkillName(text)}, nil
}

// SkillName reads "name:" from the SKILL.md front matter and returns it if
// it is lowercase hyphen-case (§4.2).
func SkillName(text string) string {
	lines := strings.SplitN(text, "\n", 40)
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return ""
	}
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		if l == "---" {
			break
		}
		if v, ok := strings.CutPrefix(l, "name:"); ok {
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if validSkillName(v) {
				return v
			}
			return ""
		}
	}
	return ""
}

func validSkillName(s string) bool {
	if len(s) == 0 || len(s) > 128 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ProbeHealth performs one GET /health with the key (§4.3).
func (c *Control) ProbeHealth(ctx context.Context) (*HealthReply, error) {
	code, body, err := c.get(ctx, "/health", true, maxHealthBytes)
	if err != nil {
		return nil, err
	}
	if code < 200 || code > 299 {
		return nil, &HTTPError{"/health", code}
	}
	var h HealthReply
	if len(strings.TrimSpace(string(body))) > 0 {
		if json.Unmarshal(body, &h) != nil {
			// 2xx means available; a body we cannot read only loses
			// change detection.
			c.Log.Debug("connector /health answer is not the documented JSON object")
			return &HealthReply{}, nil
		}
	}
	return &h, nil
}
