package oanbridge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentgw/agentgw/oanbridge/wire"
)

// MaxKeyBytes bounds a connector API key.
const MaxKeyBytes = 512

// ValidKey reports whether k looks like a connector API key: the gofers_
// prefix and then only [A-Za-z0-9_-]. A key with a newline or any other
// character could smuggle a header or a log line, and is refused.
func ValidKey(k string) bool {
	if !strings.HasPrefix(k, wire.KeyPrefix) || len(k) <= len(wire.KeyPrefix)+8 || len(k) > MaxKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ErrBadKey is a key file that does not hold one valid key.
var ErrBadKey = errors.New("the OAN API key file does not hold a valid gofers_ key (pair again with `agentgw oan pair`)")

// ReadKey reads the key file. Only a trailing newline is tolerated; the
// error never contains the file's content.
func ReadKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("the OAN API key file %s does not exist: run `agentgw oan pair`", path)
		}
		return "", fmt.Errorf("cannot read the OAN API key file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxKeyBytes+3))
	if err != nil {
		return "", fmt.Errorf("cannot read the OAN API key file: %w", err)
	}
	k := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if !ValidKey(k) {
		return "", ErrBadKey
	}
	return k, nil
}

// KeyID is a key's fingerprint for the store and logs: a truncated
// SHA-256, never the key.
func KeyID(k string) string {
	h := sha256.Sum256([]byte("agentgw oan key id\x00" + k))
	return hex.EncodeToString(h[:8])
}

// ErrKeyExists refuses to overwrite a key without --force.
var ErrKeyExists = errors.New("an OAN API key file already exists; pass --force to replace it (the old key stays valid on OAN until revoked)")

// WriteKey writes the key atomically with mode 0600: a temporary file in
// the same directory, synced, then renamed over path. Without force an
// existing file is left alone.
func WriteKey(path, key string, force bool) error {
	if !ValidKey(key) {
		return ErrBadKey
	}
	if !force {
		if _, err := os.Lstat(path); err == nil {
			return ErrKeyExists
		}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".oan-key-*")
	if err != nil {
		return fmt.Errorf("cannot write the OAN API key file: %w", err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write the OAN API key file: %w", err)
	}
	if _, err := tmp.WriteString(key + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write the OAN API key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("cannot write the OAN API key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cannot write the OAN API key file: %w", err)
	}
	if !force {
		// Link fails if path appeared meanwhile: no silent overwrite.
		if err := os.Link(name, path); err != nil {
			if errors.Is(err, os.ErrExist) {
				return ErrKeyExists
			}
			return fmt.Errorf("cannot write the OAN API key file: %w", err)
		}
	} else if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("cannot write the OAN API key file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Redeem redeems a pairing code (POST /auth/oan/pairing-codes/redeem, no
// auth header) and returns the key and the account's user id. The key is
// checked before it is returned; errors never contain it or the code.
func Redeem(ctx context.Context, baseURL, code string) (key, userID string, err error) {
	if code == "" || len(code) > 128 || strings.ContainsAny(code, " \t\r\n") {
		return "", "", errors.New("the pairing code is malformed")
	}
	a, err := newAPI(baseURL, nil)
	if err != nil {
		return "", "", err
	}
	body, _ := json.Marshal(map[string]string{"code": code})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url("/auth/oan/pairing-codes/redeem", nil), bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("cannot reach OAN: %w", scrubURLErr(err))
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return "", "", errors.New("OAN refused the pairing code: it is unknown, expired or already used (codes last 10 minutes and work once)")
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return "", "", errors.New("OAN answered the redemption with a redirect; it is not followed")
	case resp.StatusCode != http.StatusOK:
		return "", "", fmt.Errorf("OAN refused the redemption with HTTP %d", resp.StatusCode)
	}
	var r struct {
		APIKey string `json:"apiKey"`
		UserID string `json:"userId"`
	}
	if json.Unmarshal(data, &r) != nil {
		return "", "", errors.New("OAN's redemption answer is not valid JSON")
	}
	if !ValidKey(r.APIKey) {
		return "", "", errors.New("OAN returned a malformed API key; nothing was written")
	}
	if !wire.ValidID(r.UserID) {
		r.UserID = ""
	}
	return r.APIKey, r.UserID, nil
}

// Check is the live check for `agentgw doctor`: the key file holds a
// valid key and OAN accepts it (GET /events/cursor). The error names
// the fix, never the key.
func Check(ctx context.Context, baseURL, keyFile string) error {
	key, err := ReadKey(keyFile)
	if err != nil {
		return err
	}
	a, err := newAPI(baseURL, func() string { return key })
	if err != nil {
		return err
	}
	var c struct {
		Seq string `json:"seq"`
	}
	if _, err := a.do(ctx, http.MethodGet, "/events/cursor", nil, nil, &c); err != nil {
		if errors.Is(err, ErrRevoked) {
			return errors.New("OAN rejects the API key (revoked or unknown): pair again with `agentgw oan pair --force`")
		}
		return err
	}
	if _, err := wire.ParseSeq(c.Seq); err != nil {
		return errors.New("OAN's /events/cursor answer is not a decimal cursor")
	}
	return nil
}
