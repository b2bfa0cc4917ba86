// Package ijson parses I-JSON (RFC 7493) with limits and produces RFC 8785
// canonical JSON and XEP-0300 SHA-256 hashes.
//
// Parse enforces the I-JSON prerequisites that RFC 8785 section 3.1 names:
// unique member names (compared after unescaping), well-formed Unicode with no
// lone surrogates, and numbers that are finite IEEE-754 doubles. Numbers that
// underflow (for example 1e-400) round to zero like any other decimal that is
// not exactly representable. Unicode noncharacters are accepted, because
// RFC 8785 and the protocol only require well-formed Unicode.
//
// Parsing is iterative (no recursion), linear in the input size, and bounded
// by Limits. Errors carry a fixed reason phrase and a byte offset, never any
// text from the document.
package ijson

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
)

// Limits bounds the resources one document may use. A zero field means the
// default from DefaultLimits.
type Limits struct {
	MaxBytes       int // whole document; default 1<<20
	MaxDepth       int // nesting of objects and arrays; default 64
	MaxMembers     int // members of one object or elements of one array; default 10000
	MaxStringBytes int // one string or member name after unescaping; default 256<<10
	MaxValues      int // total values in the document; default 200000
}

// DefaultLimits are the limits applied for zero Limits fields.
var DefaultLimits = Limits{
	MaxBytes:       1 << 20,
	MaxDepth:       64,
	MaxMembers:     10000,
	MaxStringBytes: 256 << 10,
	MaxValues:      200000,
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultLimits.MaxMembers
	}
	if l.MaxStringBytes <= 0 {
		l.MaxStringBytes = DefaultLimits.MaxStringBytes
	}
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultLimits.MaxValues
	}
	return l
}

// ErrorKind classifies why a document was rejected.
type ErrorKind int

const (
	KindSyntax        ErrorKind = iota + 1 // not JSON (RFC 8259), or trailing data
	KindDuplicateKey                       // two members of one object share a name
	KindLoneSurrogate                      // an unpaired UTF-16 surrogate, escaped or raw
	KindInvalidUTF8                        // bytes that are not UTF-8
	KindNumberRange                        // a number that is not a finite double
	KindLimit                              // a Limits bound was exceeded
)

func (k ErrorKind) String() string {
	switch k {
	case KindSyntax:
		return "syntax"
	case KindDuplicateKey:
		return "duplicate-key"
	case KindLoneSurrogate:
		return "lone-surrogate"
	case KindInvalidUTF8:
		return "invalid-utf8"
	case KindNumberRange:
		return "number-range"
	case KindLimit:
		return "limit"
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// Error reports a rejected document. Reason is a fixed phrase; it never
// contains document content, so the error is safe to log or return to peers.
type Error struct {
	Kind   ErrorKind
	Offset int // byte offset in the input; -1 when not from parsing
	Reason string
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return "ijson: " + e.Kind.String() + ": " + e.Reason
	}
	return "ijson: " + e.Kind.String() + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// IsLimit reports whether err is an *Error of kind KindLimit, which callers
// map to a resource-constraint rather than a malformed-input condition.
func IsLimit(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindLimit
}

// Canonicalize parses data under lim and returns its RFC 8785 canonical form
// together with the parsed value.
func Canonicalize(data []byte, lim Limits) (canon []byte, v any, err error) {
	v, err = Parse(data, lim)
	if err != nil {
		return nil, nil, err
	}
	canon, err = Canonical(v)
	if err != nil {
		return nil, nil, err
	}
	return canon, v, nil
}

// Hash returns the XEP-0300 value for canonical bytes: standard padded
// base64 of their SHA-256 digest.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return base64.StdEncoding.EncodeToString(sum[:])
}
