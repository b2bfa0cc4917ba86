package mcpfront

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// stateToken is the requestState of an input-required result under MCP
// 2026-07-28 (multi round-trip requests): the host echoes it when it
// retries tools/call with the answer. It names the XMPP task and the input
// request it answers, and is signed with a key that lives as long as the
// process, so a host cannot point an answer at another task.
type stateToken struct {
	Tool      string `json:"tool"` // MCP tool name
	Endpoint  string `json:"ep"`
	Version   string `json:"ver"`
	TaskID    string `json:"task"`
	RequestID string `json:"req"`
	Input     string `json:"in"` // input request ID
	Attempt   int    `json:"n"`  // answers rejected so far
	Expires   int64  `json:"exp"`
}

// maxStateBytes bounds a requestState the front will open.
const maxStateBytes = 4096

// stateLifetime bounds a token when the input request has no expiry.
const stateLifetime = 24 * time.Hour

var errBadState = errors.New("requestState is not one this server issued, or it expired")

var b64 = base64.RawURLEncoding

func (f *Front) seal(t stateToken) string {
	payload, _ := json.Marshal(t)
	m := hmac.New(sha256.New, f.key)
	m.Write(payload)
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(m.Sum(nil))
}

func (f *Front) open(s string, now time.Time) (stateToken, error) {
	var t stateToken
	if len(s) > maxStateBytes {
		return t, errBadState
	}
	p, sig, ok := strings.Cut(s, ".")
	if !ok {
		return t, errBadState
	}
	payload, err1 := b64.DecodeString(p)
	mac, err2 := b64.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return t, errBadState
	}
	m := hmac.New(sha256.New, f.key)
	m.Write(payload)
	if !hmac.Equal(mac, m.Sum(nil)) {
		return t, errBadState
	}
	if json.Unmarshal(payload, &t) != nil || now.Unix() >= t.Expires {
		return stateToken{}, errBadState
	}
	return t, nil
}
