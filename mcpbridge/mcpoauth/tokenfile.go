package mcpoauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// TokenFile is what token_file holds: the refresh token of one login
// and what it is for. It is written atomically with mode 0600 and
// refused with a looser mode.
type TokenFile struct {
	V            int       `json:"v"`
	Issuer       string    `json:"issuer"`
	Resource     string    `json:"resource"`
	ClientID     string    `json:"client_id"`
	RefreshToken string    `json:"refresh_token"`
	Saved        time.Time `json:"saved"`
}

// maxTokenFile bounds the file read.
const maxTokenFile = 64 << 10

// ErrNoTokenFile is returned when token_file does not exist yet.
var ErrNoTokenFile = errors.New("no token file")

// ReadTokenFile reads and checks a token file. Its errors name the file,
// never its content.
func ReadTokenFile(path string) (*TokenFile, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("token_file %s does not exist: %w", path, ErrNoTokenFile)
	}
	if err != nil {
		return nil, fmt.Errorf("token_file %s: %v", path, errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("token_file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token_file %s has mode %04o; it holds a refresh token, so it must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	if st.Size() > maxTokenFile {
		return nil, fmt.Errorf("token_file %s is larger than 64 KiB", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token_file %s cannot be read", path)
	}
	var tf TokenFile
	if json.Unmarshal(data, &tf) != nil || tf.V != 1 || tf.RefreshToken == "" {
		return nil, fmt.Errorf("token_file %s is not a token file written by `agentgw oauth login`", path)
	}
	return &tf, nil
}

// WriteTokenFile writes tf to path atomically (a temporary file of mode
// 0600 in the same directory, synced, then renamed over path). A missing
// directory is made with mode 0700.
func WriteTokenFile(path string, tf *TokenFile) error {
	tf.V = 1
	data, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("token_file directory %s: %v", dir, errors.Unwrap(err))
	}
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return fmt.Errorf("token_file directory %s is not writable", dir)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename this finds nothing
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("token_file %s: cannot set mode 0600", path)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("token_file %s: write failed", path)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("token_file %s: sync failed", path)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("token_file %s: write failed", path)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("token_file %s: rename failed", path)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
