package directory

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"sync"

	"github.com/agentgw/agentgw/directory/dirdb"
	"github.com/agentgw/agentgw/internal/ijson"
)

// ManifestCacheSize bounds how many parsed manifests a Registry over a
// dirdb.Fetcher keeps in memory; the others stay in the store and are
// parsed again on use. A parsed five-tool manifest is about 4 KB, so the
// default costs at most about 4 MB.
const ManifestCacheSize = 1024

// manifestCache is a small LRU of parsed manifests keyed by endpoint,
// version and hash (a version's content never changes).
type manifestCache struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	at  map[string]*list.Element
}

type cacheEntry struct {
	key string
	m   *Manifest
}

func newManifestCache(max int) *manifestCache {
	return &manifestCache{max: max, ll: list.New(), at: make(map[string]*list.Element)}
}

func cacheKey(endpoint, version, hash string) string {
	return endpoint + "\x00" + version + "\x00" + hash
}

func (c *manifestCache) get(key string) *Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.at[key]; e != nil {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).m
	}
	return nil
}

func (c *manifestCache) put(key string, m *Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.at[key]; e != nil {
		c.ll.MoveToFront(e)
		return
	}
	c.at[key] = c.ll.PushFront(&cacheEntry{key, m})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.at, old.Value.(*cacheEntry).key)
	}
}

// storedAgent is what the index keeps of a version it does not hold
// parsed: its agent name and title, read from the stored canonical bytes
// after checking that the bytes still match the stored hash and key.
// Decoding stops after the agent object, so a start over a large directory
// never parses the tools and their schemas.
func storedAgent(row dirdb.Version) (name, title string, err error) {
	if ijson.Hash(row.Canonical) != row.Hash {
		return "", "", errors.New("stored bytes do not match the stored hash")
	}
	var a struct{ JID, Name, Title, Version string }
	found := false
	if obj := leadingAgent(row.Canonical); obj != nil {
		if err := json.Unmarshal(obj, &a); err != nil {
			return "", "", errors.New("stored agent object does not decode")
		}
		found = true
	} else if found, err = agentByTokens(row.Canonical, &a); err != nil {
		return "", "", err
	}
	// encoding/json matches keys case-insensitively; canonical bytes from
	// the validator carry exactly these keys, and the full parse on use
	// checks everything else.
	if !found || a.JID != row.Endpoint || a.Version != row.Version {
		return "", "", errors.New("stored bytes do not match the stored key")
	}
	return a.Name, a.Title, nil
}

// leadingAgent returns the agent object of canonical bytes that begin with
// it, as RFC 8785 ordering puts it ("agent" sorts before every other
// top-level key of the schema), or nil. It only finds the object's end,
// honouring strings and escapes; json.Unmarshal validates the span.
func leadingAgent(c []byte) []byte {
	const prefix = `{"agent":{`
	if !bytes.HasPrefix(c, []byte(prefix)) {
		return nil
	}
	start := len(prefix) - 1
	depth, inStr := 0, false
	for i := start; i < len(c); i++ {
		switch ch := c[i]; {
		case inStr && ch == '\\':
			i++
		case ch == '"':
			inStr = !inStr
		case inStr:
		case ch == '{' || ch == '[':
			depth++
		case ch == '}' || ch == ']':
			depth--
			if depth == 0 {
				return c[start : i+1]
			}
		}
	}
	return nil
}

// agentByTokens finds the top-level agent object with a token decoder,
// for bytes whose first key is not "agent".
func agentByTokens(c []byte, a any) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(c))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false, errors.New("stored bytes are not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false, errors.New("stored bytes are not valid JSON")
		}
		if t == "agent" {
			if err := dec.Decode(a); err != nil {
				return false, errors.New("stored agent object does not decode")
			}
			return true, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false, errors.New("stored bytes are not valid JSON")
		}
	}
	return false, nil
}
