package adhoc

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/agentgw/agentgw/agentproto"
	"github.com/agentgw/agentgw/tasks"
)

// ProgressCache remembers the last progress text of each unsettled task
// from the engine's committed events, so that refreshing an executing
// stage costs a map lookup instead of reading the task's whole event log.
// Feed it every event (it is a tasks.Notifier); it forgets settled tasks
// and holds at most its bound, oldest first.
type ProgressCache struct {
	mu    sync.Mutex
	max   int
	text  map[string]string
	order []string

	// watchers are stages waiting for a task's next committed event.
	watchers map[string]map[chan struct{}]struct{}
}

// NewProgressCache bounds the cache to max tasks (default 10000).
func NewProgressCache(max int) *ProgressCache {
	if max <= 0 {
		max = 10000
	}
	return &ProgressCache{max: max, text: map[string]string{}, watchers: map[string]map[chan struct{}]struct{}{}}
}

// watch returns a channel that receives after each committed event of the
// task (coalesced: it holds at most one), and the function that ends the
// watch.
func (c *ProgressCache) watch(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.mu.Lock()
	if c.watchers[id] == nil {
		c.watchers[id] = map[chan struct{}]struct{}{}
	}
	c.watchers[id][ch] = struct{}{}
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		delete(c.watchers[id], ch)
		if len(c.watchers[id]) == 0 {
			delete(c.watchers, id)
		}
		c.mu.Unlock()
	}
}

func (c *ProgressCache) wake(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.watchers[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Notify implements tasks.Notifier; it never blocks for long.
func (c *ProgressCache) Notify(ev tasks.Event) {
	defer c.wake(ev.TaskID)
	switch {
	case ev.Type.Terminal():
		c.mu.Lock()
		delete(c.text, ev.TaskID)
		c.mu.Unlock()
	case ev.Type == agentproto.EventProgress:
		c.put(ev.TaskID, progressLine(ev.Payload), true)
	}
}

// put stores text; unless replace, only when the task has no entry (a
// value read from the store must not overwrite a newer event's).
func (c *ProgressCache) put(id, text string, replace bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.text[id]; ok && !replace {
		return
	}
	if _, ok := c.text[id]; !ok {
		c.order = append(c.order, id)
	}
	c.text[id] = text
	for len(c.text) > c.max && len(c.order) > 0 {
		delete(c.text, c.order[0])
		c.order = c.order[1:]
	}
	if len(c.order) > 2*c.max { // drop ids of settled tasks
		kept := c.order[:0]
		for _, x := range c.order {
			if _, ok := c.text[x]; ok {
				kept = append(kept, x)
			}
		}
		c.order = kept
	}
}

func (c *ProgressCache) get(id string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.text[id]
	return t, ok
}

// progressLine renders a progress payload: "40% — fetch — 2 of 5".
func progressLine(payload []byte) string {
	var p struct {
		Percent *float64 `json:"percent"`
		Stage   string   `json:"stage"`
		Message string   `json:"message"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	var parts []string
	if p.Percent != nil {
		parts = append(parts, strconv.FormatFloat(math.Round(*p.Percent*10)/10, 'f', -1, 64)+"%")
	}
	if p.Stage != "" {
		parts = append(parts, p.Stage)
	}
	if p.Message != "" {
		parts = append(parts, p.Message)
	}
	return strings.Join(parts, " — ")
}

// lastProgress is the task's last progress text: from the cache, or once
// (after a restart, or without a cache) from its stored events, which then
// fill the cache.
func (s *Service) lastProgress(ctx context.Context, taskID string) string {
	if t, ok := s.d.Progress.get(taskID); ok {
		return t
	}
	evs, err := s.d.Engine.Events(ctx, taskID)
	if err != nil {
		return ""
	}
	text := ""
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == agentproto.EventProgress {
			text = progressLine(evs[i].Payload)
			break
		}
	}
	if s.d.Progress != nil {
		s.d.Progress.put(taskID, text, false)
	}
	return text
}
