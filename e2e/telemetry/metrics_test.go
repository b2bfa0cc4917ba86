package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/agentgw/agentgw/callers/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/ids"
	"github.com/agentgw/agentgw/testkit"
	"github.com/agentgw/agentgw/testkit/e2e"
)

// TestMetricsDuringCalls scrapes /metrics while the gateway serves calls
// through Prosody, and checks /readyz.
func TestMetricsDuringCalls(t *testing.T) {
	addr := e2e.FreeAddr(t)
	e := e2e.Start(t, e2e.Options{Agents: []e2e.Agent{{Localpart: "weather"}}, Users: []string{"alice"}, Mutate: func(c *config.Config) {
		c.Metrics.Listen = addr
	}})
	c := e.Dial("alice")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 3; i++ {
		if _, err := c.Call(ctx, e.Endpoint("weather"), "echo", json.RawMessage(`{"message":"m"}`), agentclient.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testkit.WaitFor(t, 5*time.Second, "readyz", func() bool { code, _ := get("/readyz"); return code == 200 })
	_, body := get("/metrics")
	value := func(series string) float64 {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`)
		m := re.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("series %s missing from /metrics", series)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	if v := value(`agentgw_admissions_total{outcome="accepted"}`); v < 3 {
		t.Errorf("accepted admissions = %v, want >= 3", v)
	}
	if v := value(`agentgw_tasks{state="completed"}`); v < 3 {
		t.Errorf("completed tasks = %v, want >= 3", v)
	}
	if v := value(`agentgw_component_connected`); v != 1 {
		t.Errorf("component_connected = %v", v)
	}
	if v := value(`agentgw_task_duration_seconds_count{state="completed"}`); v < 3 {
		t.Errorf("task duration observations = %v", v)
	}
}

// TestMetricsCountReplays sends one invoke through Prosody twice with the
// same request-id: the retry is answered with the original task and counted
// as a replay, not as a second accepted admission. A third invoke reusing
// the request-id with other arguments counts as a conflict.
func TestMetricsCountReplays(t *testing.T) {
	addr := e2e.FreeAddr(t)
	te := e2e.StartTaskEnvConfig(t, []string{"alice"}, func(c *config.Config) { c.Metrics.Listen = addr }, nil)
	c := te.Dial("alice")
	scrape := func() map[string]float64 {
		t.Helper()
		var body string
		testkit.WaitFor(t, 30*time.Second, "/metrics", func() bool {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == 200
		})
		out := map[string]float64{}
		for _, series := range []string{
			`agentgw_admissions_total{outcome="accepted"}`,
			`agentgw_admissions_total{outcome="replay"}`,
			`agentgw_admissions_total{outcome="conflict"}`,
			`agentgw_replays_total`,
			`agentgw_conflicts_total`,
			`agentgw_admission_duration_seconds_count{outcome="replay"}`,
		} {
			m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("series %s missing from /metrics", series)
			}
			out[series], _ = strconv.ParseFloat(m[1], 64)
		}
		return out
	}
	delta := func(before, after map[string]float64) map[string]float64 {
		d := map[string]float64{}
		for k, v := range after {
			if dv := v - before[k]; dv != 0 {
				d[k] = dv
			}
		}
		return d
	}
	want := func(what string, got, want map[string]float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: metric deltas %v, want %v", what, got, want)
			return
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: metric deltas %v, want %v", what, got, want)
				return
			}
		}
	}
	rid := ids.New("req-")
	req := func(args string) *agentclient.InvokeRequest {
		return &agentclient.InvokeRequest{RequestID: rid, Tool: "echo", Version: te.Version, ManifestHash: te.Hash, Arguments: json.RawMessage(args)}
	}

	m0 := scrape()
	first, err := c.Invoke(te.Ctx, te.Ep, req(`{"message":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	m1 := scrape()
	want("first invoke", delta(m0, m1), map[string]float64{`agentgw_admissions_total{outcome="accepted"}`: 1})

	again, err := c.Invoke(te.Ctx, te.Ep, req(`{"message":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if again.TaskID != first.TaskID {
		t.Fatalf("retry got task %s, want the original %s", again.TaskID, first.TaskID)
	}
	m2 := scrape()
	want("same request-id again", delta(m1, m2), map[string]float64{
		`agentgw_admissions_total{outcome="replay"}`:                 1,
		`agentgw_replays_total`:                                      1,
		`agentgw_admission_duration_seconds_count{outcome="replay"}`: 1,
	})

	if _, err := c.Invoke(te.Ctx, te.Ep, req(`{"message":"other"}`)); err == nil {
		t.Fatal("same request-id with other arguments was accepted")
	}
	m3 := scrape()
	want("same request-id, other arguments", delta(m2, m3), map[string]float64{
		`agentgw_admissions_total{outcome="conflict"}`: 1,
		`agentgw_conflicts_total`:                      1,
	})
}
