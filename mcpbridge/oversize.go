package mcpbridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// An inbound stdio frame over the line limit cannot be carried (it would
// have to be held whole), but it need not cost the connection: the frame
// is one line of one JSON value, so the reader discards the rest of that
// value while it scans it, keeps only its top-level "id" and whether it
// has a "method", and goes on with the next line. A response over the
// limit becomes a JSON-RPC error for the one call that asked
// (codeFrameTooLarge, which the bridge settles agentgw:result-too-large);
// a request over the limit is answered with an error to the server; the
// endpoint stays available.

// codeFrameTooLarge is the JSON-RPC error the reader puts in place of a
// response over the line limit (in the implementation-defined server
// error range).
const codeFrameTooLarge = -32050

const msgFrameTooLarge = "the MCP server's response exceeded the gateway's stdio frame limit and was discarded"

// valueScan follows a stream of JSON values byte by byte: nesting depth,
// strings and escapes, and for each top-level object its "id" member (a
// scalar, bounded) and whether it has "method". It holds no more than a
// few hundred bytes whatever it reads.
type valueScan struct {
	depth     int
	inStr     bool
	esc       bool
	started   bool // inside a top-level value
	wantKey   bool // the next string at depth 1 is a member name
	inKey     bool
	key       []byte
	keyDone   string // the last member name at depth 1, until its value starts
	capID     bool
	id        []byte
	hasMethod bool
	ended     bool // a top-level value just ended
}

const maxScanID = 300

func (s *valueScan) reset() {
	*s = valueScan{key: s.key[:0], id: s.id[:0]}
}

// feed advances the scan by one byte.
func (s *valueScan) feed(c byte) {
	s.ended = false
	if s.capID {
		switch {
		case s.inStr || (c != ',' && c != '}' && !(s.depth == 1 && (c == ' ' || c == '\n' || c == '\r' || c == '\t'))):
			if len(s.id) < maxScanID {
				s.id = append(s.id, c)
			} else {
				s.id = s.id[:0]
				s.capID = false
			}
		default:
			s.capID = false
		}
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.inKey {
				s.inKey = false
				s.keyDone = string(s.key)
			}
			return
		}
		if s.inKey && len(s.key) < 16 {
			s.key = append(s.key, c)
		}
		return
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.wantKey {
			s.inKey, s.wantKey, s.key = true, false, s.key[:0]
		}
	case '{', '[':
		if s.depth == 0 {
			s.reset()
			s.started = true
		}
		s.depth++
		if s.depth == 1 && c == '{' {
			s.wantKey = true
		}
	case '}', ']':
		s.depth--
		if s.depth == 0 && s.started {
			s.started, s.ended = false, true
		}
	case ',':
		if s.depth == 1 {
			s.wantKey = true
		}
	case ':':
		if s.depth == 1 && s.keyDone != "" {
			switch s.keyDone {
			case "id":
				s.capID, s.id = true, s.id[:0]
			case "method":
				s.hasMethod = true
			}
			s.keyDone = ""
		}
	}
}

// scanFeed is an io.Reader that feeds every byte it passes to a scan.
type scanFeed struct {
	r    io.Reader
	scan *valueScan
}

func (f *scanFeed) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	for _, c := range p[:n] {
		f.scan.feed(c)
	}
	return n, err
}

// skipOversize reads on from r, the rest of a frame whose first part the
// decoder already consumed through the scan, up to the end of its line.
// It returns the frame's id (nil when it had none or it was not a scalar)
// and whether it was a request.
func skipOversize(r *bufio.Reader, scan *valueScan) (json.RawMessage, bool, error) {
	for scan.started {
		c, err := r.ReadByte()
		if err != nil {
			return nil, false, err
		}
		scan.feed(c)
	}
	var id json.RawMessage
	if t := bytes.TrimSpace(scan.id); len(t) > 0 && json.Valid(t) && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		id = append(json.RawMessage(nil), t...)
	}
	isReq := scan.hasMethod
	for {
		c, err := r.ReadByte()
		if err != nil {
			return id, isReq, err
		}
		if c == '\n' {
			return id, isReq, nil
		}
	}
}
