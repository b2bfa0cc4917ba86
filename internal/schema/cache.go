package schema

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Cache keeps compiled schemas keyed by the SHA-256 of their bytes, so the
// task engine compiles each registered schema once, not on every invoke.
// The key is computed here, never taken from the caller, so a wrong hash
// cannot select the wrong schema. It is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front = most recently used
	items map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key [sha256.Size]byte
	s   *Schema
}

// NewCache returns a cache holding at most max schemas (least recently
// used are evicted); max <= 0 means 1024.
func NewCache(max int) *Cache {
	if max <= 0 {
		max = 1024
	}
	return &Cache{max: max, ll: list.New(), items: make(map[[sha256.Size]byte]*list.Element)}
}

// Compile returns the compiled schema for data, compiling on a miss.
// Failures are not cached.
func (c *Cache) Compile(data []byte) (*Schema, error) {
	key := sha256.Sum256(data)
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		s := el.Value.(*cacheEntry).s
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()

	// Compile outside the lock; two goroutines may race to compile the
	// same schema, which only wastes work.
	s, err := Compile(data)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cacheEntry).s, nil
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, s: s})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).key)
	}
	return s, nil
}

// CompileInput is Compile plus the object-root requirement of input
// schemas.
func (c *Cache) CompileInput(data []byte) (*Schema, error) {
	s, err := c.Compile(data)
	if err != nil {
		return nil, err
	}
	if err := s.RequireObjectRoot(); err != nil {
		return nil, err
	}
	return s, nil
}

// Len reports how many schemas are cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
