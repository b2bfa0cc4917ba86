// Package fuzzcheck implements the no-reflection property that agentgw's
// fuzz targets share: an error text sent to a peer is built only from words
// the program itself spells in its string literals, never from input.
//
// A word-level check is exact where a substring check is not: a decoder that
// quotes an attacker's tool name produces a word no source file contains,
// while input that happens to contain "missing" cannot make a fixed sentence
// look reflected.
package fuzzcheck

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Vocab is a set of words.
type Vocab map[string]bool

// Vocabulary returns the words of every string literal in the non-test Go
// files of the given package directories, relative to the module root.
func Vocabulary(tb testing.TB, dirs ...string) Vocab {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	v := Vocab{}
	fset := token.NewFileSet()
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(root, d, "*.go"))
		if err != nil || len(files) == 0 {
			tb.Fatalf("fuzzcheck: no Go files in %s", d)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				tb.Fatalf("fuzzcheck: %v", err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, w := range words(s) {
					v[w] = true
				}
				return true
			})
		}
	}
	return v
}

// Foreign returns the first word of text that v lacks, or "" when every
// word is known.
func (v Vocab) Foreign(text string) string {
	for _, w := range words(text) {
		if !v[w] {
			return w
		}
	}
	return ""
}

// words splits s into maximal runs of letters and non-ASCII runes. Digits,
// ASCII punctuation and spaces separate words, so offsets, indexes and
// format verbs never count as words.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || r > unicode.MaxASCII && !unicode.IsSpace(r))
	})
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("fuzzcheck: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Add puts the words of text into v, for vocabularies that live outside Go
// source, such as an embedded JSON Schema's keywords.
func (v Vocab) Add(text string) {
	for _, w := range words(text) {
		v[w] = true
	}
}
