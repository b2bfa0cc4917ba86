package connectorbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// HealthState is the connector's system-level state as the gateway sees it.
type HealthState string

// Health states (§4.3). unauthorized is a 401/403 from /health or /ws;
// incompatible is a protocol version outside the admission window or a
// card id mismatch, which cannot stay online.
const (
	HealthUnknown      HealthState = "unknown"
	HealthOK           HealthState = "ok"
	HealthDegraded     HealthState = "degraded"
	HealthOffline      HealthState = "offline"
	HealthUnauthorized HealthState = "unauthorized"
	HealthIncompatible HealthState = "incompatible"
)

// usable reports whether the data plane may be used in this state.
func (h HealthState) usable() bool {
	return h == HealthOK || h == HealthDegraded || h == HealthUnknown
}

// healthReply is the /health body (§4.3); every member is optional here
// because 2xx alone means available.
type healthReply struct {
	Status               string      `json:"status"`
	ConnectorCardID      string      `json:"connector_card_id"`
	ConnectorCardVersion string      `json:"connector_card_version"`
	ProtocolVersion      string      `json:"protocol_version"`
	Build                *wire.Build `json:"build"`
}

// httpError is a non-2xx answer; it carries only the status code.
type httpError struct {
	endpoint string
	code     int
}

func (e *httpError) Error() string {
	if e.code == http.StatusUnauthorized || e.code == http.StatusForbidden {
		return fmt.Sprintf("connector %s: system API key rejected (HTTP %d)", e.endpoint, e.code)
	}
	return fmt.Sprintf("connector %s: HTTP %d", e.endpoint, e.code)
}

func isAuthFailure(err error) bool {
	var he *httpError
	return errors.As(err, &he) && (he.code == http.StatusUnauthorized || he.code == http.StatusForbidden)
}

// get performs one control-plane GET with a size limit. withKey adds the
// Bearer key; the Card and Skill are public and never get it (§3).
func (c *Client) get(ctx context.Context, path string, withKey bool, limit int64) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, wire.EndpointURL(c.base, path), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("connector %s: cannot build request", path)
	}
	if withKey && c.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("connector %s: %s", path, c.red.Scrub(netReason(err)))
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

// netReason turns a transport error into a short reason without the URL's
// details beyond what the operator configured.
func netReason(err error) string {
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
	return truncateRunes(s, 120)
}

// fetchCard reads and validates /connector-card.json.
func (c *Client) fetchCard(ctx context.Context) (*wire.Card, []byte, error) {
	code, body, err := c.get(ctx, "/connector-card.json", false, maxCardBytes)
	if err != nil {
		return nil, nil, err
	}
	if code != http.StatusOK {
		return nil, nil, &httpError{"/connector-card.json", code}
	}
	card, err := wire.ParseCard(body, c.o.APIKey)
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

// fetchSkill reads /skill.md: 200 is the Skill, 204 and 404 mean none.
func (c *Client) fetchSkill(ctx context.Context) (Skill, error) {
	code, body, err := c.get(ctx, "/skill.md", false, maxSkillBytes)
	if err != nil {
		return Skill{}, err
	}
	switch code {
	case http.StatusOK:
	case http.StatusNoContent, http.StatusNotFound:
		return Skill{}, nil
	default:
		return Skill{}, &httpError{"/skill.md", code}
	}
	if !utf8.Valid(body) {
		return Skill{}, errors.New("connector /skill.md: not UTF-8")
	}
	if containsSecret(body, c.o.APIKey) {
		return Skill{}, errors.New("connector /skill.md contains the system API key; Skill refused")
	}
	text := string(body)
	return Skill{Text: text, Name: skillName(text)}, nil
}

// skillName reads "name:" from the SKILL.md front matter and returns it if
// it is lowercase hyphen-case (§4.2).
func skillName(text string) string {
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

// probeHealth performs one GET /health with the key (§4.3).
func (c *Client) probeHealth(ctx context.Context) (*healthReply, error) {
	code, body, err := c.get(ctx, "/health", true, maxHealthBytes)
	if err != nil {
		return nil, err
	}
	if code < 200 || code > 299 {
		return nil, &httpError{"/health", code}
	}
	var h healthReply
	if len(strings.TrimSpace(string(body))) > 0 {
		if json.Unmarshal(body, &h) != nil {
			// 2xx means available; a body we cannot read only loses
			// change detection.
			c.log.Debug("connector /health answer is not the documented JSON object")
			return &healthReply{}, nil
		}
	}
	return &h, nil
}
