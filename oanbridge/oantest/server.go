// Package oantest runs the reference OpenAgentNetwork server (server.mjs:
// express + the real socket.io from node_modules) as a separate Node
// process and drives its test switches. It is a test helper: the agentgw
// binary never links it.
package oantest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Server is a running reference server.
type Server struct {
	URL        string // http://127.0.0.1:PORT (the API origin; REST under /api/v1)
	StorageURL string // the signed-URL storage host, another origin
	cmd        *exec.Cmd
	stderr     *bytes.Buffer
	once       sync.Once
}

// Script is the path of server.mjs.
func Script() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("oantest: cannot locate server.mjs")
	}
	p := filepath.Join(filepath.Dir(file), "server.mjs")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// ErrNoNode means node or the socket.io package is not installed.
var ErrNoNode = errors.New("oantest: node with the socket.io and express packages is not available")

// Start launches the server on free loopback ports.
func Start(extra ...string) (*Server, error) {
	script, err := Script()
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return nil, ErrNoNode
	}
	cmd := exec.Command("node", append([]string{script}, extra...)...)
	cmd.Dir = filepath.Dir(script)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-lines:
		var p struct{ Port, StoragePort int }
		if !ok || json.Unmarshal([]byte(l), &p) != nil || p.Port == 0 {
			cmd.Process.Kill()
			cmd.Wait()
			if strings.Contains(errb.String(), "Cannot find package") {
				return nil, ErrNoNode
			}
			return nil, fmt.Errorf("oantest: server did not start: %s", tailOf(errb.String()))
		}
		return &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", p.Port), StorageURL: fmt.Sprintf("http://127.0.0.1:%d", p.StoragePort), cmd: cmd, stderr: &errb}, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, errors.New("oantest: server start timed out")
	}
}

func tailOf(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

// Close stops the server.
func (s *Server) Close() {
	s.once.Do(func() {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
}

// Stderr is the server's diagnostic output so far.
func (s *Server) Stderr() string { return s.stderr.String() }

// Control posts to /_control/path and decodes the answer into out (nil:
// discard).
func (s *Server) Control(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL+"/_control/"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("oantest: %s %s: HTTP %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// PairingCode issues a fresh pairing code.
func (s *Server) PairingCode() (string, error) {
	var r struct{ Code string }
	err := s.Control("POST", "pairing-code", map[string]any{}, &r)
	return r.Code, err
}

// Mode sets test switches: silent (bool, §4 silent failure), duplicate
// (bool, every event delivered twice plus the previous one again),
// storm5xx (n: the next n REST calls answer 503), redirect (URL: every
// authenticated REST call answers 307 there), endlessPages (bool: GET
// /events pages are always full), replyDelayMs, hostile ("newline-key":
// the next redeemed key contains a newline).
func (s *Server) Mode(m map[string]any) error { return s.Control("POST", "mode", m, nil) }

// Event is an envelope as the server recorded it.
type Event struct {
	Seq     string         `json:"seq"`
	EventID string         `json:"eventId"`
	Type    string         `json:"type"`
	GoferID string         `json:"goferId"`
	Payload map[string]any `json:"payload"`
}

// Emit records and delivers an event with the given envelope fields.
func (s *Server) Emit(fields map[string]any) (Event, error) {
	var e Event
	err := s.Control("POST", "emit", fields, &e)
	return e, err
}

// Raw delivers a raw envelope over the socket without recording it.
func (s *Server) Raw(envelope any) error { return s.Control("POST", "raw", envelope, nil) }

// MatchRequest, PairProposed and Relay create the counterpart-side events.
func (s *Server) MatchRequest(goferID, counterpart string) (Event, error) {
	var e Event
	err := s.Control("POST", "match-request", map[string]any{"goferId": goferID, "counterpartRoleName": counterpart}, &e)
	return e, err
}
func (s *Server) PairProposed(goferID, counterpart string, awaiting bool) (Event, error) {
	var e Event
	err := s.Control("POST", "pair-proposed", map[string]any{"goferId": goferID, "counterpartRoleName": counterpart, "awaiting": awaiting}, &e)
	return e, err
}
func (s *Server) Relay(goferID, conversationID, content string) (Event, error) {
	var e Event
	err := s.Control("POST", "relay", map[string]any{"goferId": goferID, "conversationId": conversationID, "content": content}, &e)
	return e, err
}

// Revoke deletes every key and force-disconnects the sockets; Ban bans
// the account (system_notice first); Drop closes the transports; and
// ServerDisconnect ends the namespace sessions ("io server disconnect").
func (s *Server) Revoke() error      { return s.Control("POST", "revoke", map[string]any{}, nil) }
func (s *Server) RevokeQuiet() error { return s.Control("POST", "revoke-quiet", map[string]any{}, nil) }
func (s *Server) Ban() error         { return s.Control("POST", "ban", map[string]any{}, nil) }
func (s *Server) Unban() error       { return s.Control("POST", "unban", map[string]any{}, nil) }
func (s *Server) Drop() error        { return s.Control("POST", "drop", map[string]any{}, nil) }
func (s *Server) ServerDisconnect() error {
	return s.Control("POST", "server-disconnect", map[string]any{}, nil)
}

// BanQuiet bans the account with the system_notice only, leaving the
// sockets connected.
func (s *Server) BanQuiet() error { return s.Control("POST", "ban-quiet", map[string]any{}, nil) }

// Request is one REST request the server saw.
type Request struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Auth   bool            `json:"auth"`
	Body   json.RawMessage `json:"body"`
}

// Log is what the server saw.
type Log struct {
	Requests        []Request `json:"requests"`
	StorageAuthSeen int       `json:"storageAuthSeen"`
	StorageHits     int       `json:"storageHits"`
	Cursor          string    `json:"cursor"`
	Events          int       `json:"events"`
}

// Log fetches the request log.
func (s *Server) Log() (Log, error) {
	var l Log
	err := s.Control("GET", "log", nil, &l)
	return l, err
}

// Count is how many requests matched method and a path prefix.
func (l Log) Count(method, prefix string) int {
	n := 0
	for _, r := range l.Requests {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// Sockets is the number of connected /oan sockets.
func (s *Server) Sockets() (int, error) {
	var r struct{ Count int }
	err := s.Control("GET", "sockets", nil, &r)
	return r.Count, err
}
