package metrics_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/agentgw/agentgw/internal/metrics"
)

// serve runs m on a real loopback listener and returns its base URL.
func serve(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeListener: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeListener did not return after cancel")
		}
	})
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// scrape parses /metrics in the text format.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d: %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the sample of family name whose labels include
// want (a counter, gauge or untyped value, or a histogram's count).
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	got, ok := value(t, fams, name, labels)
	if !ok {
		t.Errorf("%s%v: missing", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func TestCountersMoveOnScrape(t *testing.T) {
	m := metrics.New()
	base := serve(t, m)

	before := scrape(t, base)
	for _, o := range []string{"accepted", "replay", "conflict", "rejected"} {
		mustValue(t, before, "agentgw_admissions_total", map[string]string{"outcome": o}, 0)
	}
	mustValue(t, before, "agentgw_replays_total", nil, 0)
	mustValue(t, before, "agentgw_component_connected", nil, 0)
	if _, ok := before["go_goroutines"]; !ok {
		t.Error("Go runtime collector missing")
	}
	if _, ok := before["process_start_time_seconds"]; !ok {
		t.Error("process collector missing")
	}

	m.AdmissionObserved(3*time.Millisecond, metrics.OutcomeAccepted)
	m.AdmissionObserved(time.Millisecond, metrics.OutcomeAccepted)
	m.AdmissionObserved(time.Millisecond, metrics.OutcomeReplay)
	m.AdmissionObserved(time.Millisecond, metrics.OutcomeConflict)
	m.AdmissionObserved(time.Millisecond, metrics.OutcomeRejected)
	m.AdmissionObserved(time.Millisecond, "attacker<chosen>")
	m.TaskSettled("completed", 2*time.Second)
	m.TaskSettled("failed", 40*time.Millisecond)
	m.TaskSettled("bogus", time.Second)
	m.EventSendFailed()
	m.EventSendFailed()
	m.SetConnected(true)
	m.Reconnected()
	m.SetBackendUp("everything@agents.example.test", true)
	m.SetBackendUp("im@agents.example.test", false)
	m.SetTaskStateSource(func(context.Context) (map[string]int, error) {
		return map[string]int{"running": 3, "completed": 7}, nil
	})

	after := scrape(t, base)
	mustValue(t, after, "agentgw_admissions_total", map[string]string{"outcome": "accepted"}, 2)
	mustValue(t, after, "agentgw_admissions_total", map[string]string{"outcome": "replay"}, 1)
	mustValue(t, after, "agentgw_admissions_total", map[string]string{"outcome": "conflict"}, 1)
	mustValue(t, after, "agentgw_admissions_total", map[string]string{"outcome": "rejected"}, 1)
	mustValue(t, after, "agentgw_admissions_total", map[string]string{"outcome": "other"}, 1)
	mustValue(t, after, "agentgw_replays_total", nil, 1)
	mustValue(t, after, "agentgw_conflicts_total", nil, 1)
	mustValue(t, after, "agentgw_admission_duration_seconds", map[string]string{"outcome": "accepted"}, 2)
	mustValue(t, after, "agentgw_task_duration_seconds", map[string]string{"state": "completed"}, 1)
	mustValue(t, after, "agentgw_task_duration_seconds", map[string]string{"state": "failed"}, 1)
	mustValue(t, after, "agentgw_task_duration_seconds", map[string]string{"state": "other"}, 1)
	mustValue(t, after, "agentgw_event_send_failures_total", nil, 2)
	mustValue(t, after, "agentgw_component_connected", nil, 1)
	mustValue(t, after, "agentgw_component_reconnects_total", nil, 1)
	mustValue(t, after, "agentgw_backend_up", map[string]string{"endpoint": "everything@agents.example.test"}, 1)
	mustValue(t, after, "agentgw_backend_up", map[string]string{"endpoint": "im@agents.example.test"}, 0)
	mustValue(t, after, "agentgw_tasks", map[string]string{"state": "running"}, 3)
	mustValue(t, after, "agentgw_tasks", map[string]string{"state": "completed"}, 7)
	mustValue(t, after, "agentgw_tasks", map[string]string{"state": "input_required"}, 0)

	// The attacker's label value never reaches the output.
	_, body := get(t, base+"/metrics")
	if strings.Contains(body, "attacker") || strings.Contains(body, "bogus") {
		t.Error("an unknown label value reached /metrics")
	}

	// The histogram bucket for 2s holds the completed task, the 1s one not.
	h := after["agentgw_task_duration_seconds"]
	for _, mt := range h.GetMetric() {
		if mt.GetLabel()[0].GetValue() != "completed" {
			continue
		}
		for _, b := range mt.Histogram.GetBucket() {
			want := uint64(0)
			if b.GetUpperBound() >= 2 {
				want = 1
			}
			if b.GetCumulativeCount() != want {
				t.Errorf("completed bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
	}

	m.SetConnected(false)
	m.RemoveBackend("im@agents.example.test")
	last := scrape(t, base)
	mustValue(t, last, "agentgw_component_connected", nil, 0)
	if _, ok := value(t, last, "agentgw_backend_up", map[string]string{"endpoint": "im@agents.example.test"}); ok {
		t.Error("removed backend still exported")
	}
}

func TestTaskSourceErrorKeepsScrapeUp(t *testing.T) {
	m := metrics.New()
	base := serve(t, m)
	m.SetTaskStateSource(func(context.Context) (map[string]int, error) {
		return nil, errors.New("database is locked")
	})
	m.EventSendFailed()
	fams := scrape(t, base)
	if _, ok := fams["agentgw_tasks"]; ok {
		t.Error("agentgw_tasks exported although the source failed")
	}
	mustValue(t, fams, "agentgw_task_state_source_errors_total", nil, 1)
	mustValue(t, fams, "agentgw_event_send_failures_total", nil, 1)
}

func TestHealthAndReadiness(t *testing.T) {
	m := metrics.New()
	base := serve(t, m)

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}

	code, body := get(t, base+"/readyz")
	if code != 503 || body != "not ready: component: not connected to the XMPP server\n" {
		t.Errorf("/readyz before connect = %d %q", code, body)
	}

	m.SetConnected(true)
	code, body = get(t, base+"/readyz")
	if code != 503 || body != "not ready: store: not open\n" {
		t.Errorf("/readyz without store = %d %q", code, body)
	}

	var storeErr atomic.Pointer[error]
	m.SetStoreCheck(func(ctx context.Context) error {
		if p := storeErr.Load(); p != nil {
			return *p
		}
		return nil
	})
	if code, body = get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz ready = %d %q", code, body)
	}

	e := errors.New("sql: database is closed\nsecond line")
	storeErr.Store(&e)
	if code, body = get(t, base+"/readyz"); code != 503 || body != "not ready: store: sql: database is closed\n" {
		t.Errorf("/readyz store down = %d %q", code, body)
	}
	storeErr.Store(nil)

	m.SetConnected(false)
	if code, _ = get(t, base+"/readyz"); code != 503 {
		t.Errorf("/readyz after disconnect = %d", code)
	}
	m.SetConnected(true)
	if code, _ = get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz after reconnect = %d", code)
	}

	// A custom rule replaces the default.
	var ready atomic.Bool
	m.SetReadiness(func() (bool, string) { return ready.Load(), "engine: recovering tasks" })
	if code, body = get(t, base+"/readyz"); code != 503 || body != "not ready: engine: recovering tasks\n" {
		t.Errorf("/readyz custom = %d %q", code, body)
	}
	ready.Store(true)
	if code, _ = get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz custom ready = %d", code)
	}

	resp, err := http.Post(base+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics = %d", resp.StatusCode)
	}
	if code, _ = get(t, base+"/nope"); code != 404 {
		t.Errorf("/nope = %d", code)
	}
}

func TestServeReportsListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = metrics.New().Serve(context.Background(), ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "metrics: listen on "+ln.Addr().String()) {
		t.Fatalf("Serve on a taken port: %v", err)
	}
}

func TestNilMetricsIsNoop(t *testing.T) {
	var m *metrics.Metrics
	m.AdmissionObserved(time.Second, metrics.OutcomeAccepted)
	m.TaskSettled("completed", time.Second)
	m.EventSendFailed()
	m.SetConnected(true)
	m.Reconnected()
	m.SetBackendUp("a@b", true)
	m.SetTaskStateSource(nil)
	if ok, _ := m.Ready(context.Background()); ok {
		t.Error("nil Metrics reports ready")
	}
}
