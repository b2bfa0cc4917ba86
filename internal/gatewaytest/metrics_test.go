package gatewaytest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/agentgw/agentgw/agentclient"
	"github.com/agentgw/agentgw/internal/config"
	"github.com/agentgw/agentgw/internal/porttest"
)

// freeAddr picks an address that the gateway binds later (porttest).
func freeAddr(t *testing.T) string {
	addr, err := porttest.Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestMetricsDuringCalls scrapes /metrics while the gateway serves calls
// through Prosody, and checks /readyz.
func TestMetricsDuringCalls(t *testing.T) {
	addr := freeAddr(t)
	e := Start(t, Options{Agents: []Agent{{Localpart: "weather"}}, Users: []string{"alice"}, Mutate: func(c *config.Config) {
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
	WaitFor(t, 5*time.Second, "readyz", func() bool { code, _ := get("/readyz"); return code == 200 })
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
