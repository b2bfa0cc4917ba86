package console

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Live task pages: the task page follows its task over Server-Sent Events
// (GET /tasks/{id}/live, text/event-stream) rather than by polling. The
// stream sends the task (the JSON of /tasks/{id}/state) at once and again
// at each new revision, then "end" when the task is settled, and closes.
// A revision is noticed when the gateway reports the task's event
// (TaskChanged), or within liveRecheck for changes it does not see (a task
// another cluster member runs). Each login holds at most
// maxStreamsPerSession streams, the console maxStreams.

const (
	maxStreamsPerSession = 4
	maxStreams           = 256
	liveRecheck          = 2 * time.Second
	liveKeepAlive        = 15 * time.Second
	// liveMaxAge ends a stream after this long; the page opens a new one.
	liveMaxAge = 30 * time.Minute
)

// hub wakes the streams that follow a task.
type hub struct {
	mu      sync.Mutex
	watch   map[string]map[chan struct{}]struct{}
	open    map[string]int // streams by session id
	total   int
	polls   atomic.Int64 // requests of /tasks/{id}/state
	streams atomic.Int64 // streams opened
}

func newHub() *hub {
	return &hub{watch: map[string]map[chan struct{}]struct{}{}, open: map[string]int{}}
}

// acquire takes a stream slot for session sid.
func (h *hub) acquire(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[sid] >= maxStreamsPerSession || h.total >= maxStreams {
		return false
	}
	h.open[sid]++
	h.total++
	h.streams.Add(1)
	return true
}

func (h *hub) release(sid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[sid]--; h.open[sid] <= 0 {
		delete(h.open, sid)
	}
	h.total--
}

func (h *hub) subscribe(taskID string) (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	if h.watch[taskID] == nil {
		h.watch[taskID] = map[chan struct{}]struct{}{}
	}
	h.watch[taskID][c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.watch[taskID], c)
		if len(h.watch[taskID]) == 0 {
			delete(h.watch, taskID)
		}
		h.mu.Unlock()
	}
}

func (h *hub) wake(taskID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.watch[taskID] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// TaskChanged tells the console that a task has a new revision; it never
// blocks (the gateway calls it from its event notifier).
func (s *Server) TaskChanged(taskID string) { s.live.wake(taskID) }

// LiveCounts are the requests of the polling fallback (/tasks/{id}/state)
// and the live streams opened since the console started.
func (s *Server) LiveCounts() (polls, streams int64) {
	return s.live.polls.Load(), s.live.streams.Load()
}

func (s *Server) taskLive(w http.ResponseWriter, r *http.Request, ss *session) {
	v, _, _, code := s.loadTask(r)
	if code != 0 {
		http.Error(w, http.StatusText(code), code)
		return
	}
	if !s.live.acquire(ss.id) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "Too many live pages open for this login.", http.StatusTooManyRequests)
		return
	}
	defer s.live.release(ss.id)
	wake, stop := s.live.subscribe(v.ID)
	defer stop()
	// The server's ReadTimeout would end the stream (its context) after
	// 30 s: a stream has no body to read, so no read deadline.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, data []byte) bool {
		if _, err := w.Write([]byte("event: " + event + "\ndata: ")); err != nil {
			return false
		}
		w.Write(data) // one line: JSON has no raw newline
		_, err := w.Write([]byte("\n\n"))
		rc.Flush()
		return err == nil
	}
	last := int64(-1)
	push := func(v *taskView) bool {
		if v.Revision == last {
			return true
		}
		last = v.Revision
		b, _ := json.Marshal(v)
		if !send("task", b) {
			return false
		}
		if v.Terminal {
			send("end", []byte("{}"))
			return false
		}
		return true
	}
	if !push(v) {
		return
	}
	recheck := time.NewTicker(liveRecheck)
	defer recheck.Stop()
	keep := time.NewTicker(liveKeepAlive)
	defer keep.Stop()
	deadline := time.NewTimer(liveMaxAge)
	defer deadline.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-deadline.C:
			return
		case <-keep.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			rc.Flush()
			continue
		case <-wake:
		case <-recheck.C:
		}
		if s.sessions.get(r.Context(), ss.id) == nil {
			return // logged out or expired
		}
		v, _, _, code := s.loadTask(r)
		if code != 0 || !push(v) {
			return
		}
	}
}
