// Package httpauth is the one bearer-token gate of the gateway's HTTP
// fronts (`agentgw mcp --http`, `agentgw a2a`). Every front acts as one
// XMPP account, so the token is the only thing between any local process
// (another user's, a browser page doing DNS rebinding) and that account's
// agents: it is always required.
package httpauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Bearer wraps next so that only requests carrying "Authorization: Bearer
// <token>" reach it; others get 401 with a WWW-Authenticate naming realm.
// An empty token is a programming error and panics.
func Bearer(token, realm string, next http.Handler) http.Handler {
	if token == "" {
		panic("httpauth: empty bearer token")
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Matches(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Matches compares digests in constant time, so neither the token's
// content nor its length leaks through timing.
func Matches(header string, want [32]byte) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		token = ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	return ok && match
}
